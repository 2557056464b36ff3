"""The host motion step against OpenCV, bit for bit: fastmog.cpu.morphology
against cv2.morphologyEx (every shape and size up to 31, every op,
iterations, in place), fastmog.cpu.connected_components against
cv2.connectedComponentsWithStats (both connectivities, noise with thousands of
regions, a one-pixel spiral across the frame, min_area), on random masks and
on real ones (fastmog's own masks and CDnet's ground truth), and bad input
refused before anything is written."""
import numpy as np
import pytest

import fastmog
import fastmog.cpu as cpu
from fastmog.motion import structuring_element
from fastmog.testing import iter_frames

cv2 = pytest.importorskip("cv2")

OPS = {"erode": cv2.MORPH_ERODE, "dilate": cv2.MORPH_DILATE, "open": cv2.MORPH_OPEN,
       "close": cv2.MORPH_CLOSE}
SHAPES = {"rect": cv2.MORPH_RECT, "ellipse": cv2.MORPH_ELLIPSE, "cross": cv2.MORPH_CROSS}


def random_mask(rng, shape, binary=True):
    """Foreground at a random density; a shadow level among the background;
    or any values at all (morphology takes grey images too)."""
    if not binary:
        return rng.integers(0, 256, shape, dtype=np.uint8)
    fg = rng.random(shape) < rng.uniform(0.05, 0.95)
    return np.where(fg, 255, rng.choice(np.array([0, 127], np.uint8), shape)).astype(np.uint8)


def opencv_regions(mask, connectivity, foreground=255):
    n, labels, stats, centroids = cv2.connectedComponentsWithStats(
        (mask == foreground).astype(np.uint8), connectivity=connectivity, ltype=cv2.CV_32S)
    return n - 1, labels, stats[1:], centroids[1:]


def assert_same_regions(regions, mask, connectivity, foreground=255):
    n, labels, stats, centroids = opencv_regions(mask, connectivity, foreground)
    assert regions.count == n
    assert regions.stats.dtype == np.int32 and regions.centroids.dtype == np.float64
    assert np.array_equal(regions.stats, stats)
    assert np.array_equal(regions.centroids, centroids)   # the same doubles, not close ones
    if regions.labels is not None:
        assert np.array_equal(regions.labels, labels)


# ---- structuring elements and morphology -------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_elements_are_cv2s(shape):
    for w in range(1, 32):
        for h in range(1, 32):
            assert np.array_equal(structuring_element((w, h), shape),
                                  cv2.getStructuringElement(SHAPES[shape], (w, h))), (w, h)
    assert np.array_equal(structuring_element(7, shape),
                          cv2.getStructuringElement(SHAPES[shape], (7, 7)))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape", list(SHAPES) + ["array"])
