"""What the sdist and the wheel carry: every source the build compiles (an
sdist without cuda/*.cu builds a module with undefined symbols) and the typing
files. The archives come from $FASTMOG_SDIST (set by .ci/run and
.ci/build-wheel) and $FASTMOG_WHEEL (set by .ci/build-wheel); without them
these tests skip."""
import os
import pathlib
import tarfile
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCES = ["src/*.c", "src/*.h", "cuda/*.cu", "cuda/*.h", "python/fastmog/**/*.py"]
TYPING = ["python/fastmog/py.typed", "python/fastmog/_fastmog.pyi"]


def _archive(var):
    path = os.environ.get(var)
    if not path:
        pytest.skip(f"set {var} to the archive to check (.ci/run and .ci/build-wheel do)")
    return pathlib.Path(path)


def _expected():
    files = {p.relative_to(ROOT).as_posix() for pattern in SOURCES for p in ROOT.glob(pattern)}
    assert any(f.startswith("cuda/") and f.endswith(".cu") for f in files)
    return files | set(TYPING) | {"build_backend.py", "nvcc_search.py", "setup.py",
                                  "pyproject.toml", "README.md"}


def test_sdist_has_every_source():
    sdist = _archive("FASTMOG_SDIST")
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    missing = sorted(_expected() - names)
    assert not missing, f"{sdist.name} lacks {missing}"


def test_wheel_has_the_module_and_typing_files():
    wheel = _archive("FASTMOG_WHEEL")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    assert {"fastmog/py.typed", "fastmog/_fastmog.pyi", "fastmog/__init__.py",
            "fastmog/video/__init__.py", "fastmog/app/cli.py"} <= names
    assert any(n.startswith("fastmog/_fastmog.") and n.endswith(".so") for n in names), names
