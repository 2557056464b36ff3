"""The type stubs of the C extension: mypy rejects a GPU call without
``stream=`` and accepts it with one, stubtest finds the stubs equal to the
extension, and the package type-checks. Skipped where mypy is not installed."""
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("mypy")

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Each line that mypy must reject ends in "# error: <part of the message>"; every
# other line must pass.
SNIPPET = textwrap.dedent("""\
    import numpy as np
    import fastmog

    frame = np.zeros((8, 8), np.uint8)
    sub = fastmog.BackgroundSubtractorMOG2()
    host = fastmog.cpu.BackgroundSubtractorMOG2()
    stream = fastmog.Stream()

    mask = sub.apply(frame, stream=stream)
    mask = sub.apply(frame, 0.5, stream=stream, fgmask=mask)
    host_mask: np.ndarray = mask.download(stream=stream)
    image = fastmog.GpuMat.from_array(frame, stream=stream)
    image.fill(7, stream=stream)
    image.upload(frame, stream=stream)
    image.copy_to(mask, stream=stream)
    background = sub.get_background_image(stream=stream)
    event = fastmog.Event().record(stream=stream)
    view = fastmog.asgpumat(image, stream=stream)[0:4, 0:4]
    sub.var_threshold = 25.0
    sub.setHistory(200)
    history: int = sub.getHistory()
    host_mask = host.apply(frame)
    batch = sub.apply_batch([frame, frame], 0.5, stream=stream, known_foreground=[None, frame])
    first: fastmog.GpuMat = batch[0]
    host_masks: np.ndarray = host.apply_batch(np.stack([frame, frame]))
    cameras = fastmog.apply_cameras([sub], [frame], [0.5], stream=stream, fgmasks=[mask])

    sub.apply(frame)  # error: Missing named argument "stream"
    sub.apply(frame, -1.0, stream)  # error: Too many positional arguments
    mask.download()  # error: Missing named argument "stream"
    fastmog.GpuMat.from_array(frame)  # error: Missing named argument "stream"
    image.fill(7)  # error: Missing named argument "stream"
    image.upload(frame)  # error: Missing named argument "stream"
    image.copy_to(mask)  # error: Missing named argument "stream"
    sub.get_background_image()  # error: Missing named argument "stream"
    sub.getBackgroundImage()  # error: Missing named argument "stream"
    fastmog.Event().record()  # error: Missing named argument "stream"
    fastmog.asgpumat(image)  # error: Missing named argument "stream"
    host.apply(frame, stream=stream)  # error: Unexpected keyword argument "stream"
    sub.apply_batch([frame])  # error: Missing named argument "stream"
    fastmog.apply_cameras([sub], [frame])  # error: Missing named argument "stream"
    fastmog.apply_cameras([host], [frame], stream=stream)  # error: List item 0 has incompatible type
    host.apply_batch([frame], stream=stream)  # error: Unexpected keyword argument "stream"
    sub.history = 1.5  # error: Incompatible types in assignment
    sub.frame_count = 3  # error: Property "frame_count" defined in "_MOG2Base" is read-only
    """)


def _env():
    # mypy must see the fastmog these tests import (installed, or python/ in place).
    import fastmog
    here = str(pathlib.Path(fastmog.__file__).resolve().parent.parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (here, os.environ.get("PYTHONPATH")) if p)}


def _mypy(args, cwd):
    """Runs mypy in a subprocess, away from the repository's configuration unless
    cwd is the repository, with no cache."""
    cmd = [sys.executable, "-m", "mypy", "--cache-dir", os.devnull, *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=_env(),
                          timeout=600)


def test_gpu_calls_need_stream_for_mypy(tmp_path):
    (tmp_path / "snippet.py").write_text(SNIPPET)
    (tmp_path / "mypy.ini").write_text("[mypy]\n")
    r = _mypy(["--config-file", "mypy.ini", "--show-error-codes", "snippet.py"], tmp_path)
    # Something like: snippet.py:24: error: Missing named argument "stream" for "apply" ...
    reported = {}
    for line in r.stdout.splitlines():
        m = re.match(r"snippet\.py:(\d+): error: (.*)", line)
        if m:
            reported.setdefault(int(m.group(1)), []).append(m.group(2))
    expected = {n: line.split("# error: ", 1)[1]
                for n, line in enumerate(SNIPPET.splitlines(), start=1) if "# error: " in line}
    assert reported.keys() == expected.keys(), r.stdout + r.stderr
    for n, part in expected.items():
        assert any(part in msg for msg in reported[n]), (n, part, reported[n])
    assert r.returncode == 1


def test_stubs_match_the_extension():
    # Every public name, signature and property of fastmog._fastmog against the
    # module as built: catches a stub that drifts from src/.
    r = subprocess.run([sys.executable, "-m", "mypy.stubtest", "fastmog._fastmog"],
                       capture_output=True, text=True, env=_env(), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.skipif(not (ROOT / "python" / "fastmog").is_dir(),
                    reason="needs the source tree (python/fastmog)")
def test_package_type_checks():
    # The configuration is [tool.mypy] of pyproject.toml: the package sources.
    r = _mypy([], ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success" in r.stdout


def test_stubgen_reads_the_extension(tmp_path):
    # stubgen once died on a property docstring it took for a type ("Sync mode: ...").
    # mypy.stubgen is compiled (mypyc), so `python -m` cannot run it: call main().
    code = "import sys; from mypy.stubgen import main; main(sys.argv[1:])"
    r = subprocess.run([sys.executable, "-c", code, "-m", "fastmog._fastmog", "-o", str(tmp_path)],
                       capture_output=True, text=True, env=_env(), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "class _Timer" in (tmp_path / "fastmog" / "_fastmog.pyi").read_text()