def test_morphology_equals_opencv_on_random_masks(rng, op, shape):
    for trial in range(12):
        h, w = (int(v) for v in rng.integers(1, 90, 2))
        mask = random_mask(rng, (h, w), binary=trial % 3 != 2)
        kw, kh = (int(v) for v in rng.integers(1, 32, 2))
        if shape == "array":
            kernel = (rng.random((kh, kw)) < 0.4).astype(np.uint8) * rng.integers(1, 9)
            kernel[kh // 2, kw // 2] = 1
            element = (kernel != 0).astype(np.uint8)
            got = cpu.morphology(mask, op, kernel, iterations=trial % 3 + 1)
        else:
            element = cv2.getStructuringElement(SHAPES[shape], (kw, kh))
            got = cpu.morphology(mask, op, (kw, kh), shape=shape, iterations=trial % 3 + 1)
        want = cv2.morphologyEx(mask, OPS[op], element, iterations=trial % 3 + 1)
        assert got.dtype == np.uint8 and got.shape == mask.shape
        assert np.array_equal(got, want), (op, shape, (h, w), (kw, kh), trial % 3 + 1)


@pytest.mark.parametrize("size", range(1, 32))
def test_every_kernel_size_on_a_frame(rng, size):
    mask = random_mask(rng, (120, 160))
    for shape in SHAPES:
        element = cv2.getStructuringElement(SHAPES[shape], (size, size))
        for op in ("open", "close"):
            assert np.array_equal(cpu.morphology(mask, op, size, shape=shape),
                                  cv2.morphologyEx(mask, OPS[op], element)), (shape, op)


def test_morphology_in_place_and_into_padded_rows(rng):
    mask = random_mask(rng, (64, 80))
    want = cv2.morphologyEx(mask, cv2.MORPH_OPEN, np.ones((5, 5), np.uint8), iterations=2)
    inplace = mask.copy()
    assert cpu.morphology(inplace, "open", 5, iterations=2, out=inplace) is inplace
    assert np.array_equal(inplace, want)
    wide = np.full((64, 100), 7, np.uint8)
    view = wide[:, 10:90]                     # rows 100 bytes apart
    cpu.morphology(mask[:, :], "open", 5, iterations=2, out=view)
    assert np.array_equal(view, want)
    assert (wide[:, :10] == 7).all() and (wide[:, 90:] == 7).all()
    padded = np.zeros((64, 96), np.uint8)[:, :80]
    padded[...] = mask
    assert np.array_equal(cpu.morphology(padded, "open", 5, iterations=2), want)


def test_morphology_on_real_masks(data_dir):
    """fastmog's own masks of a real sequence, and CDnet's ground truth."""
    sub = cpu.BackgroundSubtractorMOG2()
    masks = [sub.apply(f) for f in iter_frames(data_dir, "CAVIAR2", 40)][20:]
    truth = sorted((data_dir / "cdnet_subset_traffic" / "groundtruth").iterdir())[40:50]
    masks += [cv2.imread(str(p), cv2.IMREAD_GRAYSCALE) for p in truth]
    assert any((m == 255).any() for m in masks)
    for k, mask in enumerate(masks):
        shape = list(SHAPES)[k % 3]
        size = (3, 5, 9, 15)[k % 4]
        element = cv2.getStructuringElement(SHAPES[shape], (size, size))
        for op in OPS:
            assert np.array_equal(cpu.morphology(mask, op, size, shape=shape),
                                  cv2.morphologyEx(mask, OPS[op], element)), (k, op)


def test_morphology_refuses_bad_input_before_writing(rng):
    mask = random_mask(rng, (20, 30))
    out = np.full((20, 30), 9, np.uint8)
    cases = [
        ((mask.astype(np.float32), "open"), {}, TypeError, "uint8"),
        ((np.dstack([mask] * 3), "open"), {}, ValueError, "1 channel"),
        (([1, 2], "open"), {}, TypeError, "numpy array"),
        ((mask, "grow"), {}, ValueError, "op must be one of erode, dilate, open, close"),
        ((mask, "open", 0), {}, ValueError, "from 1 to 31"),
        ((mask, "open", 33), {}, ValueError, "from 1 to 31"),
        ((mask, "open", 3.0), {}, TypeError, "must be an int"),
        ((mask, "open", (3, 3, 3)), {}, ValueError, r"\(width, height\)"),
        ((mask, "open", 3), {"shape": "disk"}, ValueError, "rect, ellipse, cross"),
        ((mask, "open", np.zeros((3, 3), np.uint8)), {}, ValueError, "no nonzero"),
        ((mask, "open", np.ones((3, 40), np.uint8)), {}, ValueError, "from 1 to 31"),
        ((mask, "open", np.ones((3, 3), np.float32)), {}, TypeError, "integers"),
        ((mask, "open", 3), {"iterations": 0}, ValueError, "iterations"),
        ((mask, "open", 3), {"iterations": True}, TypeError, "iterations"),
        ((mask, "open", 3), {"out": np.zeros((20, 31), np.uint8)}, ValueError, "out"),
        ((mask, "open", 3), {"out": np.zeros((20, 30), np.int16)}, TypeError, "out"),
    ]
    for args, kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            cpu.morphology(*args, **kwargs, **({} if "out" in kwargs else {"out": out}))
        assert (out == 9).all(), (args[1:], kwargs)
    readonly = np.zeros((20, 30), np.uint8)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        cpu.morphology(mask, "open", 3, out=readonly)


# ---- connected components -------------------------------------------------------


@pytest.mark.parametrize("connectivity", [4, 8])
def test_regions_equal_opencv_on_random_masks(rng, connectivity):
    for trial in range(40):
        h, w = (int(v) for v in rng.integers(1, 120, 2))
        mask = random_mask(rng, (h, w))
        regions = cpu.connected_components(mask, connectivity=connectivity, labels=True)
        assert_same_regions(regions, mask, connectivity)


@pytest.mark.parametrize("connectivity", [4, 8])
def test_noise_with_thousands_of_regions(rng, connectivity):
    mask = np.where(rng.random((1080, 1920)) < 0.4, 255, 0).astype(np.uint8)
    regions = cpu.connected_components(mask, connectivity=connectivity, labels=True)
    assert regions.count > (20000 if connectivity == 8 else 100000)
    assert_same_regions(regions, mask, connectivity)


def squares(n, side, pitch, width):
    """n squares of side x side, `pitch` apart along rows 10 on of a 64-row
    mask: n regions of side * side pixels each."""
    m = np.zeros((64, width), np.uint8)
    for k in range(n):
        m[10:10 + side, pitch * k + 2:pitch * k + 2 + side] = 255
    return m


def spiral(height, width):
    """One path a pixel wide that winds from the border to the centre, two
    pixels between its turns: one region reaching across the whole frame."""
    m = np.zeros((height, width), np.uint8)
    y = x = 0
    dy, dx = 0, 1
    m[0, 0] = 255
    while True:
        for _ in range(2):
            ny, nx, fy, fx = y + dy, x + dx, y + 2 * dy, x + 2 * dx
            ahead_free = not (0 <= fy < height and 0 <= fx < width and m[fy, fx])
            if 0 <= ny < height and 0 <= nx < width and not m[ny, nx] and ahead_free:
                y, x = ny, nx
                m[y, x] = 255
                break
            dy, dx = dx, -dy
        else:
            return m


@pytest.mark.parametrize("connectivity", [4, 8])
def test_a_one_pixel_spiral_across_the_frame_is_one_region(connectivity):
    mask = spiral(241, 320)
    regions = cpu.connected_components(mask, connectivity=connectivity, labels=True)
    assert regions.count == 1
    assert regions.stats[0].tolist() == [0, 0, 320, 241, int((mask == 255).sum())]
    assert_same_regions(regions, mask, connectivity)


def test_min_area_drops_small_regions_and_renumbers_in_order(rng):
    # sparse enough for regions of every size
    mask = np.where(rng.random((200, 300)) < 0.35, 255, 0).astype(np.uint8)
    everything = cpu.connected_components(mask, labels=True)
    kept = cpu.connected_components(mask, min_area=5, labels=True)
    big = everything.stats[:, 4] >= 5
    assert 0 < kept.count < everything.count
    assert np.array_equal(kept.stats, everything.stats[big])
    assert np.array_equal(kept.centroids, everything.centroids[big])
    renumber = np.zeros(everything.count + 1, np.int32)
    renumber[1:][big] = np.arange(1, kept.count + 1)
    assert np.array_equal(kept.labels, renumber[everything.labels])
    assert cpu.connected_components(mask, min_area=10**9).count == 0


def test_foreground_value_shadows_and_empty_masks(rng):
    mask = random_mask(rng, (50, 60))
    shadows = cpu.connected_components(mask, foreground=127)
    assert_same_regions(shadows, mask, 8, foreground=127)
    empty = cpu.connected_components(np.zeros((5, 7), np.uint8), labels=True)
    assert empty.count == 0 and len(empty) == 0
    assert empty.stats.shape == (0, 5) and empty.centroids.shape == (0, 2)
    assert not empty.labels.any()
    assert cpu.connected_components(mask).labels is None


def test_regions_of_real_masks(data_dir):
    sub = cpu.BackgroundSubtractorMOG2()
    masks = [sub.apply(f) for f in iter_frames(data_dir, "CAVIAR2", 60)][30:]
    truth = sorted((data_dir / "cdnet_subset_traffic" / "groundtruth").iterdir())[40:60]
    masks += [cv2.imread(str(p), cv2.IMREAD_GRAYSCALE) for p in truth]
    assert sum(int((m == 255).any()) for m in masks) > 10
    for mask in masks:
        for connectivity in (4, 8):
            cleaned = cpu.morphology(mask, "open", 3)
            assert_same_regions(cpu.connected_components(cleaned, connectivity=connectivity,
                                                         labels=True), cleaned, connectivity)


def test_regions_refuse_bad_input(rng):
    mask = random_mask(rng, (10, 12))
    for kwargs, error, message in [({"connectivity": 6}, ValueError, "4 or 8"),
                                   ({"connectivity": True}, ValueError, "4 or 8"),
                                   ({"min_area": -1}, ValueError, "min_area"),
                                   ({"min_area": 2.5}, TypeError, "min_area"),
                                   ({"foreground": 256}, ValueError, "foreground")]:
        with pytest.raises(error, match=message):
            cpu.connected_components(mask, **kwargs)
    with pytest.raises(TypeError, match="uint8"):
        cpu.connected_components(mask.astype(np.int32))
    with pytest.raises(ValueError, match="1 channel"):
        cpu.connected_components(np.dstack([mask] * 3))
    assert isinstance(cpu.connected_components(mask), fastmog.motion.Regions)
