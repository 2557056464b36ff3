"""Where fastmog's build finds nvcc: the one search that setup.py and the build
backend (build_backend.py) share. Standard library only, so it imports (and its
tests run) where setuptools is not installed, as in a fresh Python 3.12 venv.

Environment:
  FASTMOG_NVCC   "auto" (default): a system toolkit if there is one (CUDA_HOME
                 or CUDA_PATH, then nvcc on PATH, then /usr/local/cuda), else
                 the PyPI wheels; "pip": always the PyPI wheels, ignoring any
                 system toolkit (to test that path on a machine that has one).
"""
import importlib.util
import os
import shutil
import subprocess

# nvcc with its cicc (nvvm) and crt headers, the runtime's headers and static
# library, NVTX v3 headers and CCCL: one CUDA 13.0 release, pinned together by
# NVIDIA's meta-package. They all unpack into site-packages/nvidia/cu13, laid
# out like a toolkit root.
PIP_CUDA = "cuda-toolkit[nvcc,crt,nvvm,cudart,nvtx,cccl]~=13.0.2"
PIP_CUDA_SUBDIR = "cu13"

# Data-centre and desktop GPUs from Turing onwards; a build keeps those the
# nvcc it found can compile for (CUDA 12.4 stops at 9.0, 12.8 and 13 reach
# 12.0), PTX for the newest of them.
DEFAULT_ARCHS = "75;80;86;89;90;100;120"

_MODES = ("auto", "pip")
DEFAULT_ROOTS = ("/usr/local/cuda",)


def nvcc_mode():
    mode = os.environ.get("FASTMOG_NVCC", "").strip().lower() or "auto"
    if mode not in _MODES:
        raise ValueError(f"FASTMOG_NVCC must be one of {', '.join(_MODES)}; got {mode!r}")
    return mode


def _has_nvcc(root):
    # The headers too: an nvcc wrapper script on PATH is not a toolkit root.
    return bool(root) and all(os.path.isfile(os.path.join(root, *part)) for part in (
        ("bin", "nvcc"), ("include", "cuda_runtime_api.h")))


def find_system_cuda():
    """Root of an installed CUDA toolkit, or None."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if _has_nvcc(root):
            return root
    nvcc = shutil.which("nvcc")
    if nvcc:
        root = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
        if _has_nvcc(root):
            return root
    for root in DEFAULT_ROOTS:
        if _has_nvcc(root):
            return root
    return None


def find_pip_cuda():
    """Root of the CUDA wheels (site-packages/nvidia/cu13) importable here, or None."""
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        root = os.path.join(base, PIP_CUDA_SUBDIR)
        if _has_nvcc(root):
            return root
    return None


def find_cuda_home():
    """The toolkit root setup.py compiles with, or None if there is none."""
    if nvcc_mode() == "pip":
        return find_pip_cuda()
    return find_system_cuda() or find_pip_cuda()


def cuda_build_requires():
    """What the build needs beyond setuptools' own requirements: the wheels,
    only where no toolkit is found (they are a ~100 MB download) or
    FASTMOG_NVCC=pip asks for them."""
    if nvcc_mode() == "pip" or find_system_cuda() is None:
        return [PIP_CUDA]
    return []


def default_archs(nvcc):
    """DEFAULT_ARCHS less those `nvcc --list-gpu-code` does not list (all of
    them where nvcc cannot say)."""
    try:
        listed = subprocess.run([nvcc, "--list-gpu-code"], check=True, capture_output=True,
                                text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return DEFAULT_ARCHS
    known = {code[len("sm_"):] for code in listed if code.startswith("sm_")}
    kept = [a for a in DEFAULT_ARCHS.split(";") if a in known]
    return ";".join(kept) or DEFAULT_ARCHS
