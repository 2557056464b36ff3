"""Every Python code block of the README and of docs/*.md runs (GPU blocks on
a GPU), and the README's two commands are the ones CI and the tests use."""
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import fastmog

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
README = (ROOT / "README.md").read_text()
BLOCKS = [(doc.relative_to(ROOT).as_posix(), i, code)
          for doc in DOCUMENTS
          for i, code in enumerate(re.findall(r"```python\n(.*?)```", doc.read_text(), re.S))]
GPU_WORDS = ("Stream(", "stream=", "GpuMat")


def _needs_gpu(code):
    return any(w in code for w in GPU_WORDS)


def test_the_documents_have_python_blocks():
    # a renamed fence or a moved page would otherwise leave nothing to run
    assert {doc for doc, _, _ in BLOCKS} >= {"README.md", "docs/guide.md", "docs/install.md"}


@pytest.mark.parametrize("doc, index", [
    pytest.param(doc, i, id=f"{doc}:{i}", marks=pytest.mark.gpu) if _needs_gpu(code)
    else pytest.param(doc, i, id=f"{doc}:{i}")
    for doc, i, code in BLOCKS])
def test_python_block_runs(doc, index, tmp_path):
    code = next(c for d, i, c in BLOCKS if d == doc and i == index)
    if ("cupy" in code or "torch" in code):
        pytest.importorskip("cupy")
        pytest.importorskip("torch")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=tmp_path, timeout=300)
    assert r.returncode == 0, f"{doc} block {index} failed:\n{code}\n{r.stderr}"


def test_the_two_commands_are_what_ci_runs():
    first, second = re.search(r"## Two commands.*?```bash\n(.*?)\n(.*?)\n```", README, re.S).groups()
    assert first.startswith('pip install ".[test]" && python -m fastmog')
    assert second.startswith("python -m pytest")
    ci = (ROOT / ".ci" / "run").read_text()
    # CI installs the same [test] extras (and Dask, for tests/job/test_dask.py), from
    # the sdist built from this tree.
    assert 'python3 -m build --sdist' in ci and 'pip install --quiet "$sdist[test,dask]"' in ci
    assert "python3 -m pytest" in ci


def test_image_display_is_a_png():
    png = fastmog.Image(np.arange(12, dtype=np.uint8).reshape(3, 4))._repr_png_()
    assert png.startswith(b"\x89PNG")
    cv2 = pytest.importorskip("cv2")
    colour = np.zeros((5, 6, 3), np.uint8)
    colour[..., 2] = 200  # red in BGR
    back = cv2.imdecode(np.frombuffer(fastmog.Image(colour)._repr_png_(), np.uint8),
                        cv2.IMREAD_COLOR)
    assert np.array_equal(back, colour)
