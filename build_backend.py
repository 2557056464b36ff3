"""PEP 517 build backend of fastmog: setuptools' own, plus NVIDIA's CUDA
compiler wheels from PyPI as build requirements where no CUDA toolkit is
installed. The search for nvcc lives in nvcc_search.py (shared with setup.py,
and free of setuptools so its tests run anywhere); FASTMOG_NVCC is described
there.

pyproject.toml names this module with ``backend-path = ["."]``, which also puts
nvcc_search.py on the path; every hook not defined here is setuptools.build_meta's.
"""
from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403  (every other hook as is)

import nvcc_search


def get_requires_for_build_wheel(config_settings=None):
    return (_setuptools.get_requires_for_build_wheel(config_settings)
            + nvcc_search.cuda_build_requires())


def get_requires_for_build_editable(config_settings=None):
    return (_setuptools.get_requires_for_build_editable(config_settings)
            + nvcc_search.cuda_build_requires())
