"""Shared test setup: the `gpu` marker turns into a skip, with the reason,
on machines where CUDA cannot be used; data sets come from ../shared/data or
$FASTMOG_TEST_DATA."""
import os
import pathlib

import numpy as np
import pytest

import fastmog

GPU_OK = fastmog.cuda_available()


def _no_gpu_reason():
    status, text = fastmog._fastmog._cuda_status()
    return f"needs a CUDA GPU: {status} ({text})"


def pytest_collection_modifyitems(config, items):
    if GPU_OK:
        return
    skip = pytest.mark.skip(reason=_no_gpu_reason())
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def find_test_data():
    env = os.environ.get("FASTMOG_TEST_DATA")
    if env:
        return pathlib.Path(env)
    here = pathlib.Path(__file__).resolve().parent.parent
    for candidate in (here / ".testdata", here.parent / "shared" / "data"):
        # .testdata may hold only generated clips (benchmarks/make_clips.py)
        if candidate.is_dir() and any(p.name != "clips" for p in candidate.iterdir()):
            return candidate
    return None


@pytest.fixture
def data_dir():
    path = find_test_data()
    if path is None:
        pytest.skip("test data not found: set FASTMOG_TEST_DATA or put it in ../shared/data")
    return path


@pytest.fixture
def rng():
    """Fresh random data every run; the seed is printed on failure."""
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"random seed {seed}")
    return np.random.default_rng(seed)


@pytest.fixture
def stream():
    with fastmog.Stream() as s:
        yield s


def random_image(rng, shape, dtype):
    """Random values over the dtype's range (never all zeros)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype) * 100
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)
