"""Hostile input to the API that needs no GPU: each is refused with a clear
TypeError or ValueError before any work, and nothing leaks (issue 12's audit
findings, one test each)."""
import tracemalloc

import numpy as np
import pytest

import fastmog


def test_misaligned_float_frame_and_out_are_refused():
    raw = np.zeros(4 * 64 + 1, np.uint8)
    frame = np.frombuffer(raw.data, np.float32, count=64, offset=1).reshape(8, 8)
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    with pytest.raises(ValueError, match="not aligned"):
        sub.apply(frame)
    good = np.zeros((8, 8), np.float32)
    sub.apply(good)
    out = np.frombuffer(raw.data, np.float32, count=64, offset=1).reshape(8, 8)
    with pytest.raises(ValueError, match="not aligned"):
        sub.get_background_image(out=out)
    assert sub.frame_count == 1


def test_channel_count_beyond_int_is_not_truncated():
    # (1, 1, 2**32 + 3) would read as 3 channels if the count were cut to int.
    frame = np.lib.stride_tricks.as_strided(np.zeros(16, np.uint8), (1, 1, 2**32 + 3),
                                            (0, 0, 1))
    with pytest.raises(ValueError, match="channels"):
        fastmog.cpu.BackgroundSubtractorMOG2().apply(frame)


def test_gpumat_size_that_wraps_is_refused_before_cuda():
    with pytest.raises(ValueError, match="too large"):
        fastmog.GpuMat((1, 2**61 + 5, 4), np.float64)
    with pytest.raises(ValueError):
        fastmog.GpuMat((2**40, 4))


def test_pinned_empty_with_a_bad_keyword_leaks_nothing():
    def bad_calls(n):
        refused = 0
        for _ in range(n):
            try:
                fastmog.pinned_empty((2, 3, 4, 5, 6, 7, 8, 9), bogus=1)
            except TypeError:
                refused += 1
        assert refused == n

    bad_calls(100)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    bad_calls(20000)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    # a leaked shape is 64 bytes a call: 1.3 MB over the loop
    assert grown < 128 * 1024, f"{grown} bytes kept after 20000 refused calls"


@pytest.mark.parametrize("rate", [10**400, float("inf"), float("nan")])
def test_learning_rates_that_mean_nothing_are_value_errors(rate):
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    with pytest.raises(ValueError, match="learning_rate"):
        sub.apply(np.zeros((8, 8), np.uint8), rate)
    assert sub.frame_count == 0
    sub.apply(np.zeros((8, 8), np.uint8), -10**400)  # any negative: automatic
    assert sub.frame_count == 1


def test_stream_priority_beyond_int_is_a_value_error():
    with pytest.raises(ValueError, match="priority"):
        fastmog.Stream(priority=10**10)
    with pytest.raises(TypeError):
        fastmog.Stream(priority=1.5)


def test_detect_shadows_takes_booleans_only():
    with pytest.raises(TypeError, match="detect_shadows"):
        fastmog.cpu.BackgroundSubtractorMOG2(detect_shadows="no")
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    with pytest.raises(TypeError):
        sub.detect_shadows = None
    sub.detect_shadows = np.False_
    assert sub.detect_shadows is False


def test_the_constructor_signature_comes_from_the_parameter_table():
    import inspect

    params = fastmog._fastmog._mog2_parameters()
    sig = inspect.signature(fastmog.cpu.BackgroundSubtractorMOG2)
    assert list(sig.parameters) == [p["name"] for p in params]
    for p in params:
        assert sig.parameters[p["name"]].default == p["default"]
        assert getattr(fastmog.cpu.BackgroundSubtractorMOG2(), p["name"]) == pytest.approx(
            p["default"], rel=1e-7)
    assert "device" in inspect.signature(fastmog.BackgroundSubtractorMOG2).parameters


def test_host_mode_counts_as_documented(rng):
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    with pytest.raises(ValueError, match="no model"):
        sub.mode_counts()
    for _ in range(5):
        sub.apply(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8))
    counts = sub.mode_counts()
    assert counts.shape == (12, 16) and counts.dtype == np.uint8
    assert 1 <= counts.min() and counts.max() <= sub.n_mixtures
