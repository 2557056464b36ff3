"""fastmog.MotionDetector: the motion detector's GPU face. The mask stays on
the GPU: morphology (made binary in its first pass) and each zone's regions
and foreground count run there, and only the regions' rows come back.
Without zones, the 3x3 opening or closing is made by the labelling's first
pass itself: the cleaned mask is never written."""
from __future__ import annotations

import numpy as np

from . import _fastmog
from ._components import (foreground_pixels, opening_in_labelling, regions_and_pixels,
                          regions_of_stack)
from ._morphology import morphology, morphology_stack
from .motion import _detector


class MotionDetector(_detector.Detector):
    __doc__ = (_detector.Detector.__doc__ or "") + """

    The GPU face: update(mask, *, stream, timer=None) takes the H x W uint8
    mask of a subtractor (a GpuMat, any producer's device memory, or a numpy
    array, uploaded) and gives the frame's fastmog.motion.FrameMotion, equal
    to fastmog.cpu.MotionDetector's for the same masks; the work is queued
    on `stream`, and the call waits only for each zone's regions. finish()
    ends the open events; events lists those ended."""

    def __init__(self, **options):
        super().__init__(**options)
        self._stream = self._timer = None
        self._device_zones = None
        self._last_counts = None    # regions each zone held last frame: its first read
        self._cleaned = None        # the cleaned mask, reused frame after frame
        # the 3x3 opening or closing with 8-connectivity: made by the
        # labelling itself where there are no zones (no cleaned mask written)
        self._opening = opening_in_labelling(self.morphology, self.connectivity)

    def update(self, mask, *, stream, timer=None):
        if not isinstance(stream, _fastmog.Stream):
            raise TypeError(f"stream must be a fastmog.Stream, not {type(stream).__name__}")
        if not isinstance(mask, (np.ndarray, _fastmog.GpuMat)):
            mask = _fastmog.asgpumat(mask, stream=stream)   # a producer's device memory
        self._stream, self._timer = stream, timer
        try:
            return super().update(mask)
        finally:
            self._stream = self._timer = None

    def _check(self, mask):
        if isinstance(mask, _fastmog.GpuMat):
            if mask.dtype != "uint8" or len(mask.shape) != 2:
                raise TypeError(f"mask must be a 2-D uint8 GpuMat, not {mask.dtype} "
                                f"{mask.shape}")
            if self._zones is not None and tuple(mask.shape) != self.shape:
                raise ValueError(f"mask is {mask.shape[1]}x{mask.shape[0]}, the detector's "
                                 f"frames are {self.shape[1]}x{self.shape[0]}")
            return
        super()._check(mask)

    def _build(self, shape):
        super()._build(shape)
        if self._zone_specs is None:
            self._device_zones = [None]          # the whole frame: no zone to test
        else:
            self._device_zones = [_fastmog.GpuMat.from_array(z, stream=self._stream)
                                  for z in self._zones]
        self._last_counts = [0] * len(self._device_zones)

    def _cleaning(self):
        """The morphology that cleans a mask: op, kernel and shape."""
        if self.morphology is None:
            # a 1x1 dilation is the identity: the pass only makes the mask binary
            return "dilate", 1, "rect"
        return self.morphology

    def _measure(self, mask):
        s, t = self._stream, self._timer
        options = dict(stream=s, connectivity=self.connectivity, min_area=self.min_area,
                       timer=t)
        size = self.shape[0] * self.shape[1]
        if self._zone_specs is None:
            if self._opening >= 0:      # the labelling makes the opening itself
                whole, pixels = regions_and_pixels(mask, rows=self._rows(0),
                                                   foreground=self.foreground,
                                                   opening=self._opening, **options)
            else:
                whole, pixels = regions_and_pixels(self._clean(mask), rows=self._rows(0),
                                                   **options)
            self._last_counts[0] = whole.count
            return pixels / size, [(pixels / size, whole)]
        clean = self._clean(mask)
        # with zones the whole frame gives only its foreground fraction (the
        # light switch): counted, not labelled
        fraction = foreground_pixels(clean, stream=s, timer=t) / size
        measured = []
        for k, (zone, zone_size) in enumerate(zip(self._device_zones, self._sizes)):
            regions, inside = regions_and_pixels(clean, zone=zone, rows=self._rows(k), **options)
            self._last_counts[k] = regions.count
            measured.append((inside / zone_size, regions))
        return fraction, measured

    def _clean(self, mask):
        """The mask made binary and cleaned by the detector's morphology, into
        one buffer reused by every frame (on the stream's device): morphology
        orders its writes after the earlier frames' reads."""
        s = self._stream
        if self._cleaned is None or self._cleaned.device != s.device:
            self._cleaned = _fastmog.GpuMat(self.shape, np.uint8, device=s.device)
        op, kernel, shape = self._cleaning()
        return morphology(mask, op, kernel, shape=shape, stream=s, foreground=self.foreground,
                          out=self._cleaned, timer=self._timer)

    def _rows(self, k):
        """Zone k's first read: the regions it held last frame and a few more."""
        spare = ROWS_SPARE if self._zone_specs is not None else WHOLE_FRAME_SPARE
        return self._last_counts[k] + spare


