"""The build's nvcc search (nvcc_search.py) and the build backend
(build_backend.py): NVIDIA's nvcc wheels become build requirements only where
no CUDA toolkit is found or FASTMOG_NVCC=pip asks for them, and the toolkit
search finds a system toolkit first, then the wheels.

The search is standard library only, so its tests run in any venv; the backend
is setuptools' own with two hooks added, so its test needs setuptools, which a
fresh Python 3.12+ venv does not have (pip installs it only into its isolated
build environment)."""
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fake_toolkit(root):
    """A directory laid out like a toolkit root: bin/nvcc and the runtime header."""
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "bin" / "nvcc").write_text("#!/bin/sh\n")
    (root / "bin" / "nvcc").chmod(0o755)
    (root / "include" / "cuda_runtime_api.h").write_text("")
    return root


@pytest.fixture
def search(monkeypatch, tmp_path):
    """The search on a machine with no toolkit anywhere and no CUDA wheels."""
    for var in ("CUDA_HOME", "CUDA_PATH", "FASTMOG_NVCC"):
        monkeypatch.delenv(var, raising=False)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    module = _load("fastmog_nvcc_search", ROOT / "nvcc_search.py")
    monkeypatch.setattr(module, "DEFAULT_ROOTS", (str(tmp_path / "no-cuda"),))
    monkeypatch.setattr(module, "find_pip_cuda", lambda: None)
    return module


def test_the_search_needs_no_setuptools():
    # A fresh 3.12+ venv has none: the search must import with the standard library only.
    code = ("import builtins, runpy, sys\n"
            "real = builtins.__import__\n"
            "def guard(name, *a, **k):\n"
            "    if name.split('.')[0] in ('setuptools', 'pkg_resources', 'distutils'):\n"
            "        raise ImportError('no ' + name)\n"
            "    return real(name, *a, **k)\n"
            "builtins.__import__ = guard\n"
            f"runpy.run_path({str(ROOT / 'nvcc_search.py')!r})\n")
    r = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_no_toolkit_asks_for_the_wheels(search):
    assert search.find_system_cuda() is None
    assert search.find_cuda_home() is None
    assert search.cuda_build_requires() == [search.PIP_CUDA]
    # They carry nvcc with cicc and crt, the runtime and the NVTX headers, all 13.0.
    for extra in ("nvcc", "crt", "nvvm", "cudart", "nvtx"):
        assert extra in search.PIP_CUDA.split("[")[1].split("]")[0].split(",")
    assert search.PIP_CUDA.endswith("~=13.0.2")


def test_system_toolkit_needs_no_wheels(search, monkeypatch, tmp_path):
    root = _fake_toolkit(tmp_path / "cuda")
    monkeypatch.setenv("CUDA_HOME", str(root))
    assert search.find_system_cuda() == str(root)
    assert search.find_cuda_home() == str(root)
    assert search.cuda_build_requires() == []


def test_nvcc_on_path_and_default_root_count_as_toolkits(search, monkeypatch, tmp_path):
    root = _fake_toolkit(tmp_path / "on-path")
    monkeypatch.setenv("PATH", str(root / "bin"))
    assert search.find_system_cuda() == str(root)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    default = _fake_toolkit(tmp_path / "usr-local-cuda")
    monkeypatch.setattr(search, "DEFAULT_ROOTS", (str(default),))
    assert search.find_system_cuda() == str(default)


def test_nvcc_wrapper_script_is_not_a_toolkit(search, monkeypatch, tmp_path):
    # e.g. /usr/local/bin/nvcc that execs the real one: /usr/local has no CUDA headers.
    bin_dir = tmp_path / "local" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "nvcc").write_text("#!/bin/sh\nexec /elsewhere/nvcc \"$@\"\n")
    (bin_dir / "nvcc").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert search.find_system_cuda() is None


