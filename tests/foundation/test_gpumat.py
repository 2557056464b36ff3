"""GpuMat on the GPU: exact round trips, views, copies, fills, bad input."""
import gc
import os

import numpy as np
import pytest

import fastmog
from conftest import random_image

pytestmark = pytest.mark.gpu

SIZES = [(1, 1), (3, 5), (1023, 7), (2160, 3840)]


def host_array(rng, shape, dtype, kind):
    data = random_image(rng, shape, dtype)
    if kind == "pinned":
        pinned = fastmog.pinned_like(data)
        pinned[...] = data
        assert fastmog.is_pinned(pinned)
        return pinned
    if kind == "strided":
        # rows further apart than their length: a column slice of a wider image
        wide = np.zeros((shape[0], shape[1] + 9) + shape[2:], dtype)
        wide[:, : shape[1]] = data
        view = wide[:, : shape[1]]
        assert shape[0] == 1 or not view.flags.c_contiguous
        return view
    return data


@pytest.mark.parametrize("height, width", SIZES)
@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("kind", ["pinned", "pageable", "strided"])
def test_round_trip_is_exact(rng, stream, height, width, channels, dtype, kind):
    shape = (height, width) if channels == 1 else (height, width, channels)
    src = host_array(rng, shape, dtype, kind)
    m = fastmog.GpuMat.from_array(src, stream=stream)
    assert m.shape == shape and m.dtype == np.dtype(dtype) and m.channels == channels
    row_bytes = width * channels * np.dtype(dtype).itemsize
    assert m.pitch >= row_bytes and m.pitch % 256 == 0
    assert m.nbytes == row_bytes * height
    out = m.download(stream=stream)
    assert fastmog.is_pinned(out)
    assert out.shape == shape and out.dtype == np.dtype(dtype)
    mismatches = np.count_nonzero(out != src)
    assert mismatches == 0, f"{mismatches} values differ"
    # and back into a caller's array of either kind
    dest = np.empty_like(src) if kind != "pinned" else fastmog.pinned_like(src)
    assert m.download(dest, stream=stream) is dest
    assert np.array_equal(dest, src)
    m.close()


def test_pitch_differs_from_row_bytes(stream):
    m = fastmog.GpuMat((5, 7), np.uint8)
    assert m.pitch != 7 and not m.is_continuous


def test_pageable_source_can_change_right_after_upload(rng, stream):
    src = random_image(rng, (1080, 1920, 3), np.uint8)
    expected = src.copy()
    m = fastmog.GpuMat(src.shape)
    m.upload(src, stream=stream)
    src[...] = 0  # the upload staged its own copy
    del src
    assert np.array_equal(m.download(stream=stream), expected)


def test_pinned_upload_is_asynchronous_and_keeps_its_source(rng, stream):
    src = fastmog.pinned_empty((8192, 8192, 4), np.uint8)  # 256 MiB
    src[...] = random_image(rng, src.shape, np.uint8)
    expected = np.array(src[::97, ::89])
    m = fastmog.GpuMat(src.shape)
    before = fastmog.memory_stats()["pending_releases"]
    m.upload(src, stream=stream)
    assert stream.query() is False, "upload waited for the copy"
    assert fastmog.memory_stats()["pending_releases"] == before + 1
    del src
    gc.collect()
    stream.synchronize()
    assert np.array_equal(m.download(stream=stream)[::97, ::89], expected)


def test_non_blocking_download(rng, stream):
    src = random_image(rng, (720, 1280, 4), np.float32)
    m = fastmog.GpuMat.from_array(src, stream=stream)
    out = fastmog.pinned_like(src)
    res = m.download(out, stream=stream, blocking=False)
    assert res is out
    stream.synchronize()
    assert np.array_equal(out, src)
    fresh = m.download(stream=stream, blocking=False)
    stream.synchronize()
    assert np.array_equal(fresh, src)
    with pytest.raises(ValueError, match="pinned destination"):
        m.download(np.empty_like(src), stream=stream, blocking=False)


def test_views_share_memory(rng, stream):
    src = random_image(rng, (300, 400, 3), np.uint8)
    m = fastmog.GpuMat.from_array(src, stream=stream)
    view = m[10:110, 20:220]
    assert view.shape == (100, 200, 3) and view.pitch == m.pitch
    assert view.ptr == m.ptr + 10 * m.pitch + 20 * 3
    assert np.array_equal(view.download(stream=stream), src[10:110, 20:220])
    assert np.array_equal(m.roi(20, 10, 200, 100).download(stream=stream), src[10:110, 20:220])
    view.fill((1, 2, 3), stream=stream)
    expected = src.copy()
    expected[10:110, 20:220] = (1, 2, 3)
    assert np.array_equal(m.download(stream=stream), expected)
    # a view keeps the memory after its parent is closed
    m.close()
    assert np.array_equal(view.download(stream=stream), expected[10:110, 20:220])
    with pytest.raises(ValueError):
        view[5:5, :]
    with pytest.raises(ValueError, match="step"):
        view[::2, :]
    with pytest.raises(ValueError):
        view.roi(190, 0, 20, 10)


