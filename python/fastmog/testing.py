"""Helpers for testing fastmog, shared by its tests and benchmarks (as numpy.testing is).

Where the test data is (find_test_data), its real sequences (SEQUENCES,
iter_frames), the MOG2 parameter cases of the parity tests (CASES,
DEFAULT_TIER, GPU_CASES, convert) and OpenCV's MOG2 beside the host reference
(opencv_subtractor, compare_host_with_opencv). Public and free of pytest; OpenCV
(``opencv-python-headless``, in the ``test`` extra) is imported only by the
functions that decode or compare with it. Run as a script to print the parity
table of the host reference against OpenCV's CPU MOG2 on every sequence and
case: ``python -m fastmog.testing [--frames N]``.
"""
import os
import pathlib
import sys

import numpy as np

from . import cpu

__all__ = ["SEQUENCES", "CUSTOM", "CASES", "DEFAULT_TIER", "GPU_CASES", "find_test_data",
           "iter_frames", "convert", "opencv_subtractor", "frame_count",
           "compare_host_with_opencv"]

SEQUENCES = {
    "CAVIAR2": "sbi2015_CAVIAR2/input",
    "traffic": "cdnet_subset_traffic/input",
    "fall": "cdnet_subset_fall/input",
    "vtest": "opencv_samples_video/vtest.avi",
    "tree": "opencv_samples_video/tree.avi",
}


# the checkout this fastmog is imported from (python/fastmog/), if it is one
_CHECKOUT = pathlib.Path(__file__).resolve().parents[2]


def find_test_data(root=None):
    """The test data folder: $FASTMOG_TEST_DATA, else `root`/.testdata, else
    `root`/../shared/data, `root` being a fastmog checkout (by default the one
    this fastmog is imported from, else the current directory); None where
    there is none."""
    env = os.environ.get("FASTMOG_TEST_DATA")
    if env:
        return pathlib.Path(env)
    if root is not None:
        here = pathlib.Path(root)
    elif (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "python" / "fastmog").is_dir():
        here = _CHECKOUT
    else:
        here = pathlib.Path.cwd()
    for candidate in (here / ".testdata", here.parent / "shared" / "data"):
        # .testdata may hold only generated clips (benchmarks/make_clips.py)
        if candidate.is_dir() and any(p.name != "clips" for p in candidate.iterdir()):
            return candidate
    return None


def _cv2():
    import cv2

    return cv2


def iter_frames(data_dir, sequence, limit=None):
    """Decoded BGR frames (always with OpenCV, one decoder for every side)."""
    cv2 = _cv2()
    path = pathlib.Path(data_dir) / SEQUENCES[sequence]
    count = 0
    if path.is_dir():
        for file in sorted(path.iterdir()):
            if limit is not None and count >= limit:
                return
            frame = cv2.imread(str(file), cv2.IMREAD_COLOR)
            if frame is not None:
                count += 1
                yield frame
        return
    cap = cv2.VideoCapture(str(path))
    try:
        while limit is None or count < limit:
            ok, frame = cap.read()
            if not ok:
                return
            count += 1
            yield frame
    finally:
        cap.release()


def _freeze_then_restart(i, n):
    """auto, then frozen (0), one forced restart (1), auto again."""
    if i < n // 2:
        return -1.0
    if i < 3 * n // 4:
        return 0.0
    if i == 3 * n // 4:
        return 1.0
    return -1.0


CUSTOM = dict(history=200, var_threshold=25.0, n_mixtures=3, background_ratio=0.8,
              var_threshold_gen=12.0, var_init=20.0, var_min=2.0, var_max=60.0,
              complexity_reduction_threshold=0.1, shadow_value=100, shadow_threshold=0.6)

# name: (colour conversion, dtype, constructor kwargs, learning rate(i, n), frame limit)
CASES = {
    "bgr": ("bgr", np.uint8, {}, None, None),
    "bgr_noshadow": ("bgr", np.uint8, {"detect_shadows": False}, None, None),
    "grey": ("grey", np.uint8, {}, None, None),
    "grey_noshadow": ("grey", np.uint8, {"detect_shadows": False}, None, None),
    "bgr_custom_lr0.01": ("bgr", np.uint8, CUSTOM, lambda i, n: 0.01, None),
    "grey_h50_freeze_restart": ("grey", np.uint8, {"history": 50}, _freeze_then_restart, None),
    "bgr_float32": ("bgr", np.float32, {}, None, 150),
    "bgra": ("bgra", np.uint8, {"n_mixtures": 4}, None, 150),
}


