"""Scoring foreground masks against CDnet-layout ground truth.

Layout: input/inNNNNNN.jpg frames, groundtruth/gtNNNNNN.png labels, ROI.bmp and
temporalROI.txt ("first last"). Labels: 0 static, 50 hard shadow, 85 outside
the region of interest, 170 unknown motion, 255 moving. Only frames inside the
temporal ROI are scored; pixels labelled 85 or 170, and pixels outside ROI.bmp
(when its size matches the frames), are skipped. Ground truth 255 is
foreground, 0 and 50 background; a predicted pixel is foreground only if its
mask value is 255 (a shadow, 127, counts as background). TP, FP and FN are
summed over the sequence.
"""
import dataclasses
import pathlib
import re

import numpy as np

_NUMBER = re.compile(r"(\d+)")


def _frame_number(path):
    match = _NUMBER.search(path.stem)
    return int(match.group(1)) if match else None


@dataclasses.dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    frames: int = 0

    @property
    def precision(self):
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self):
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def f_measure(self):
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def __str__(self):
        return (f"P={self.precision:.4f} R={self.recall:.4f} F={self.f_measure:.4f} "
                f"over {self.frames} frames")


class GroundTruth:
    """The ground truth of one CDnet-layout directory. `root` is the sequence
    directory (holding groundtruth/), or its input/ directory."""

    def __init__(self, root, read_grey):
        root = pathlib.Path(root)
        if not (root / "groundtruth").is_dir() and (root.parent / "groundtruth").is_dir():
            root = root.parent
        gt_dir = root / "groundtruth"
        if not gt_dir.is_dir():
            raise FileNotFoundError(f"{root} has no groundtruth/ directory")
        self._read_grey = read_grey
        self._labels = {}
        for path in sorted(gt_dir.iterdir()):
            n = _frame_number(path)
            if n is not None and path.suffix.lower() in (".png", ".bmp", ".jpg"):
                self._labels[n] = path
        self.first, self.last = -1, 1 << 62
        roi_file = root / "temporalROI.txt"
        if roi_file.is_file():
            self.first, self.last = _temporal_roi(roi_file)
        roi_path = root / "ROI.bmp"
        self.roi = read_grey(roi_path) if roi_path.is_file() else None
        self.score = Score()

    def scored(self, frame_numbers):
        """Those of `frame_numbers` that add() would score: labelled and
        inside the temporal ROI."""
        return [n for n in frame_numbers
                if self.first <= n <= self.last and n in self._labels]

    def label_path(self, frame_number):
        return self._labels[frame_number]

    def add(self, frame_number, mask):
        """Adds one predicted mask (uint8) for frame `frame_number`."""
        if not self.first <= frame_number <= self.last or frame_number not in self._labels:
            return
        gt = self._read_grey(self._labels[frame_number])
        if gt.shape != mask.shape[:2]:
            raise ValueError(f"ground truth {gt.shape} and mask {mask.shape} differ in size")
        valid = (gt != 85) & (gt != 170)
        if self.roi is not None and self.roi.shape == gt.shape:
            valid &= self.roi > 0
        truth = gt == 255
        predicted = mask == 255
        self.score.tp += int(np.count_nonzero(valid & truth & predicted))
        self.score.fp += int(np.count_nonzero(valid & ~truth & predicted))
        self.score.fn += int(np.count_nonzero(valid & truth & ~predicted))
        self.score.frames += 1


def _temporal_roi(path):
    """(first, last) from a temporalROI.txt; ValueError naming the file if it
    does not hold two frame numbers."""
    try:
        words = path.read_bytes().split()
        first, last = int(words[0]), int(words[1])
    except (IndexError, ValueError):
        raise ValueError(f"{path} must hold two frame numbers, 'first last'") from None
    if first > last:
        raise ValueError(f"{path} says the scored frames run from {first} to {last}: "
                         f"first is after last")
    return first, last


def frame_number_of(path):
    """The number CDnet gives a frame file (in000123.jpg -> 123), or None."""
    return _frame_number(pathlib.Path(path))
