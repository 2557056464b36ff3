"""The host motion detector (fastmog.cpu.MotionDetector): each frame's zone
scores and regions equal to OpenCV's morphologyEx, fillPoly and
connectedComponentsWithStats composed by hand; events segmented from
hand-made score sequences (hysteresis, gaps, the end of input, light
switches); bad options and masks refused before any work."""
import numpy as np
import pytest

import fastmog
from fastmog.motion import _events

cv2 = pytest.importorskip("cv2")


def _segment(overs, min_frames, gap, scores=None, fps=None):
    seg = _events.Segmenter(0, min_frames, gap, fps)
    events = []
    for i, over in enumerate(overs):
        score = scores[i] if scores is not None else float(over)
        e = seg.step(i, bool(over), score, None)
        if e is not None:
            events.append(e)
    tail = seg.finish()
    return events + ([tail] if tail is not None else [])


@pytest.mark.parametrize("overs, min_frames, gap, spans", [
    ([0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0], 2, 3, [(1, 7)]),        # a gap shorter than gap_frames
    ([0, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0], 2, 3, [(1, 2), (6, 7)]),   # a gap of gap_frames splits
    ([1, 0, 0, 0, 1, 1], 2, 2, [(4, 5)]),                          # a run too short is forgotten
    ([1, 0, 1, 0, 1, 0], 2, 1, []),                                 # never two in a row
    ([1, 1, 1], 3, 5, [(0, 2)]),                                    # open at the end: finish ends it
    ([1, 1, 0, 1, 1, 1], 3, 2, [(3, 5)]),                           # the run restarts after a gap
])
def test_events_from_hand_made_sequences(overs, min_frames, gap, spans):
    got = [(e.start_frame, e.end_frame) for e in _segment(overs, min_frames, gap)]
    assert got == spans


def test_event_peak_times_and_box():
    seg = _events.Segmenter(3, 1, 2, 10.0)
    boxes = [(5, 5, 2, 2), None, (1, 8, 3, 1)]
    for i, (score, box) in enumerate(zip([0.2, 0.7, 0.4], boxes)):
        assert seg.step(i, True, score, box) is None
    assert seg.step(3, False, 0.0, None) is None
    e = seg.step(4, False, 0.0, None)
    assert (e.zone, e.start_frame, e.end_frame, e.frames) == (3, 0, 2, 3)
    assert (e.start_time, e.end_time, e.peak_score, e.peak_frame) == (0.0, 0.2, 0.7, 1)
    assert e.box == (1, 5, 6, 4)


def _moving_masks(rng, n, h, w):
    """A square crossing the frame, noise specks and shadow pixels (127)."""
    for k in range(n):
        m = np.zeros((h, w), np.uint8)
        x = 4 * k - 10
        m[20:40, max(x, 0):max(x + 18, 0)] = 255
        specks = rng.integers(0, h * w, 40)
        m.flat[specks] = 255
        m.flat[rng.integers(0, h * w, 60)] = 127
        yield m


def _expected(mask, zone, element, min_area):
    fg = np.where(mask == 255, 255, 0).astype(np.uint8)
    clean = cv2.morphologyEx(fg, cv2.MORPH_OPEN, element)
    inside = clean & zone
    _, _, stats, _ = cv2.connectedComponentsWithStats(inside, connectivity=8, ltype=cv2.CV_32S)
    stats = stats[1:]
    stats = stats[stats[:, 4] >= min_area]
    return np.count_nonzero(inside) / np.count_nonzero(zone), stats


def test_scores_and_regions_equal_opencv_composed_by_hand(rng):
    h, w = 72, 120
    polygons = [[(0, 0), (59, 0), (59, 71), (0, 71)],
                [(60, 5), (119, 30), (100, 71), (55, 60)],
                [(-20, 50), (140, 50), (60, 90)]]           # crosses the border
    zones = []
    for p in polygons:
        z = np.zeros((h, w), np.uint8)
        cv2.fillPoly(z, [np.asarray(p, np.int32)], 255)
        zones.append(z)
    element = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (3, 3))
    det = fastmog.cpu.MotionDetector(zones=polygons, morphology=("open", 3, "ellipse"),
                                     min_area=4, threshold=0.01)
    seen = 0
    for mask in _moving_masks(rng, 36, h, w):
        result = det.update(mask)
        for zone, got in zip(zones, result.zones):
            score, stats = _expected(mask, zone, element, 4)
            assert got.score == pytest.approx(score, abs=0)
            assert np.array_equal(got.regions.stats, stats)
            assert got.motion == (score >= 0.01 and not result.light_switch)
            seen += got.regions.count
    assert seen > 20
    det.finish()
    assert {e.zone for e in det.events} == {0, 1}


def test_a_light_switch_is_no_motion_and_no_event():
    det = fastmog.cpu.MotionDetector(morphology=None, min_event_frames=1, gap_frames=1,
                                     light_switch=0.5)
    lit = np.full((20, 20), 255, np.uint8)
    for _ in range(3):
        r = det.update(lit)
        assert r.light_switch and not r.motion and r.zones[0].score == 1.0
    assert det.finish() == [] and det.events == []


@pytest.mark.parametrize("options, error, words", [
    ({"threshold": 1.5}, ValueError, "threshold"),
    ({"threshold": "0.1"}, TypeError, "threshold"),
    ({"light_switch": 0}, ValueError, "light_switch"),
    ({"min_event_frames": 0}, ValueError, "min_event_frames"),
    ({"gap_frames": 2.5}, TypeError, "gap_frames"),
    ({"fps": -1}, ValueError, "fps"),
    ({"morphology": ("blur", 3)}, ValueError, "blur"),
    ({"morphology": ("open", 33)}, ValueError, "31"),
    ({"morphology": "open"}, ValueError, "morphology"),
    ({"zones": []}, TypeError, "zones"),
    ({"zones": np.ones((4, 4), np.uint8)}, TypeError, "zones"),
    ({"connectivity": 6}, ValueError, "connectivity"),
    ({"min_area": -1}, ValueError, "min_area"),
])
def test_bad_options_are_refused(options, error, words):
    with pytest.raises(error, match=words):
        fastmog.cpu.MotionDetector(**options)


def test_bad_masks_and_zones_are_refused_before_any_work():
    with pytest.raises(ValueError, match=r"zones\[1\]: .*at least 3"):
        fastmog.cpu.MotionDetector(zones=[[(0, 0), (5, 0), (5, 5)], [(1, 1), (2, 2)]])
    det = fastmog.cpu.MotionDetector(zones=[[(0, 0), (5, 0), (5, 5)], [(50, 50), (60, 50),
                                                                      (55, 60)]])
    with pytest.raises(ValueError, match=r"zones\[1\]: .*no pixel inside the 8x8"):
        det.update(np.zeros((8, 8), np.uint8))
    det = fastmog.cpu.MotionDetector()
    for bad in (np.zeros((8, 8), np.float32), np.zeros((8, 8, 3), np.uint8), [[0]]):
        with pytest.raises(TypeError, match="2-D uint8"):
            det.update(bad)
    assert det.index == 0
    det.update(np.zeros((8, 8), np.uint8))
    with pytest.raises(ValueError, match="8x8"):
        det.update(np.zeros((9, 8), np.uint8))
    assert det.index == 1
