"""Shared test setup: the `gpu` marker (declared in pyproject.toml, so this
file, not fastmog's pytest plugin, owns it) turns into a skip, with the
plugin's reason, on machines where CUDA cannot be used; the `slow` marker
(soak, leak, fuzz and full parity sweeps) into a skip unless `--slow` is given;
data sets come from ../shared/data, .testdata/ or $FASTMOG_TEST_DATA
(fastmog.testing.find_test_data)."""
import os
import pathlib

import numpy as np
import pytest

import fastmog
from fastmog.pytest_plugin import no_gpu_reason
from fastmog.testing import DEFAULT_TIER, SEQUENCES, find_test_data

ROOT = pathlib.Path(__file__).resolve().parent.parent

GPU_OK = fastmog.cuda_available()


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run the tests marked slow (soak, leak, fuzz, every "
                          "parity case of every sequence)")


def pytest_collection_modifyitems(config, items):
    skip_gpu = None if GPU_OK else pytest.mark.skip(reason=no_gpu_reason())
    skip_slow = None if config.getoption("--slow") else \
        pytest.mark.skip(reason="slow tier: run with --slow")
    for item in items:
        if skip_gpu is not None and "gpu" in item.keywords:
            item.add_marker(skip_gpu)
        elif skip_slow is not None and "slow" in item.keywords:
            item.add_marker(skip_slow)


def parity_params(cases, sequences):
    """(sequence, case) parameters for a real-sequence parity test: the pairs
    in fastmog.testing.DEFAULT_TIER run by default, every other pair is `slow`."""
    return [pytest.param(sequence, case, id=f"{sequence}-{case}",
                         marks=() if case in DEFAULT_TIER[sequence] else pytest.mark.slow)
            for sequence in sequences for case in cases]


@pytest.fixture
def data_dir(request):
    path = find_test_data(ROOT)
    if path is None:
        pytest.skip("test data not found: set FASTMOG_TEST_DATA or put it in ../shared/data")
    # a test of one sequence skips where a partial copy (a GPU machine's) lacks it
    callspec = getattr(request.node, "callspec", None)
    sequence = callspec.params.get("sequence") if callspec is not None else None
    if isinstance(sequence, str) and not (path / SEQUENCES.get(sequence, sequence)).exists():
        pytest.skip(f"the test data in {path} lacks {SEQUENCES.get(sequence, sequence)}")
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


@pytest.fixture(scope="module")
def clips():
    """The folder of make_clips.py's test clips (skipped without them)."""
    path = pathlib.Path(os.environ.get("FASTMOG_CLIPS", ROOT / ".testdata" / "clips"))
    if not (path / "clips.json").is_file():
        pytest.skip(f"no test clips in {path}: run python benchmarks/make_clips.py")
    return path


@pytest.fixture
def nvdec(stream):
    """A stream NVDEC can decode onto (skipped where PyNvVideoCodec is not usable)."""
    try:
        import PyNvVideoCodec  # noqa: F401
    except Exception as e:
        pytest.skip(f"PyNvVideoCodec is not usable: {str(e).splitlines()[0] if str(e) else e!r}")
    return stream


def random_image(rng, shape, dtype):
    """Random values over the dtype's range (never all zeros)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype) * 100
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)
