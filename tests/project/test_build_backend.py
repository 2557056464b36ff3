"""The build backend (build_backend.py): NVIDIA's nvcc wheels become build
requirements only where no CUDA toolkit is found or FASTMOG_NVCC=pip asks for
them, and the toolkit search finds a system toolkit first, then the wheels."""
import importlib.util
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load_backend():
    spec = importlib.util.spec_from_file_location("fastmog_build_backend",
                                                  ROOT / "build_backend.py")
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
def backend(monkeypatch, tmp_path):
    """The backend on a machine with no toolkit anywhere and no CUDA wheels."""
    for var in ("CUDA_HOME", "CUDA_PATH", "FASTMOG_NVCC"):
        monkeypatch.delenv(var, raising=False)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    module = _load_backend()
    monkeypatch.setattr(module, "DEFAULT_ROOTS", (str(tmp_path / "no-cuda"),))
    monkeypatch.setattr(module, "find_pip_cuda", lambda: None)
    # setuptools' own requirements are not under test (and would run setup.py).
    monkeypatch.setattr(module, "_setuptools", _SetuptoolsStub())
    return module


class _SetuptoolsStub:
    def get_requires_for_build_wheel(self, config_settings=None):
        return ["wheel-from-setuptools"]

    def get_requires_for_build_editable(self, config_settings=None):
        return ["editable-from-setuptools"]


def _cuda_requirements(backend):
    reqs = backend.get_requires_for_build_wheel()
    return [r for r in reqs if r.startswith("cuda-toolkit")]


def test_no_toolkit_asks_for_the_wheels(backend):
    assert backend.find_system_cuda() is None
    assert backend.get_requires_for_build_wheel() == ["wheel-from-setuptools", backend.PIP_CUDA]
    assert backend.get_requires_for_build_editable() == [
        "editable-from-setuptools", backend.PIP_CUDA]
    # They carry nvcc with cicc and crt, the runtime and the NVTX headers, all 13.0.
    for extra in ("nvcc", "crt", "nvvm", "cudart", "nvtx"):
        assert extra in backend.PIP_CUDA.split("[")[1].split("]")[0].split(",")
    assert backend.PIP_CUDA.endswith("~=13.0.2")


def test_system_toolkit_needs_no_wheels(backend, monkeypatch, tmp_path):
    root = _fake_toolkit(tmp_path / "cuda")
    monkeypatch.setenv("CUDA_HOME", str(root))
    assert backend.find_system_cuda() == str(root)
    assert backend.find_cuda_home() == str(root)
    assert _cuda_requirements(backend) == []


def test_nvcc_on_path_and_default_root_count_as_toolkits(backend, monkeypatch, tmp_path):
    root = _fake_toolkit(tmp_path / "on-path")
    monkeypatch.setenv("PATH", str(root / "bin"))
    assert backend.find_system_cuda() == str(root)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    default = _fake_toolkit(tmp_path / "usr-local-cuda")
    monkeypatch.setattr(backend, "DEFAULT_ROOTS", (str(default),))
    assert backend.find_system_cuda() == str(default)


def test_nvcc_wrapper_script_is_not_a_toolkit(backend, monkeypatch, tmp_path):
    # e.g. /usr/local/bin/nvcc that execs the real one: /usr/local has no CUDA headers.
    bin_dir = tmp_path / "local" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "nvcc").write_text("#!/bin/sh\nexec /elsewhere/nvcc \"$@\"\n")
    (bin_dir / "nvcc").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert backend.find_system_cuda() is None


def test_fastmog_nvcc_pip_forces_the_wheels(backend, monkeypatch, tmp_path):
    system = _fake_toolkit(tmp_path / "cuda")
    wheels = _fake_toolkit(tmp_path / "site" / "nvidia" / "cu13")
    monkeypatch.setenv("CUDA_HOME", str(system))
    monkeypatch.setattr(backend, "find_pip_cuda", lambda: str(wheels))
    assert backend.find_cuda_home() == str(system)
    monkeypatch.setenv("FASTMOG_NVCC", "pip")
    assert _cuda_requirements(backend) == [backend.PIP_CUDA]
    assert backend.find_cuda_home() == str(wheels)
    monkeypatch.setenv("FASTMOG_NVCC", "system-please")
    with pytest.raises(ValueError, match="FASTMOG_NVCC"):
        backend.get_requires_for_build_wheel()


def test_wheels_are_found_in_site_packages(monkeypatch, tmp_path):
    # The wheels unpack into <site-packages>/nvidia/cu13, a namespace package.
    site = tmp_path / "site"
    _fake_toolkit(site / "nvidia" / "cu13")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "nvidia", raising=False)
    module = _load_backend()
    assert module.find_pip_cuda() == os.path.join(str(site / "nvidia"), "cu13")
