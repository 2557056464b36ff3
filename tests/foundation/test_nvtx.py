"""NVTX checked, not assumed: a small NVTX tool (nvtx_injection.c beside this
file, built here with the C compiler) is injected through NVTX_INJECTION64_PATH into
a child Python process and logs the ranges fastmog pushes and pops. The host
MOG2 path needs no GPU, so this runs in CI too."""
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

import fastmog
from conftest import GPU_OK

HERE = pathlib.Path(__file__).resolve().parent


def _cuda_include():
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and (pathlib.Path(root) / "include" / "nvtx3").is_dir():
            return pathlib.Path(root) / "include"
    nvcc = shutil.which("nvcc")
    candidates = [pathlib.Path(nvcc).resolve().parent.parent / "include"] if nvcc else []
    candidates.append(pathlib.Path("/usr/local/cuda/include"))
    for c in candidates:
        if (c / "nvtx3").is_dir():
            return c
    return None


@pytest.fixture(scope="module")
def injection(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    include = _cuda_include()
    if cc is None or include is None:
        pytest.skip("needs a C compiler and the CUDA toolkit's NVTX headers")
    lib = tmp_path_factory.mktemp("nvtx") / "libnvtx_log.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", f"-I{include}",
                    str(HERE / "nvtx_injection.c"), "-o", str(lib)], check=True)
    return lib


def run_traced(injection, tmp_path, code, extra_env=None):
    log = tmp_path / "nvtx.log"
    env = dict(os.environ, NVTX_INJECTION64_PATH=str(injection), FASTMOG_NVTX_LOG=str(log))
    env.update(extra_env or {})
    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True, env=env)
    return [line.split("\t") for line in log.read_text().splitlines()]


def check_nesting(events):
    stack = []
    for e in events:
        if e[0] == "push":
            stack.append((e[1], e[2]))
        elif e[0] == "pop":
            assert stack, "pop without push"
            assert stack.pop()[0] == e[1], "popped another domain"
    assert not stack, f"ranges left open: {stack}"


def test_ranges_from_a_timer_are_named_nested_and_counted(injection, tmp_path):
    events = run_traced(injection, tmp_path, """
        import numpy as np, fastmog
        sub = fastmog.cpu.BackgroundSubtractorMOG2()
        frame = np.full((48, 64, 3), 100, np.uint8)
        with fastmog.nvtx_range("outer"):
            with fastmog.profile() as t:
                for _ in range(3):
                    sub.apply(frame)
            sub.apply(frame)   # no timer, NVTX off: no range
        @fastmog.nvtx_range("decorated")
        def f():
            sub.apply(frame, timer=fastmog.Timer())
        f()
    """)
    assert ["domain", "fastmog"] in events
    pushes = [e for e in events if e[0] == "push"]
    assert all(e[1] == "fastmog" for e in pushes)
    names = [e[2] for e in pushes]
    assert names == ["outer"] + ["cpu.BackgroundSubtractorMOG2.apply 48x64x3"] * 3 + [
        "decorated", "cpu.BackgroundSubtractorMOG2.apply 48x64x3"]
    assert sum(e[0] == "pop" for e in events) == len(pushes)
    check_nesting(events)
    # the timed applies sit inside "outer": push outer, (push apply, pop) x3, pop
    kinds = [e[0] for e in events if e[0] in ("push", "pop")]
    assert kinds[:8] == ["push", "push", "pop", "push", "pop", "push", "pop", "pop"]


def test_set_nvtx_and_environment_variable(injection, tmp_path):
    events = run_traced(injection, tmp_path, """
        import numpy as np, fastmog
        sub = fastmog.cpu.BackgroundSubtractorMOG2()
        frame = np.full((8, 8), 1, np.uint8)
        sub.apply(frame)              # on through FASTMOG_NVTX=1
        fastmog.set_nvtx(False)
        sub.apply(frame)              # off
        with fastmog.profile(nvtx=False):
            sub.apply(frame)          # a timer that asks for no ranges
        fastmog.set_nvtx(True)
        sub.apply(frame)
    """, {"FASTMOG_NVTX": "1"})
    pushes = [e for e in events if e[0] == "push"]
    assert len(pushes) == 2
    check_nesting(events)


@pytest.mark.gpu
def test_gpu_calls_push_nested_ranges(injection, tmp_path):
    events = run_traced(injection, tmp_path, """
        import numpy as np, fastmog
        s = fastmog.Stream()
        sub = fastmog.BackgroundSubtractorMOG2()
        frame = np.full((32, 48), 9, np.uint8)
        with fastmog.profile():
            m = sub.apply(frame, stream=s)     # nests the staging upload
            m.download(stream=s)
            s.synchronize()
    """)
    names = [e[2] for e in events if e[0] == "push"]
    assert names == ["BackgroundSubtractorMOG2.apply 32x48x1", "GpuMat.upload 32x48x1",
                     "GpuMat.download 32x48x1", "Stream.synchronize"]
    kinds = [e[0] for e in events if e[0] in ("push", "pop")]
    assert kinds == ["push", "push", "pop", "pop", "push", "pop", "push", "pop"]
    check_nesting(events)
