"""fastmog's pytest plugin as a user's project meets it: a test folder of its
own (no fastmog conftest, no ini declaring `gpu`) run in a child pytest with
--strict-markers. The `gpu` marker is known there; tests marked `gpu` or using
`gpu_benchmark` run where CUDA is usable and are skipped with the reason where
it is not; rounds that queue no GPU work say "no GPU work", not 0 ms."""
import re
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points

import pytest

import fastmog
from fastmog import pytest_plugin

USER_TESTS = """
    import numpy as np
    import pytest

    import fastmog


    @pytest.mark.gpu
    def test_marked():
        with fastmog.Stream() as s:   # CudaError where there is no GPU
            s.synchronize()


    def test_gpu_rounds(gpu_benchmark):
        sub = fastmog.BackgroundSubtractorMOG2()
        frame = np.full((64, 64), 7, np.uint8)
        with fastmog.Stream() as s:
            gpu_benchmark.pedantic(sub.apply, args=(frame,), kwargs={"stream": s},
                                   rounds=3, iterations=1)
        assert gpu_benchmark.extra_info["gpu_ms_max"] > 0


    def test_host_rounds(gpu_benchmark):
        sub = fastmog.cpu.BackgroundSubtractorMOG2()
        frame = np.full((32, 32), 7, np.uint8)
        gpu_benchmark.pedantic(sub.apply, args=(frame,), rounds=5, iterations=1)
        assert gpu_benchmark.extra_info["gpu_rounds"] == 5
        assert gpu_benchmark.extra_info["gpu_ms_max"] is None   # not 0.0


    def test_host_only():
        fastmog.cpu.BackgroundSubtractorMOG2().apply(np.zeros((8, 8), np.uint8))
"""


def _run_user_project(tmp_path, files, *args):
    """pytest in a child process on a project of its own, as its user runs it."""
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    installed = any(e.value == "fastmog.pytest_plugin" for e in entry_points(group="pytest11"))
    load = [] if installed else ["-p", "fastmog.pytest_plugin"]  # a source checkout
    return subprocess.run(
        [sys.executable, "-m", "pytest", *load, "-p", "no:cacheprovider", "-rs",
         "--strict-markers", *args],
        capture_output=True, text=True, cwd=tmp_path, timeout=300)


def test_user_project_gpu_tests_run_or_skip_with_the_reason(tmp_path):
    pytest.importorskip("pytest_benchmark")
    r = _run_user_project(tmp_path, {"pytest.ini": "[pytest]\n", "test_user.py": USER_TESTS})
    out = r.stdout + r.stderr
    assert "'gpu' not found in `markers`" not in out
    assert r.returncode == 0, out
    if fastmog.cuda_available():
        assert "4 passed" in r.stdout, out
        summary = r.stdout.split("fastmog GPU time per round", 1)[1]
        host = next(line for line in summary.splitlines() if line.startswith("test_host_rounds"))
        assert "no GPU work" in host and "0.0000" not in host, summary
    else:
        assert "1 passed, 3 skipped" in r.stdout, out
        reason = pytest_plugin.no_gpu_reason()
        assert reason.startswith("needs a CUDA GPU: ")
        skipped = re.findall(r"^SKIPPED \[(\d+)\] test_user\.py\S*: (.*)$", r.stdout, re.M)
        assert sum(int(n) for n, _ in skipped) == 3, out
        assert {why for _, why in skipped} == {reason}, out
        assert "CudaError" not in out


def test_gpu_marker_is_registered_for_strict_markers(tmp_path):
    r = _run_user_project(tmp_path, {"pytest.ini": "[pytest]\n"}, "--markers")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "@pytest.mark.gpu: needs a usable CUDA GPU" in r.stdout


def test_a_project_that_declares_gpu_owns_it(tmp_path):
    # Its marker text stays, and its own conftest decides when to skip (as fastmog's does).
    ini = "[pytest]\nmarkers =\n    gpu: runs on the project's own GPU farm\n"
    marked = """
        import pytest

        @pytest.mark.gpu
        def test_marked():
            pass
    """
    r = _run_user_project(tmp_path, {"pytest.ini": ini, "test_own.py": marked})
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr
    r = _run_user_project(tmp_path, {}, "--markers")
    assert "gpu: runs on the project's own GPU farm" in r.stdout
    assert "needs a usable CUDA GPU" not in r.stdout


def test_host_only_rounds_say_no_gpu_work():
    info = pytest_plugin._round_info([[], [], []])
    assert info["gpu_rounds"] == 3
    assert info["gpu_ms_min"] is None and info["gpu_ms_max"] is None
    gpu = pytest_plugin._round_info([[0.5, 0.25], [1.0], []])
    assert (gpu["gpu_ms_min"], gpu["gpu_ms_max"]) == (0.0, 1.0)
    assert gpu["gpu_ms_median"] == 0.75
    lines = pytest_plugin._summary_lines([("test_host", info), ("test_gpu", gpu)])
    assert lines[1].split() == ["test_host", "no", "GPU", "work"]
    assert lines[2].split() == ["test_gpu", "0.0000", "0.7500", "0.5833", "1.0000"]


@pytest.mark.gpu
def test_a_gpu_marked_test_runs_only_with_a_gpu():
    assert fastmog.cuda_available()


def test_fastmogs_own_gpu_tests_are_skipped_once(request):
    # pyproject.toml declares `gpu`, so tests/conftest.py skips them and the plugin,
    # loaded too, adds no second skip.
    gpu_items = [item for item in request.session.items if item.get_closest_marker("gpu")]
    assert gpu_items  # the one above, at least
    for item in gpu_items:
        gpu_skips = [m for m in item.iter_markers("skip")
                     if "needs a CUDA GPU" in m.kwargs.get("reason", "")]
        assert len(gpu_skips) == (0 if fastmog.cuda_available() else 1)
