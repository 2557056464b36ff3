"""The labelling that makes the 3x3 opening or closing in its own first pass
(the motion detector's default without zones: the cleaned mask is never
written) against the host's morphology then labelling: every small size,
the edges of the opening's 240-pixel bands (the runs' 120-cell segments),
corners as a region's only contact across them, views read a byte at a
time, 4K frames, labels and min_area; the detector takes it, and it is
refused where it cannot apply."""
import numpy as np
import pytest

import fastmog
from fastmog import cpu
from fastmog._components import regions_and_pixels

from test_detector_gpu import assert_same_frame
from test_motion_host import random_mask, spiral

pytestmark = pytest.mark.gpu

OPS = {"open": 0, "close": 1}


def host_regions(mask, op, foreground=255, **options):
    """What the detector did before: the mask made binary, the 3x3 opening
    or closing, then the labelling, all on the host."""
    cleaned = cpu.morphology(np.where(mask == foreground, 255, 0).astype(np.uint8), op, 3)
    return cpu.connected_components(cleaned, **options), int(np.count_nonzero(cleaned))


def assert_opened_equals_host(mask, stream, op, dev=None, foreground=255, **options):
    want, want_pixels = host_regions(mask, op, foreground, **options)
    got, pixels = regions_and_pixels(mask if dev is None else dev, stream=stream,
                                     foreground=foreground, opening=OPS[op], **options)
    label = f"{op} {mask.shape} {options}"
    assert got.count == want.count, label
    np.testing.assert_array_equal(got.stats, want.stats, err_msg=label)
    np.testing.assert_array_equal(got.centroids, want.centroids, err_msg=label)
    assert pixels == want_pixels, label
    if options.get("labels"):
        np.testing.assert_array_equal(got.labels.download(stream=stream), want.labels)
    return got


def blocks(rng, h, w, n):
    """Rectangles of 2 to 12 rows and up to 400 columns (the opening keeps
    those 3 or more each way), speckle it removes, shadows."""
    m = np.zeros((h, w), np.uint8)
    for _ in range(n):
        y, x = int(rng.integers(0, h)), int(rng.integers(0, w))
        m[y:y + int(rng.integers(2, 13)), x:x + int(rng.integers(2, 400))] = 255
    m[rng.random((h, w)) < 0.03] = 255
    m[rng.random((h, w)) < 0.02] = 127
    return m


def corner_staircases(h, w):
    """Staircases of 3x3 squares that touch only at a corner (one region
    each with 8-connectivity; the opening keeps every square), about every
    band's edge (a multiple of 240 pixels), one row of them for each offset
    from -7 to 7 pixels."""
    m = np.zeros((h, w), np.uint8)
    for row, offset in enumerate(range(-7, 8)):
        y = 1 + 10 * row
        if y + 9 > h:
            break
        for edge in range(240, w - 12, 240):
            for step in range(3):
                x = edge + offset - 3 + 3 * step
                m[y + 3 * step:y + 3 * step + 3, x:x + 3] = 255
    return m


@pytest.mark.parametrize("op", OPS)
def test_random_masks_of_every_small_size(rng, stream, op):
    sizes = [(int(h), int(w)) for h, w in zip(rng.integers(1, 40, 30), rng.integers(1, 600, 30))]
    sizes += [(h, w) for h in (1, 2, 3, 8, 9, 17) for w in (1, 7, 8, 9, 239, 240, 241, 481)]
    for h, w in sizes:
        assert_opened_equals_host(random_mask(rng, (h, w)), stream, op)
        assert_opened_equals_host(blocks(rng, h, w, 6), stream, op)


@pytest.mark.parametrize("op", OPS)
def test_band_edges_corners_and_views(rng, stream, op):
    # regions that cross the bands' edges (the runs' segments: joined by
    # the unions), corners as the only contact there, and the same masks
    # read through views one and two columns in (rows not 8-byte aligned:
    # a byte at a time), with labels, min_area and the shadow value
    mask = np.maximum(blocks(rng, 181, 1203, 160), corner_staircases(181, 1203))
    got = assert_opened_equals_host(mask, stream, op, labels=True)
    assert got.count > 20
    assert_opened_equals_host(mask, stream, op, min_area=20)
    assert_opened_equals_host(mask, stream, op, foreground=127)
    dev = fastmog.GpuMat.from_array(mask, stream=stream)
    for x0 in (1, 2):
        view = mask[3:, x0:]
        assert_opened_equals_host(view, stream, op, dev=dev[3:, x0:], labels=True)
    staircases = corner_staircases(160, 1000)
    got = assert_opened_equals_host(staircases, stream, op)
    if op == "open":            # every square kept: one region a staircase
        assert got.count == 15 * 4


@pytest.mark.parametrize("op", OPS)
def test_4k_frames(rng, stream, op):
    full = np.full((2160, 3840), 255, np.uint8)
    got = assert_opened_equals_host(full, stream, op)
    assert got.stats.tolist() == [[0, 0, 3840, 2160, 3840 * 2160]]
    noise = np.where(rng.random((1080, 1920)) < 0.45, 255, 0).astype(np.uint8)
    assert_opened_equals_host(noise, stream, op)
    thick = np.kron(spiral(240, 427), np.ones((3, 3), np.uint8))[:719, :1279]
    got = assert_opened_equals_host(np.ascontiguousarray(thick), stream, op)
    assert got.count >= 1


def test_the_detector_labels_without_writing_a_cleaned_mask(rng, stream):
    # the default detector (open 3x3, no zones) takes the fused pass: no
    # morphology call, no cleaned mask; with zones, or a 5x5 element, the
    # morphology is its own pass; every frame equals the host detector's
    for options in ({}, {"morphology": ("close", (3, 3))}, {"morphology": ("open", 5)},
                    {"zones": [[(0, 0), (100, 0), (100, 60)]]}):
        gpu, host = fastmog.MotionDetector(**options), cpu.MotionDetector(**options)
        t = fastmog.Timer(nvtx=False)
        for _ in range(6):
            mask = blocks(rng, 72, 128, 8)
            got = gpu.update(fastmog.GpuMat.from_array(mask, stream=stream), stream=stream,
                             timer=t)
            assert_same_frame(got, host.update(mask))
        fused = "zones" not in options and options.get("morphology", ("open", 3))[1] in (3, (3, 3))
        names = [r.name for r in t.records]
        assert ("morphology" in names) != fused, options
        assert (gpu._cleaned is None) == fused, options


def test_the_opening_is_refused_where_it_cannot_apply(rng, stream):
    mask = random_mask(rng, (20, 30))
    zone = np.ones((20, 30), np.uint8)
    t = fastmog.Timer(nvtx=False)
    for kwargs in ({"opening": 2}, {"opening": -2}, {"opening": 0, "connectivity": 4},
                   {"opening": 0, "zone": zone}):
        options = {"connectivity": 8, **kwargs}
        with pytest.raises(ValueError, match="opening"):
            regions_and_pixels(mask, stream=stream, timer=t, **options)
    for kwargs in ({"images": 2}, {"count": True}):
        with pytest.raises(ValueError, match="opening"):
            fastmog._fastmog._connected_components(mask, 8, 0, 255, stream=stream, timer=t,
                                                   opening=0, **kwargs)
    assert not [r for r in t.records if r.gpu_ms is not None]
