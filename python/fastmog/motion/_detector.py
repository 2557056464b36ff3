"""The motion detector's logic, shared by its faces: options checked before
any work, zones built at the first mask, each frame scored per zone from
the cleaned mask and its regions, events segmented per zone. A face
supplies the image steps: _measure(mask) gives the cleaned mask's
foreground fraction and each zone's (score, regions); the host face
(fastmog.cpu.MotionDetector) measures with numpy and its _clean and
_regions, the GPU face (fastmog.MotionDetector) with the GPU's morphology
and regions."""
from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from . import _element, _regions, _zones
from ._events import Event, Segmenter, union_box
from ._regions import Regions


@dataclasses.dataclass(frozen=True)
class ZoneMotion:
    """One zone in one frame: score, the fraction of the zone's pixels that
    are foreground after morphology; the regions of those pixels (cut at the
    zone's edge); motion, whether the score counts (at least the threshold,
    and the frame no light switch)."""

    score: float
    regions: Regions
    motion: bool


@dataclasses.dataclass(frozen=True)
class FrameMotion:
    """One frame: its index (from 0), the foreground fraction of the whole
    cleaned mask, whether that makes it a light switch (a global change:
    lighting, camera shake; no zone counts it as motion), each zone's
    motion, and the events that ended with this frame."""

    index: int
    fraction: float
    light_switch: bool
    zones: tuple
    ended: tuple

    @property
    def motion(self) -> bool:
        return any(z.motion for z in self.zones)


