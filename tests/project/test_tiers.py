"""The test suite's own rules: `slow` tests are skipped unless --slow is
given, and only the fuzz tests need hypothesis."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import fastmog

REPO = pathlib.Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"


def run_pytest(args, cwd, prelude=""):
    code = f"import sys\n{prelude}\nimport pytest\nsys.exit(pytest.main({args!r}))"
    # the fastmog under test, whether installed or on a relative PYTHONPATH
    package_root = str(pathlib.Path(fastmog.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [package_root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


HIDE_HYPOTHESIS = """
class HideHypothesis:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("hypothesis", "_hypothesis_pytestplugin"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, HideHypothesis())
"""


def test_slow_tests_run_only_with_the_option(tmp_path):
    # the suite's own conftest and markers, on two tiny tests
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_two.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.slow\n"
        "def test_long():\n    pass\n\n"
        "def test_short():\n    pass\n")
    common = ["-p", "no:cacheprovider", "-c", str(REPO / "pyproject.toml"),
              "--rootdir", str(tmp_path), "-rs", str(tmp_path)]
    default = run_pytest(common, tmp_path)
    assert default.returncode == 0, default.stdout + default.stderr
    assert "1 passed, 1 skipped" in default.stdout, default.stdout
    assert "slow tier: run with --slow" in default.stdout
    everything = run_pytest(common + ["--slow"], tmp_path)
    assert everything.returncode == 0, everything.stdout + everything.stderr
    assert "2 passed" in everything.stdout and "skipped" not in everything.stdout


def test_reliability_tests_do_not_need_hypothesis():
    # an import hook makes hypothesis fail to import as if it were not
    # installed; its pytest plugin would then be missing too
    r = run_pytest(["-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--co", "-q", "-rs",
                    "tests/robustness/test_reliability.py", "tests/robustness/test_fuzz.py"],
                   REPO, prelude=HIDE_HYPOTHESIS)
    assert r.returncode == 0, r.stdout + r.stderr
    collected = [line for line in r.stdout.splitlines() if "::" in line]
    assert any(line.startswith("tests/robustness/test_reliability.py::"
                               "test_host_subtractor_does_not_leak")
               for line in collected), r.stdout
    assert len([c for c in collected if "test_reliability.py" in c]) >= 8, r.stdout
    assert not any("test_fuzz.py" in c for c in collected), r.stdout
    assert "could not import 'hypothesis'" in r.stdout, r.stdout


def test_fuzz_tests_are_collected_with_hypothesis():
    pytest.importorskip("hypothesis")
    r = run_pytest(["-p", "no:cacheprovider", "--co", "-q", "tests/robustness/test_fuzz.py"],
                   REPO)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "test_fuzz.py::test_fuzz_host_subtractor" in r.stdout


def test_default_tier_checks_every_sequence_and_every_case():
    from fastmog.testing import CASES, DEFAULT_TIER, GPU_CASES, SEQUENCES

    assert set(DEFAULT_TIER) == set(SEQUENCES)
    assert {case for cases in DEFAULT_TIER.values() for case in cases} == set(CASES)
    for sequence, cases in DEFAULT_TIER.items():
        assert set(cases) <= set(CASES), sequence
        # host = OpenCV and GPU = host, each on at least one case of every sequence
        assert any(case in GPU_CASES for case in cases), sequence