# The parity pairs of the default test tier: one or two cases per sequence,
# every case somewhere (vtest, the longest, once); the rest run with --slow.
DEFAULT_TIER = {
    "CAVIAR2": ("bgr", "bgra"),
    "traffic": ("grey_noshadow", "bgr_float32"),
    "fall": ("bgr_custom_lr0.01", "grey"),
    "vtest": ("bgr",),
    "tree": ("grey_h50_freeze_restart", "bgr_noshadow"),
}

# The cases on which the GPU kernel is compared with the host reference.
GPU_CASES = ["bgr", "grey_noshadow", "bgr_custom_lr0.01", "grey_h50_freeze_restart",
             "bgr_float32", "bgra"]


def convert(frame, colour, dtype):
    cv2 = _cv2()
    if colour == "grey":
        frame = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
    elif colour == "bgra":
        frame = cv2.cvtColor(frame, cv2.COLOR_BGR2BGRA)
        frame[..., 3] = frame[..., 0] // 2 + 7  # a 4th channel that varies
    return frame.astype(dtype) if dtype != np.uint8 else frame


def opencv_subtractor(kwargs):
    sub = _cv2().createBackgroundSubtractorMOG2()
    for key, value in kwargs.items():
        camel = "".join(part.capitalize() for part in key.split("_"))
        getattr(sub, "set" + camel)(value)
    return sub


def frame_count(data_dir, sequence, limit):
    return sum(1 for _ in iter_frames(data_dir, sequence, limit))


def compare_host_with_opencv(data_dir, sequence, case, frame_limit=None):
    """Runs fastmog's host reference and cv2 side by side; returns
    (frames, identical mask pixels, total mask pixels, largest background
    difference or None where OpenCV has no background for the case)."""
    colour, dtype, kwargs, rate, limit = CASES[case]
    if frame_limit is not None:
        limit = frame_limit if limit is None else min(limit, frame_limit)
    n = frame_count(data_dir, sequence, limit)
    ours = cpu.BackgroundSubtractorMOG2(**kwargs)
    ref = opencv_subtractor(kwargs)
    same = total = 0
    worst_bg = 0.0
    bg_comparable = colour != "bgra"
    for i, frame in enumerate(iter_frames(data_dir, sequence, limit)):
        frame = convert(frame, colour, dtype)
        lr = -1.0 if rate is None else rate(i, n)
        a = ours.apply(frame, lr)
        b = ref.apply(frame, learningRate=lr)
        same += int(np.count_nonzero(a == b))
        total += a.size
        if bg_comparable and (i % 10 == 9 or i == n - 1):
            diff = np.abs(ours.get_background_image().astype(np.float64)
                          - ref.getBackgroundImage().astype(np.float64))
            worst_bg = max(worst_bg, float(diff.max()))
    return n, same, total, (worst_bg if bg_comparable else None)


def main(argv):
    limit = int(argv[argv.index("--frames") + 1]) if "--frames" in argv else None
    data_dir = find_test_data()
    if data_dir is None:
        sys.exit("test data not found: set FASTMOG_TEST_DATA or put it in ../shared/data")
    print(f"OpenCV {_cv2().__version__}; data {data_dir}")
    print("| sequence | case | frames | identical mask pixels | max background diff |")
    print("|---|---|---|---|---|")
    for sequence in SEQUENCES:
        for case in CASES:
            n, same, total, bg = compare_host_with_opencv(data_dir, sequence, case, limit)
            bg_text = "n/a (cv2: 1 or 3 channels only)" if bg is None else f"{bg:g}"
            print(f"| {sequence} | {case} | {n} | {100.0 * same / total:.6f} % | {bg_text} |",
                  flush=True)


if __name__ == "__main__":
    main(sys.argv)
