"""Structuring elements as cv2.getStructuringElement makes them, and the
checks of the `op`, `kernel`, `shape` and `iterations` arguments of
morphology, done before any work."""
from __future__ import annotations

import numbers

import numpy as np

OPS = {"erode": 0, "dilate": 1, "open": 2, "close": 3}
SHAPES = ("rect", "ellipse", "cross")
MAX_SIDE = 31          # the largest kernel side, as issue 23 asks (OpenCV takes more)
MAX_ITERATIONS = 1000


def whole_number(value, what, lo, hi) -> int:
    """`value` as an int from lo to hi: TypeError for anything but an integer
    (bools too), ValueError outside the range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    number = int(value)
    if not lo <= number <= hi:
        raise ValueError(f"{what} must be from {lo} to {hi}, got {number}")
    return number


def _side(value, what) -> int:
    return whole_number(value, what, 1, MAX_SIDE)


def structuring_element(kernel, shape="rect") -> np.ndarray:
    """The uint8 element (nonzero = in) that `kernel` names: an int k (k x k),
    a (width, height) pair, both with `shape` "rect", "ellipse" or "cross"
    exactly as cv2.getStructuringElement draws them, or a 2-D array used as
    it is (nonzero = in; `shape` is then ignored). Sides from 1 to 31; the
    anchor is the centre (width // 2, height // 2), OpenCV's default."""
    if isinstance(kernel, np.ndarray):
        if kernel.ndim != 2:
            raise ValueError(f"a kernel array must be 2-D, got shape {kernel.shape}")
        if kernel.dtype.kind not in "biu":
            raise TypeError(f"a kernel array must hold integers or bools, not {kernel.dtype}")
        h, w = kernel.shape
        _side(w, "the kernel's width")
        _side(h, "the kernel's height")
        element = np.ascontiguousarray(kernel != 0, dtype=np.uint8)
        if not element.any():
            raise ValueError("the kernel has no nonzero entry: it reaches no pixel")
        return element
    if isinstance(kernel, tuple):
        if len(kernel) != 2:
            raise ValueError(f"a kernel size is (width, height), got {kernel!r}")
        w, h = _side(kernel[0], "the kernel's width"), _side(kernel[1], "the kernel's height")
    else:
        w = h = _side(kernel, "kernel")
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)}, not {shape!r}")
    element = np.zeros((h, w), np.uint8)
    ax, ay = w // 2, h // 2
    r, c = h // 2, w // 2
    inv_r2 = 1.0 / (r * r) if r else 0.0
    for i in range(h):
        if shape == "rect" or (shape == "cross" and i == ay):
            j1, j2 = 0, w
        elif shape == "cross":
            j1, j2 = ax, ax + 1
        else:
            dy = i - r
            if abs(dy) > r:
                continue
            # OpenCV rounds to the nearest, ties to even (cvRound)
            dx = int(np.rint(c * np.sqrt((r * r - dy * dy) * inv_r2)))
            j1, j2 = max(c - dx, 0), min(c + dx + 1, w)
        element[i, j1:j2] = 1
    return element


def op_code(op) -> int:
    if not isinstance(op, str) or op not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}, not {op!r}")
    return OPS[op]


def iterations_count(iterations) -> int:
    return whole_number(iterations, "iterations", 1, MAX_ITERATIONS)
