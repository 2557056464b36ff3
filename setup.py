"""Build of fastmog: the C extension in src/ plus CUDA objects from cuda/.

build_ext compiles every cuda/*.cu with nvcc into an object file and links
those objects, with the static CUDA runtime, into fastmog._fastmog.

Environment:
  CUDA_HOME / CUDA_PATH   toolkit root (else nvcc on PATH, else /usr/local/cuda,
                          else NVIDIA's PyPI wheels that build_backend.py adds
                          to the build requirements where no toolkit is found)
  FASTMOG_NVCC            "pip": build with those wheels even where a toolkit is
                          installed (see nvcc_search.py)
  FASTMOG_CUDA_ARCH       semicolon-separated SM numbers to build cubins for,
                          e.g. "90" or "80;90"; PTX is embedded for the last.
  FASTMOG_GLIBC_COMPAT    "1": bind glibc calls to versions glibc 2.28 has
                          (compat/glibc_compat.c), for a manylinux_2_28 wheel
                          built on a newer glibc; x86-64 only
  FASTMOG_NVCC_FLAGS      extra nvcc flags, e.g. "--compress-mode=size"
                          (CUDA 12.8 and later) for a smaller module
  FASTMOG_OPENMP          "0": build without OpenMP (host loops and large host
                          copies on one thread; no libgomp to vendor)
"""
import os
import shlex
import subprocess
import sys
from glob import glob

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# The nvcc search is shared with the build backend; both sit beside this file.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nvcc_search  # noqa: E402


def find_cuda_home():
    root = nvcc_search.find_cuda_home()
    if root:
        return root
    if nvcc_search.nvcc_mode() == "pip":
        sys.exit(
            "error: FASTMOG_NVCC=pip, but NVIDIA's CUDA wheels are not installed in the\n"
            "build environment. Build with pip's build isolation (the default), or\n"
            f"pip install \"{nvcc_search.PIP_CUDA}\" first."
        )
    sys.exit(
        "error: fastmog needs nvcc to build, and found neither a CUDA Toolkit nor\n"
        "NVIDIA's CUDA wheels. `pip install .` fetches the wheels by itself; with\n"
        f"--no-build-isolation, pip install \"{nvcc_search.PIP_CUDA}\" first, or\n"
        "install the toolkit (https://developer.nvidia.com/cuda-downloads) and set\n"
        "CUDA_HOME to its root, or put nvcc on PATH."
    )


def gencode_flags(archs):
    numbers = [a.strip() for a in archs.split(";") if a.strip()]
    if not numbers or not all(a.isdigit() for a in numbers):
        sys.exit(f"error: FASTMOG_CUDA_ARCH must look like '75;90', got {archs!r}")
    flags = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in numbers]
    flags.append(f"-gencode=arch=compute_{numbers[-1]},code=compute_{numbers[-1]}")
    return flags


class BuildExtWithNvcc(build_ext):
    """Compiles cuda/*.cu with nvcc, then builds the extension as usual."""

    def build_extensions(self):
        cuda_home = find_cuda_home()
        print(f"fastmog: compiling CUDA with {cuda_home}", flush=True)
        nvcc = os.path.join(cuda_home, "bin", "nvcc")
        include = os.path.join(cuda_home, "include")
        lib_dirs = [d for d in (os.path.join(cuda_home, "lib64"),
                                os.path.join(cuda_home, "lib")) if os.path.isdir(d)]
        archs = os.environ.get("FASTMOG_CUDA_ARCH") or nvcc_search.default_archs(nvcc)
        print(f"fastmog: GPU architectures {archs} (PTX for the last)", flush=True)
        for ext in self.extensions:
            ext.include_dirs += [include]
            ext.library_dirs += lib_dirs
            ext.extra_objects += self.compile_cuda(nvcc, include, archs, ext.depends)
        super().build_extensions()

    def compile_cuda(self, nvcc, include, archs, depends):
        objects = []
        out_dir = os.path.join(self.build_temp, "cuda")
        os.makedirs(out_dir, exist_ok=True)
        for source in sorted(glob("cuda/*.cu")):
            obj = os.path.join(out_dir, os.path.basename(source)[:-3] + ".o")
            inputs = [source] + depends
            stale = self.force or not os.path.exists(obj) or any(
                os.path.getmtime(d) > os.path.getmtime(obj) for d in inputs)
            if stale:
                cmd = [nvcc, "-c", source, "-o", obj, "-O3", "-std=c++17",
                       "--fmad=false",  # bit-exact with the host reference
                       "-Xcompiler", "-fPIC,-fvisibility=hidden",
                       "-I", include, "-I", "cuda"] + gencode_flags(archs) \
                    + shlex.split(os.environ.get("FASTMOG_NVCC_FLAGS", ""))
                print(" ".join(cmd), flush=True)
                subprocess.run(cmd, check=True)
            objects.append(obj)
        return objects


def env_flag(name, default):
    value = os.environ.get(name, "").strip()
    if value not in ("", "0", "1"):
        sys.exit(f"error: {name} must be 0 or 1, got {value!r}")
    return default if value == "" else value == "1"


extension = Extension(
    "fastmog._fastmog",
    sources=sorted(glob("src/*.c")),
    depends=sorted(glob("src/*.h") + glob("cuda/*.h") + glob("cuda/*.cuh")),
    include_dirs=[numpy.get_include(), "src", "cuda"],
    libraries=["cudart_static", "stdc++", "rt", "pthread", "dl"],
    # OpenMP: the host MOG2 loop and large host copies use every core.
    extra_compile_args=["-std=c11", "-O2", "-fopenmp", "-fvisibility=hidden", "-ffp-contract=off",
                        "-Wall", "-Wextra", "-Wno-unused-parameter",
                        "-Wno-missing-field-initializers", "-Wno-cast-function-type",
                        "-Werror=implicit-function-declaration"],
    # The static runtime's symbols stay private to the module.
    extra_link_args=["-fopenmp", "-Wl,--exclude-libs,ALL"],
)

if not env_flag("FASTMOG_OPENMP", True):
    for args in (extension.extra_compile_args, extension.extra_link_args):
        args.remove("-fopenmp")
if env_flag("FASTMOG_GLIBC_COMPAT", False):
    with open("compat/glibc_compat.h") as f:
        wrapped = [line.split("(")[1].split(",")[0] for line in f
                   if line.startswith("FM_GLIBC_COMPAT_SYMBOL(")]
    extension.sources.append("compat/glibc_compat.c")
    extension.extra_link_args += [
        "-Wl,--wrap=" + ",--wrap=".join(wrapped),
        # where the old versions live before glibc 2.34 (empty stubs after)
        "-Wl,--no-as-needed", "-l:libpthread.so.0", "-l:libdl.so.2", "-l:librt.so.1"]

setup(ext_modules=[extension], cmdclass={"build_ext": BuildExtWithNvcc})
