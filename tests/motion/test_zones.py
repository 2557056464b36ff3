"""Zones (fastmog.motion.zone_mask) against cv2.fillPoly, pixel for pixel:
random polygons inside the frame, across its border and far beyond it,
several at once (overlaps cancel as OpenCV's even-odd fill makes them),
self-crossing stars, masks, and the malformed zones refused."""
import numpy as np
import pytest

from fastmog.motion import zone_mask

cv2 = pytest.importorskip("cv2")


def _opencv(shape, polygons):
    out = np.zeros(shape, np.uint8)
    cv2.fillPoly(out, [np.asarray(p, np.int32) for p in polygons], 255)
    return out


def _random_polygons(rng, h, w, pad, count, most_points):
    return [np.stack([rng.integers(-pad, w + pad, m), rng.integers(-pad, h + pad, m)], 1)
            for m in rng.integers(3, most_points + 1, count)]


@pytest.mark.parametrize("pad", [0, 15, 300], ids=["inside", "across-border", "far-beyond"])
@pytest.mark.parametrize("count", [1, 3])
def test_random_polygons_equal_fillpoly(rng, pad, count):
    checked = 0
    for _ in range(150):
        h, w = (int(v) for v in rng.integers(4, 48, 2))
        polygons = _random_polygons(rng, h, w, pad, count, 9)
        expect = _opencv((h, w), polygons)
        if not expect.any():
            with pytest.raises(ValueError, match="no pixel inside"):
                zone_mask(polygons if count > 1 else polygons[0], (h, w))
            continue
        got = zone_mask(polygons if count > 1 else polygons[0], (h, w))
        assert np.array_equal(got, expect), (h, w, [p.tolist() for p in polygons])
        checked += 1
    assert checked > 50


def test_shapes_users_draw_equal_fillpoly():
    h, w = 120, 160
    cases = {
        "star": [(80, 5), (95, 110), (10, 40), (150, 40), (65, 110)],      # crosses itself
        "border": [(0, 0), (159, 0), (159, 119), (0, 119)],               # the whole frame
        "sliver": [(3, 3), (150, 4), (3, 5)],
        "beyond": [(-50, -20), (200, 30), (90, 300)],
        "concave": [(10, 10), (80, 60), (150, 10), (150, 110), (10, 110)],
        "vertical": [(40, 0), (41, 0), (41, 119), (40, 119)],
    }
    for name, poly in cases.items():
        assert np.array_equal(zone_mask(poly, (h, w)), _opencv((h, w), [poly])), name
    two = [cases["star"], cases["concave"]]
    assert np.array_equal(zone_mask(two, (h, w)), _opencv((h, w), two))


def test_a_mask_is_a_zone():
    m = np.zeros((6, 8), bool)
    m[2:4, 1:7] = True
    got = zone_mask(m, (6, 8))
    assert got.dtype == np.uint8 and np.array_equal(got, m * np.uint8(255))


@pytest.mark.parametrize("zone, error, words", [
    ([(1, 1), (5, 5)], ValueError, "at least 3"),
    ([(1.5, 1), (5, 5), (1, 7)], TypeError, "integer"),
    (np.array([[1, 1], [5, 5], [1, 7]], np.float32), TypeError, "integer"),
    ([(1, 1), (5, 5), (1, 1 << 30)], ValueError, "beyond"),
    ([(100, 100), (120, 100), (110, 130)], ValueError, "no pixel inside"),
    (np.zeros((6, 8), np.uint8), ValueError, "no pixel inside"),
    (np.ones((5, 8), np.uint8), ValueError, "must be 6x8"),
    (np.ones((6, 8), np.float32), TypeError, "integer or bool"),
    ([], TypeError, "a zone is"),
    ("zone", TypeError, "a zone is"),
    ([[(1, 1), (5, 5), (1, 7)], 3], TypeError, "zone polygon 1"),
    ([(1, 1, 1), (5, 5, 5), (1, 7, 7)], ValueError, "(x, y)"),
])
def test_malformed_zones_are_refused(zone, error, words):
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        zone_mask(zone, (6, 8))


@pytest.mark.parametrize("shape", [(0, 8), (6,), (6.0, 8), "6x8", (True, 8)])
def test_bad_shapes_are_refused(shape):
    with pytest.raises(ValueError, match="shape"):
        zone_mask([(1, 1), (5, 5), (1, 5)], shape)