def _fraction(value, what, lo_open=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number, not {type(value).__name__}")
    v = float(value)
    if not (0.0 < v <= 1.0 if lo_open else 0.0 <= v <= 1.0):
        raise ValueError(f"{what} must be {'above 0' if lo_open else 'from 0'} to 1, got {value!r}")
    return v


def _morphology_option(spec):
    """None, or (op, kernel[, shape]) checked as morphology checks them."""
    if spec is None:
        return None
    if not isinstance(spec, (tuple, list)) or len(spec) not in (2, 3):
        raise ValueError(f"morphology must be None or (op, kernel[, shape]), got {spec!r}")
    op, kernel = spec[0], spec[1]
    shape = spec[2] if len(spec) == 3 else "rect"
    _element.op_code(op)
    _element.structuring_element(kernel, shape)
    return (op, kernel, shape)


class Detector:
    """MotionDetector(*, zones=None, morphology=("open", 3), min_area=0,
    threshold=0.005, min_event_frames=2, gap_frames=10, light_switch=0.6,
    fps=None, connectivity=8, foreground=255).

    zones: None (the whole frame), or a list of zones, each a polygon,
    several polygons or a mask (fastmog.motion.zone_mask). morphology: None,
    or (op, kernel[, shape]) as fastmog.cpu.morphology takes them, applied to
    the pixels equal to `foreground` (255: shadows, 127, are not motion).
    Regions under min_area pixels are dropped. threshold: the zone score (a
    fraction of its pixels) from which a frame counts; light_switch: the
    fraction of the whole frame above which a frame is a global change, not
    motion. fps: frame rate, for the events' times."""

    def __init__(self, *, zones=None, morphology=("open", 3), min_area=0, threshold=0.005,
                 min_event_frames=2, gap_frames=10, light_switch=0.6, fps=None, connectivity=8,
                 foreground=255):
        self.connectivity, self.min_area, self.foreground = _regions.check_options(
            connectivity, min_area, foreground)
        self.morphology = _morphology_option(morphology)
        self.threshold = _fraction(threshold, "threshold")
        self.light_switch = _fraction(light_switch, "light_switch", lo_open=True)
        self.min_event_frames = _element.whole_number(min_event_frames, "min_event_frames",
                                                      1, 1 << 30)
        self.gap_frames = _element.whole_number(gap_frames, "gap_frames", 1, 1 << 30)
        if fps is not None and (isinstance(fps, bool) or not isinstance(fps, numbers.Real)
                                or not 0 < float(fps) < float("inf")):
            raise ValueError(f"fps must be None or a positive number, got {fps!r}")
        self.fps = None if fps is None else float(fps)
        if zones is not None and (isinstance(zones, (str, bytes, np.ndarray))
                                  or not isinstance(zones, (list, tuple)) or not zones):
            raise TypeError("zones must be None or a non-empty list of zones (each a polygon, "
                            "several polygons or a mask)")
        for k, spec in enumerate(zones or ()):
            try:
                _zones.polygons(spec)       # malformed polygons: refused now, not at frame 1
            except (TypeError, ValueError) as e:
                raise type(e)(f"zones[{k}]: {e}") from None
        self._zone_specs = zones
        self._zones = None          # the masks, built at the first frame
        self._sizes = None
        self._segmenters = None
        self.index = 0
        self.events: list[Event] = []

    def _build(self, shape):
        specs = self._zone_specs
        if specs is None:
            self._zones = [np.full(shape, 255, np.uint8)]
        else:
            self._zones = []
            for k, spec in enumerate(specs):
                try:
                    self._zones.append(_zones.zone_mask(spec, shape))
                except (TypeError, ValueError) as e:
                    raise type(e)(f"zones[{k}]: {e}") from None
        self._sizes = [int(np.count_nonzero(z)) for z in self._zones]
        self._segmenters = [Segmenter(k, self.min_event_frames, self.gap_frames, self.fps)
                            for k in range(len(self._zones))]
        self.shape = shape

    def _check(self, mask):
        if not isinstance(mask, np.ndarray) or mask.dtype != np.uint8 or mask.ndim != 2:
            what = f"{mask.dtype} {mask.shape}" if isinstance(mask, np.ndarray) else \
                type(mask).__name__
            raise TypeError(f"mask must be a 2-D uint8 array, not {what}")
        if self._zones is not None and mask.shape != self.shape:
            raise ValueError(f"mask is {mask.shape[1]}x{mask.shape[0]}, the detector's frames "
                             f"are {self.shape[1]}x{self.shape[0]}")

    def update(self, mask) -> FrameMotion:
        """One frame's motion (see FrameMotion); events that end are also
        appended to self.events."""
        self._check(mask)
        if self._zones is None:
            self._build(tuple(mask.shape[:2]))
        return self._score(*self._measure(mask))

    def _score(self, fraction, measured) -> FrameMotion:
        """The frame's motion from what was measured: the whole cleaned
        mask's foreground fraction and each zone's (score, regions)."""
        light = fraction > self.light_switch
        zones, ended = [], []
        for (score, regions), seg in zip(measured, self._segmenters):
            motion = score >= self.threshold and not light
            box = None
            for x, y, w, h in regions.boxes.tolist():
                box = union_box(box, (x, y, w, h))
            zones.append(ZoneMotion(score, regions, motion))
            event = seg.step(self.index, motion, score, box)
            if event is not None:
                ended.append(event)
        self.events.extend(ended)
        result = FrameMotion(self.index, fraction, light, tuple(zones), tuple(ended))
        self.index += 1
        return result

    def finish(self) -> list[Event]:
        """Ends the events still open (the input ended); returns them."""
        ended = [e for e in (s.finish() for s in self._segmenters or ()) if e is not None]
        self.events.extend(ended)
        return ended

    def _measure(self, mask):
        """(fraction, [(score, regions) per zone]) from numpy: the mask made
        binary, cleaned (_clean), counted, cut by each zone (_regions)."""
        # uint8 scalars: the binary mask is made once, with no int64 copy
        clean = self._clean(np.where(mask == self.foreground, np.uint8(255), np.uint8(0)))
        fraction = float(np.count_nonzero(clean) / clean.size)
        measured = []
        for zone, size in zip(self._zones, self._sizes):
            inside = clean & zone
            measured.append((float(np.count_nonzero(inside) / size), self._regions(inside)))
        return fraction, measured

    def _clean(self, mask):
        raise NotImplementedError

    def _regions(self, mask):
        raise NotImplementedError