def test_copy_to_between_views(rng, stream):
    src = random_image(rng, (64, 80), np.float32)
    a = fastmog.GpuMat.from_array(src, stream=stream)
    b = fastmog.GpuMat((100, 100), np.float32)
    b.fill(-1.0, stream=stream)
    a[0:32, 0:40].copy_to(b[50:82, 10:50], stream=stream)
    out = b.download(stream=stream)
    assert np.array_equal(out[50:82, 10:50], src[0:32, 0:40])
    assert (out[:50] == -1).all() and (out[82:] == -1).all()
    with pytest.raises(ValueError, match="but self is"):
        a.copy_to(b, stream=stream)
    with pytest.raises(TypeError):
        a.copy_to(src, stream=stream)


@pytest.mark.parametrize("dtype, value", [
    (np.uint8, 200), (np.uint8, (1, 2, 3)), (np.float32, (0.5, -1.25, 3e7)),
    (np.int16, -300), (np.uint16, (65535, 0, 7)), (np.float64, 1.0 / 3.0),
])
def test_fill(stream, dtype, value):
    channels = len(value) if isinstance(value, tuple) else 3
    m = fastmog.GpuMat((33, 65, channels), dtype)
    m.fill(value, stream=stream)
    expected = np.empty((33, 65, channels), dtype)
    expected[...] = value
    assert np.array_equal(m.download(stream=stream), expected)


def test_fill_rejects_values_that_do_not_fit(stream):
    m = fastmog.GpuMat((4, 4, 3), np.uint8)
    for bad in (256, -1, 1.5, (1, 2), "a"):
        with pytest.raises((ValueError, TypeError)):
            m.fill(bad, stream=stream)


def test_bad_input_raises_and_changes_nothing(rng, stream):
    src = random_image(rng, (16, 24, 3), np.uint8)
    m = fastmog.GpuMat.from_array(src, stream=stream)
    cases = [
        (TypeError, "dtype", src.astype(np.float32)),
        (ValueError, "shape", src[:, :, :1]),
        (ValueError, "shape", src[:8]),
        (ValueError, "contiguous pixels", np.ascontiguousarray(
            np.zeros((16, 48, 3), np.uint8))[:, ::2]),
        (TypeError, "numpy array", src.tolist()),
    ]
    for error, match, bad in cases:
        with pytest.raises(error, match=match):
            m.upload(bad, stream=stream)
        with pytest.raises(error, match=match):
            m.download(bad if isinstance(bad, np.ndarray) else bad, stream=stream)
    with pytest.raises(TypeError, match="stream= is required"):
        m.upload(src, stream=None)
    with pytest.raises(TypeError, match="stream= is required"):
        m.download()
    closed = fastmog.Stream()
    closed.close()
    with pytest.raises(ValueError, match="closed"):
        m.download(stream=closed)
    readonly = src.copy()
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        m.download(readonly, stream=stream)
    assert np.array_equal(m.download(stream=stream), src)


def test_closed_gpumat_raises(stream):
    m = fastmog.GpuMat((4, 4))
    with m:
        m.fill(1, stream=stream)
    assert m.closed and "closed" in repr(m)
    m.close()
    for call in (lambda: m.download(stream=stream), lambda: m.fill(0, stream=stream),
                 lambda: m.upload(np.zeros((4, 4), np.uint8), stream=stream),
                 lambda: m[0:1, 0:1], lambda: m.ptr, lambda: m.__cuda_array_interface__,
                 lambda: m.__dlpack__()):
        with pytest.raises(ValueError, match="closed"):
            call()


@pytest.mark.skipif(fastmog.device_count() < 2, reason="needs two GPUs")
def test_stream_of_another_device_is_refused():
    m = fastmog.GpuMat((4, 4), device=0)
    with fastmog.Stream(device=1) as other:
        with pytest.raises(ValueError, match="device"):
            m.fill(0, stream=other)


def test_repr_never_synchronizes(stream):
    big = fastmog.GpuMat((8192, 8192, 4), np.float32)
    for _ in range(10):
        big.fill(1.0, stream=stream)
    text, html = repr(big), big._repr_html_()
    assert stream.query() is False
    assert "8192x8192x4 float32" in text and "<table>" in html
    stream.synchronize()


def _rss_bytes():
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_create_upload_download_close_cycles_leave_memory_flat(rng, stream):
    src = random_image(rng, (64, 64, 3), np.uint8)
    out = fastmog.pinned_like(src)

    def cycle():
        m = fastmog.GpuMat(src.shape)
        m.upload(src, stream=stream)
        m.download(out, stream=stream)
        m.close()

    for _ in range(500):
        cycle()
    stream.synchronize()
    free_before = fastmog.mem_get_info()[0]
    rss_before = _rss_bytes()
    stats_before = fastmog.memory_stats()
    for _ in range(10_000):
        cycle()
    stream.synchronize()
    gc.collect()
    free_after = fastmog.mem_get_info()[0]
    rss_after = _rss_bytes()
    stats_after = fastmog.memory_stats()
    assert np.array_equal(out, src)
    assert abs(free_after - free_before) <= 2 * 2**20, (free_before, free_after)
    assert rss_after - rss_before <= 4 * 2**20, (rss_before, rss_after)
    assert stats_after["pinned_host_allocs"] - stats_before["pinned_host_allocs"] <= 2
    assert stats_after["pinned_in_use"] <= stats_before["pinned_in_use"] + 2**20
