"""fastmog.connected_components on the GPU against the host face (itself equal
to cv2.connectedComponentsWithStats, tests/motion/test_motion_host.py) and
against OpenCV directly: random masks of every small size, both
connectivities, min_area, the foreground value, noise with tens of
thousands of regions, a one-pixel spiral across the frame, a frame all
foreground, real masks; bad input refused before any work."""
import numpy as np
import pytest

import fastmog
from fastmog import cpu
from fastmog.testing import iter_frames

from test_motion_host import assert_same_regions, random_mask, spiral

pytestmark = pytest.mark.gpu


def assert_gpu_equals_host(mask, stream, **options):
    want = cpu.connected_components(mask, **options)
    got = fastmog.connected_components(fastmog.GpuMat.from_array(mask, stream=stream),
                                       stream=stream, **options)
    assert got.count == want.count, options
    assert got.stats.dtype == np.int32 and got.centroids.dtype == np.float64
    np.testing.assert_array_equal(got.stats, want.stats, err_msg=str(options))
    np.testing.assert_array_equal(got.centroids, want.centroids, err_msg=str(options))
    return got


@pytest.mark.parametrize("connectivity", [4, 8])
def test_random_masks_of_every_small_size(rng, stream, connectivity):
    for trial in range(60):
        h, w = (int(v) for v in rng.integers(1, 90, 2))
        mask = random_mask(rng, (h, w))
        got = assert_gpu_equals_host(mask, stream, connectivity=connectivity)
        assert_same_regions(got, mask, connectivity)


@pytest.mark.parametrize("connectivity", [4, 8])
def test_noise_with_tens_of_thousands_of_regions(rng, stream, connectivity):
    # more regions than the first read brings back: the rest come in a second
    mask = np.where(rng.random((1080, 1920)) < 0.4, 255, 0).astype(np.uint8)
    got = assert_gpu_equals_host(mask, stream, connectivity=connectivity)
    assert got.count > (20000 if connectivity == 8 else 100000)
    assert_same_regions(got, mask, connectivity)


@pytest.mark.parametrize("connectivity", [4, 8])
def test_a_spiral_across_the_frame_and_a_frame_all_foreground(stream, connectivity):
    mask = spiral(481, 640)
    got = assert_gpu_equals_host(mask, stream, connectivity=connectivity)
    assert got.count == 1 and got.stats[0].tolist() == [0, 0, 640, 481,
                                                         int((mask == 255).sum())]
    full = np.full((2160, 3840), 255, np.uint8)
    got = assert_gpu_equals_host(full, stream, connectivity=connectivity)
    assert got.stats.tolist() == [[0, 0, 3840, 2160, 3840 * 2160]]
    assert got.centroids.tolist() == [[1919.5, 1079.5]]


def test_min_area_foreground_and_empty_masks(rng, stream):
    mask = np.where(rng.random((200, 300)) < 0.35, 255, 0).astype(np.uint8)
    for min_area in (0, 1, 2, 5, 40, 10**9):
        assert_gpu_equals_host(mask, stream, min_area=min_area)
    shadows = random_mask(rng, (50, 61))
    assert_gpu_equals_host(shadows, stream, foreground=127, connectivity=4)
    empty = fastmog.connected_components(np.zeros((5, 7), np.uint8), stream=stream)
    assert empty.count == 0 and empty.stats.shape == (0, 5) and empty.centroids.shape == (0, 2)


def test_a_host_mask_is_uploaded_and_a_view_is_read_in_place(rng, stream):
    mask = random_mask(rng, (70, 90))
    want = cpu.connected_components(mask)
    got = fastmog.connected_components(mask, stream=stream)
    np.testing.assert_array_equal(got.stats, want.stats)
    big = fastmog.GpuMat.from_array(np.zeros((100, 120), np.uint8), stream=stream)
    view = big[10:80, 20:110]
    view.upload(mask, stream=stream)
    np.testing.assert_array_equal(fastmog.connected_components(view, stream=stream).stats,
                                  want.stats)


def test_regions_of_real_masks(data_dir, stream):
    sub = cpu.BackgroundSubtractorMOG2()
    masks = [sub.apply(f) for f in iter_frames(data_dir, "CAVIAR2", 50)][30:]
    assert sum(int((m == 255).any()) for m in masks) > 10
    for mask in masks:
        for connectivity in (4, 8):
            cleaned = cpu.morphology(mask, "open", 3)
            got = assert_gpu_equals_host(cleaned, stream, connectivity=connectivity)
            assert_same_regions(got, cleaned, connectivity)


def test_the_call_is_timed_and_counts_what_leaves_the_gpu(rng, stream):
    mask = np.where(rng.random((120, 160)) < 0.3, 255, 0).astype(np.uint8)
    dev = fastmog.GpuMat.from_array(mask, stream=stream)
    fastmog.connected_components(dev, stream=stream)     # the first read's size: this mask's
    t = fastmog.Timer(nvtx=False)
    got = fastmog.connected_components(dev, stream=stream, timer=t)
    (r,) = [r for r in t.records if r.name == "connected_components"]
    assert r.gpu_ms is not None and r.gpu_ms > 0
    # the mask read; the header and the rows read back (at least 24 in the first copy)
    assert r.bytes_read == 120 * 160
    assert r.bytes_written == 40 * (1 + max(got.count, 24))


def test_up_to_24_regions_come_back_in_1000_bytes(stream):
    def squares(n):
        m = np.zeros((64, 400), np.uint8)
        for k in range(n):
            m[10:14, 10 * k + 2:10 * k + 6] = 255
        return m

    t = fastmog.Timer(nvtx=False)
    fastmog.connected_components(squares(0), stream=stream)     # the last call found none
    for n, sent in ((20, 1000), (24, 1000), (30, 40 * 25 + 40 * 6), (5, 40 * 31)):
        got = fastmog.connected_components(squares(n), stream=stream, timer=t)
        assert got.count == n
        # a header and max(24, what the last call found) rows, then the rest
        (last,) = [r for r in t.records if r.name == "connected_components"][-1:]
        assert last.bytes_written == sent, n


def test_bad_input_is_refused_before_any_work(rng, stream):
    mask = random_mask(rng, (20, 30))
    cases = [
        ((mask.astype(np.float32),), {}, TypeError, "uint8"),
        ((np.dstack([mask] * 3),), {}, ValueError, "1 channel"),
        ((mask,), {"connectivity": 6}, ValueError, "connectivity"),
        ((mask,), {"min_area": -1}, ValueError, "min_area"),
        ((mask,), {"foreground": 256}, ValueError, "foreground"),
        ((mask,), {"stream": None}, TypeError, "stream"),
    ]
    t = fastmog.Timer(nvtx=False)
    for args, kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            fastmog.connected_components(*args, **{"stream": stream, "timer": t, **kwargs})
    assert not [r for r in t.records if r.gpu_ms is not None]
    with pytest.raises(TypeError):
        fastmog.connected_components(mask)          # stream= is required
