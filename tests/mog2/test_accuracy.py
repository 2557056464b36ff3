"""Accuracy on the CDnet-layout sequences: fastmog's masks scored with the
CDnet rules (fastmog.scoring) beside OpenCV's, on the same decoded frames."""
import cv2
import numpy as np
import pytest

import fastmog
from fastmog.scoring import GroundTruth, frame_number_of

CDNET = ["sbi2015_CAVIAR2", "cdnet_subset_traffic", "cdnet_subset_fall"]


def read_grey(path):
    return cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)


@pytest.mark.parametrize("detect_shadows", [True, False])
@pytest.mark.parametrize("sequence", CDNET)
def test_f_measure_beside_opencv(data_dir, sequence, detect_shadows):
    root = data_dir / sequence
    ours = fastmog.cpu.BackgroundSubtractorMOG2(detect_shadows=detect_shadows)
    ref = cv2.createBackgroundSubtractorMOG2(detectShadows=detect_shadows)
    gt_ours, gt_ref = GroundTruth(root, read_grey), GroundTruth(root, read_grey)
    for path in sorted((root / "input").iterdir()):
        frame = cv2.imread(str(path), cv2.IMREAD_COLOR)
        n = frame_number_of(path)
        gt_ours.add(n, ours.apply(frame))
        gt_ref.add(n, ref.apply(frame))
    a, b = gt_ours.score, gt_ref.score
    print(f"{sequence} shadows={detect_shadows}: fastmog {a} | OpenCV {cv2.__version__} {b}")
    assert a.frames > 50
    assert (a.tp, a.fp, a.fn) == (b.tp, b.fp, b.fn)
    assert 0.0 < a.f_measure < 1.0


def test_scoring_rules_on_a_tiny_sequence(tmp_path):
    gt_dir = tmp_path / "groundtruth"
    gt_dir.mkdir()
    (tmp_path / "temporalROI.txt").write_text("2 3")
    labels = np.array([[0, 50, 85, 170, 255, 255]], np.uint8)
    for n in (1, 2, 3):
        cv2.imwrite(str(gt_dir / f"gt{n:06d}.png"), labels)
    gt = GroundTruth(tmp_path, read_grey)
    mask = np.array([[255, 255, 255, 255, 255, 127]], np.uint8)
    for n in (1, 2, 3):
        gt.add(n, mask)
    # frame 1 is outside the temporal ROI; per frame: FP at 0 and 50, TP at
    # the first 255, FN at the shadow-marked 255; 85 and 170 are skipped
    s = gt.score
    assert (s.frames, s.tp, s.fp, s.fn) == (2, 2, 4, 2)
    assert s.precision == pytest.approx(2 / 6) and s.recall == pytest.approx(0.5)