# rows read beyond a zone's last count: two regions more than last frame
# still come in the first copy (24 bytes a row; with two zones and 32
# regions the frame sends 936 bytes). Without zones, the frame's one
# labelling reads eight more (32 regions: 984 bytes): a scene whose count
# moves by a few regions a frame then needs no second copy and wait.
ROWS_SPARE = 2
WHOLE_FRAME_SPARE = 8


def update_cameras(detectors, masks, *, stream, timer=None):
    """detectors[k].update(masks[k], stream=stream, timer=timer) for every
    camera, with the same results, in fewer steps: the cameras whose
    detectors have no zones and the same morphology, connectivity, min_area
    and foreground, and whose masks (GpuMats, as apply_cameras gives them)
    share one shape of an even height, are cleaned into one stack (one
    launch per morphology pass) and labelled apart in one pass, read back
    in one copy with one wait. The other cameras take their own update.
    Returns each camera's FrameMotion."""
    if not isinstance(stream, _fastmog.Stream):
        raise TypeError(f"stream must be a fastmog.Stream, not {type(stream).__name__}")
    detectors, masks = list(detectors), list(masks)
    if len(detectors) != len(masks):
        raise ValueError(f"{len(detectors)} detectors and {len(masks)} masks: one mask per "
                         f"detector")
    for k, d in enumerate(detectors):
        if not isinstance(d, MotionDetector):
            raise TypeError(f"detectors[{k}] must be a fastmog.MotionDetector, not "
                            f"{type(d).__name__}")
    if len({id(d) for d in detectors}) != len(detectors):
        raise ValueError("a detector appears twice: each camera has its own")
    masks = [m if isinstance(m, (np.ndarray, _fastmog.GpuMat)) else
             _fastmog.asgpumat(m, stream=stream) for m in masks]
    results = [None] * len(detectors)
    stacked = _stackable(detectors, masks)
    if len(stacked) > 1:
        for k, r in zip(stacked, _update_stacked([detectors[k] for k in stacked],
                                                 [masks[k] for k in stacked], stream, timer)):
            results[k] = r
    for k, d in enumerate(detectors):
        if results[k] is None:
            results[k] = d.update(masks[k], stream=stream, timer=timer)
    return results


# the GPU labels at most this many rows at once (a row's y is 16 bits)
_MAX_STACK_ROWS = 65535


def _stackable(detectors, masks):
    """The cameras that can go in one stack: the largest group of GpuMat
    masks of one shape (an even height) whose detectors have no zones and
    the same options, as many as fit one labelling."""
    groups = {}
    for k, (d, m) in enumerate(zip(detectors, masks)):
        if (d._zone_specs is None and isinstance(m, _fastmog.GpuMat) and m.dtype == "uint8"
                and len(m.shape) == 2 and m.shape[0] % 2 == 0
                and (d._zones is None or tuple(m.shape) == d.shape)):
            key = (tuple(m.shape), _morphology_key(d.morphology), d.connectivity, d.min_area,
                   d.foreground)
            groups.setdefault(key, []).append(k)
    if not groups:
        return []
    key, members = max(groups.items(), key=lambda item: len(item[1]))
    (h, w) = key[0]
    # the stack's rows: 16-bit y, and (W + 1) * (rows + 1) slots under 2^30
    most = min(_MAX_STACK_ROWS // h, ((((1 << 30) - 1) // (w + 1)) - 1) // h)
    return members[:most] if w <= _MAX_STACK_ROWS else []


def _morphology_key(morphology):
    """A detector's morphology option as a dictionary key: an element given
    as an array is keyed by its shape and bytes."""
    if morphology is None:
        return None
    op, kernel, shape = morphology
    if isinstance(kernel, np.ndarray):
        kernel = ("array", kernel.shape, kernel.dtype.str, kernel.tobytes())
    elif isinstance(kernel, list):
        kernel = tuple(kernel)
    return (op, kernel, shape)


def _update_stacked(detectors, masks, stream, timer):
    first = detectors[0]
    h, w = masks[0].shape
    n = len(masks)
    stack = getattr(first, "_stack", None)
    if stack is None or stack.shape != (n * h, w) or stack.device != masks[0].device:
        stack = first._stack = _fastmog.GpuMat((n * h, w), np.uint8, device=masks[0].device)
    for d in detectors:
        if d._zones is None:
            d._stream = stream
            try:
                d._build((h, w))
            finally:
                d._stream = None
    # the group shares its options: one launch per pass cleans every mask
    op, kernel, shape = first._cleaning()
    morphology_stack(masks, op, kernel, shape=shape, stream=stream, foreground=first.foreground,
                     out=stack, timer=timer)
    rows = sum(d._last_counts[0] for d in detectors) + ROWS_SPARE * n
    measured = regions_of_stack(stack, n, stream=stream, connectivity=first.connectivity,
                                min_area=first.min_area, timer=timer, rows=rows)
    size = h * w
    results = []
    for d, (regions, pixels) in zip(detectors, measured):
        d._last_counts[0] = regions.count
        results.append(d._score(pixels / size, [(pixels / size, regions)]))
    return results