def test_fastmog_nvcc_pip_forces_the_wheels(search, monkeypatch, tmp_path):
    system = _fake_toolkit(tmp_path / "cuda")
    wheels = _fake_toolkit(tmp_path / "site" / "nvidia" / "cu13")
    monkeypatch.setenv("CUDA_HOME", str(system))
    monkeypatch.setattr(search, "find_pip_cuda", lambda: str(wheels))
    assert search.find_cuda_home() == str(system)
    monkeypatch.setenv("FASTMOG_NVCC", "pip")
    assert search.cuda_build_requires() == [search.PIP_CUDA]
    assert search.find_cuda_home() == str(wheels)
    monkeypatch.setenv("FASTMOG_NVCC", "system-please")
    with pytest.raises(ValueError, match="FASTMOG_NVCC"):
        search.cuda_build_requires()


def test_wheels_are_found_in_site_packages(monkeypatch, tmp_path):
    # The wheels unpack into <site-packages>/nvidia/cu13, a namespace package.
    site = tmp_path / "site"
    _fake_toolkit(site / "nvidia" / "cu13")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "nvidia", raising=False)
    module = _load("fastmog_nvcc_search", ROOT / "nvcc_search.py")
    assert module.find_pip_cuda() == os.path.join(str(site / "nvidia"), "cu13")


class _SetuptoolsStub:
    def get_requires_for_build_wheel(self, config_settings=None):
        return ["wheel-from-setuptools"]

    def get_requires_for_build_editable(self, config_settings=None):
        return ["editable-from-setuptools"]


def test_backend_adds_the_wheels_to_setuptools_requirements(monkeypatch):
    pytest.importorskip(
        "setuptools.build_meta",
        reason="build_backend.py is setuptools' backend and setuptools is not installed "
               "here (pip installs it only into its isolated build environment)")
    # pip puts the backend's folder (backend-path) on sys.path: nvcc_search beside it.
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.delitem(sys.modules, "nvcc_search", raising=False)
    backend = _load("fastmog_build_backend", ROOT / "build_backend.py")
    # setuptools' own requirements are not under test (and would run setup.py).
    monkeypatch.setattr(backend, "_setuptools", _SetuptoolsStub())
    monkeypatch.setattr(backend.nvcc_search, "cuda_build_requires", lambda: ["the-wheels"])
    assert backend.get_requires_for_build_wheel() == ["wheel-from-setuptools", "the-wheels"]
    assert backend.get_requires_for_build_editable() == ["editable-from-setuptools",
                                                         "the-wheels"]
    monkeypatch.setattr(backend.nvcc_search, "cuda_build_requires", lambda: [])
    assert backend.get_requires_for_build_wheel() == ["wheel-from-setuptools"]
    # Every other hook is setuptools' own.
    import setuptools.build_meta

    assert backend.build_wheel is setuptools.build_meta.build_wheel
    assert backend.build_sdist is setuptools.build_meta.build_sdist


def _nvcc_listing(tmp_path, script):
    nvcc = tmp_path / "nvcc"
    nvcc.write_text("#!/bin/sh\n" + script)
    nvcc.chmod(0o755)
    return str(nvcc)


def test_default_architectures_are_those_the_nvcc_can_build(search, tmp_path):
    # CUDA 12.4's nvcc lists nothing newer than sm_90: no 10.0 or 12.0 cubins
    nvcc = _nvcc_listing(tmp_path, "printf 'sm_50\\nsm_75\\nsm_80\\nsm_86\\nsm_87\\nsm_89\\nsm_90\\n'\n")
    assert search.default_archs(nvcc) == "75;80;86;89;90"


@pytest.mark.parametrize("script", ["exit 1\n", "printf 'compute_90\\n'\n"])
def test_default_architectures_stay_whole_where_nvcc_cannot_say(search, tmp_path, script):
    assert search.default_archs(_nvcc_listing(tmp_path, script)) == search.DEFAULT_ARCHS
    assert search.default_archs(str(tmp_path / "no-nvcc")) == search.DEFAULT_ARCHS
