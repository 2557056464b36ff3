"""What the sdist and the wheel carry: every source the build compiles (an
sdist without cuda/*.cu builds a module with undefined symbols) and the typing
files; and that a wheel keeps its manylinux_2_28 promise (no library it ships
asks glibc for a version newer than 2.28) under its distribution's name. The
archives come from $FASTMOG_SDIST (set by .ci/run and .ci/build-wheel) and
$FASTMOG_WHEEL, with its CUDA major in $FASTMOG_WHEEL_CUDA (set by
.ci/build-wheel); without them these tests skip."""
import os
import pathlib
import re
import shutil
import subprocess
import tarfile
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCES = ["src/*.c", "src/*.h", "compat/*.c", "compat/*.h", "cuda/*.cu", "cuda/*.h",
           "python/fastmog/**/*.py"]
OLDEST_GLIBC = (2, 28)   # the wheels' manylinux tag
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


def test_wheel_is_named_for_its_cuda_major_and_tagged_manylinux_2_28():
    wheel = _archive("FASTMOG_WHEEL")
    major = os.environ.get("FASTMOG_WHEEL_CUDA")
    if not major:
        pytest.skip("set FASTMOG_WHEEL_CUDA to the wheel's CUDA major (.ci/build-wheel does)")
    assert wheel.name.startswith(f"fastmog_cu{major}-"), wheel.name
    assert "manylinux_2_28_x86_64" in wheel.name, wheel.name
    with zipfile.ZipFile(wheel) as zf:
        metadata = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA")))
    assert f"Name: fastmog-cu{major}" in metadata.decode()


@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs binutils' objdump")
def test_no_library_in_the_wheel_needs_a_glibc_newer_than_its_tag(tmp_path):
    wheel = _archive("FASTMOG_WHEEL")
    with zipfile.ZipFile(wheel) as zf:
        libraries = [n for n in zf.namelist() if re.search(r"\.so(\.\d+)*$", n)]
        zf.extractall(tmp_path, libraries)
    assert any("_fastmog." in n for n in libraries) and any("libgomp" in n for n in libraries)
    for name in libraries:
        dump = subprocess.run(["objdump", "-T", str(tmp_path / name)], capture_output=True,
                              text=True, check=True).stdout
        versions = {tuple(int(x) for x in v.split(".")) for v in
                    re.findall(r"\bGLIBC_(\d+(?:\.\d+)+)\b", dump)}
        assert versions, name
        newer = sorted(v for v in versions if v[:2] > OLDEST_GLIBC)
        assert not newer, f"{name} needs glibc {newer}"
