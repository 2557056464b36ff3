"""What CI runs (.ci/run): the README's two commands as a new user runs them,
in fresh venvs of every Python the README supports (.ci/fresh-venv reads them
from the README itself), the host sanitizer build from a fresh venv, and the
main test run of the sdist install last, so its summary closes CI's log."""
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
if not (ROOT / ".ci" / "run").is_file():  # an unpacked sdist carries no .ci/
    pytest.skip("no .ci/ here: a checkout's tests", allow_module_level=True)
CI = (ROOT / ".ci" / "run").read_text()
NEWEST_MINOR = 13  # the newest Python 3 that CI's machines have (pyenv)


def _commands(text):
    return [line for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_fresh_venv_runs_the_readmes_two_commands():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Two commands.*?```bash\n(.*?)```", readme, re.S).group(1)
    expected = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    r = subprocess.run(["bash", str(ROOT / ".ci" / "fresh-venv"), "--commands"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [c for c in expected if c]
    assert r.stdout.splitlines()[1] == "python -m pytest"


def test_ci_runs_them_on_every_python_and_sanitizes_from_a_fresh_venv():
    python = re.search(r'requires-python = ">=3\.(\d+)"',
                       (ROOT / "pyproject.toml").read_text()).group(1)
    runs = re.findall(r"bash \.ci/fresh-venv (3\.\d+)", CI)
    assert runs == [f"3.{minor}" for minor in range(int(python), NEWEST_MINOR + 1)]
    assert "bash .ci/fresh-venv 3.11 bash .ci/sanitize-host" in CI
    # The commands are run, not skipped; only the architectures are narrowed.
    for line in _commands(CI):
        if ".ci/fresh-venv" in line:
            assert re.fullmatch(r"step env FASTMOG_CUDA_ARCH=75 bash \.ci/fresh-venv .*", line)


def test_the_main_pytest_run_closes_the_log():
    lines = _commands(CI)
    assert lines[0] == "set -euo pipefail"
    assert lines[-1] == "FASTMOG_SDIST=$sdist python3 -m pytest"
    assert not any("|| true" in line or "set +e" in line for line in lines)


def test_ci_cross_compiles_the_host_code_for_aarch64_with_setups_flags():
    """docs/install.md's claim that the source build has nothing x86-only."""
    assert "step bash .ci/cross-compile-aarch64" in _commands(CI)
    r = subprocess.run(["bash", str(ROOT / ".ci" / "cross-compile-aarch64"), "--flags"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "-std=c11" in r.stdout.split() and "-fopenmp" in r.stdout.split()


def test_ci_installs_the_real_rtsp_server_before_the_tests_that_use_it():
    """The live tests' GStreamer RTSP server runs in CI, not skipped there."""
    commands = _commands(CI)
    installs = commands.index("step bash .ci/rtsp-server")
    assert installs < min(k for k, c in enumerate(commands) if "fresh-venv" in c or "pytest" in c)
