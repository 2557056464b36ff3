"""fastmog.MotionDetector: the motion detector's GPU face. The mask stays on
the GPU: morphology (made binary in its first pass) and each zone's regions
and foreground count run there, and only the regions' rows come back."""
from __future__ import annotations

import numpy as np

from . import _fastmog
from ._components import foreground_pixels, regions_and_pixels
from ._morphology import morphology
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

    def _measure(self, mask):
        s, t = self._stream, self._timer
        if self.morphology is None:
            # a 1x1 dilation is the identity: the pass only makes the mask binary
            clean = morphology(mask, "dilate", 1, stream=s, foreground=self.foreground, timer=t)
        else:
            op, kernel, shape = self.morphology
            clean = morphology(mask, op, kernel, shape=shape, stream=s,
                               foreground=self.foreground, timer=t)
        options = dict(stream=s, connectivity=self.connectivity, min_area=self.min_area,
                       timer=t)
        size = self.shape[0] * self.shape[1]
        measured = []
        if self._zone_specs is None:
            whole, pixels = regions_and_pixels(clean, rows=self._rows(0), **options)
            self._last_counts[0] = whole.count
            return pixels / size, [(pixels / size, whole)]
        # with zones the whole frame gives only its foreground fraction (the
        # light switch): counted, not labelled
        fraction = foreground_pixels(clean, stream=s, timer=t) / size
        for k, (zone, zone_size) in enumerate(zip(self._device_zones, self._sizes)):
            regions, inside = regions_and_pixels(clean, zone=zone, rows=self._rows(k), **options)
            self._last_counts[k] = regions.count
            measured.append((inside / zone_size, regions))
        return fraction, measured

    def _rows(self, k):
        """Zone k's first read: the regions it held last frame and a few more."""
        return self._last_counts[k] + ROWS_SPARE


# rows read beyond a zone's last count: two regions more than last frame
# still come in the first copy (24 bytes a row; with two zones and 32
# regions the frame sends 936 bytes)
ROWS_SPARE = 2
