"""The main job's motion step: the zones file, the detector the options
build, its outputs (--regions: one JSON line per frame, --events: one per
event) and the summary's event lines.

On a GPU run the detector is fastmog.MotionDetector on the frame loop's
device masks, so a mask leaves the GPU only when something else reads it
(--out, --ground-truth, --preview); on the host reference it is
fastmog.cpu.MotionDetector. Both give the same results.
"""
from __future__ import annotations

import dataclasses
import errno
import inspect
import json
import os

from .. import _motion_detector, cpu
from ..motion import _element
from ._errors import UserError, shown

# the detector's own defaults, for the help text: they live in one place
DEFAULTS = {name: p.default for name, p in
            inspect.signature(cpu.MotionDetector.__init__).parameters.items()
            if p.default is not inspect.Parameter.empty}
EVENTS_SHOWN = 20           # the summary's event lines; all of them go to --events


def wanted(args) -> bool:
    """Whether any motion option is given: then the motion step runs."""
    return any(getattr(args, name) is not None for name in
               ("zones", "events", "regions", "morphology", "min_area", "threshold"))


def parse_morphology(text):
    """--morphology OP:SIZE[:SHAPE] (SIZE k or WxH; SHAPE rect, ellipse or
    cross), or "none": (op, kernel, shape) or False, checked as
    fastmog.cpu.morphology checks them. ValueError with the reason."""
    if text.strip().lower() == "none":
        return False
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"expected OP:SIZE[:SHAPE] such as open:3 or close:5x3:ellipse, or "
                         f"none, got {text!r}")
    op, size = parts[0].strip().lower(), parts[1].strip().lower()
    shape = parts[2].strip().lower() if len(parts) == 3 else "rect"
    try:
        if "x" in size:
            w, h = (int(v) for v in size.split("x"))
            kernel = (w, h)
        else:
            kernel = int(size)
    except ValueError:
        raise ValueError(f"the kernel size is k or WxH, got {parts[1]!r}") from None
    try:
        _element.op_code(op)
        _element.structuring_element(kernel, shape)
    except (TypeError, ValueError) as e:
        raise ValueError(str(e)) from None
    return (op, kernel, shape)


def read_zones(path):
    """The zones of a --zones file: [(name, polygons)], every polygon checked
    as fastmog.motion.zone_mask checks it. The file holds a JSON list; each
    entry is a polygon ([[x, y], ...], at least 3 points), or an object with
    "polygon" (one) or "polygons" (several, filled together) and an optional
    "name". A UserError names the file and the entry."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise UserError(f"cannot read the zones file {shown(path)}: "
                        f"{e.strerror or e}") from None
    except ValueError as e:           # not JSON, not UTF-8, a number too long to read
        raise UserError(f"the zones file {shown(path)} is not JSON: {e}") from None
    if isinstance(data, dict) and set(data) == {"zones"}:
        data = data["zones"]
    if not isinstance(data, list) or not data:
        raise UserError(f"the zones file {shown(path)} must hold a non-empty list of zones "
                        f"(each a polygon [[x, y], ...] or an object with \"polygon\" or "
                        f"\"polygons\")")
    zones = []
    for k, entry in enumerate(data):
        where = f"the zones file {shown(path)}, zone {k}"
        name = None
        if isinstance(entry, dict):
            unknown = set(entry) - {"name", "polygon", "polygons"}
            if unknown or ("polygon" in entry) == ("polygons" in entry):
                raise UserError(f"{where}: an object zone has \"polygon\" or \"polygons\" "
                                f"(one of them) and may have \"name\""
                                + (f"; unknown keys: {', '.join(sorted(unknown))}"
                                   if unknown else ""))
            name = entry.get("name")
            if name is not None and not isinstance(name, str):
                raise UserError(f"{where}: \"name\" must be a string")
            parts = [entry["polygon"]] if "polygon" in entry else entry["polygons"]
        else:
            parts = [entry]
        if not isinstance(parts, list) or not parts:
            raise UserError(f"{where}: \"polygons\" must be a non-empty list of polygons")
        if name is not None:
            where += f" ({name!r})"
        for p in parts:
            if (not isinstance(p, list)
                    or not all(isinstance(q, list) and len(q) == 2 and
                               all(isinstance(v, int) and not isinstance(v, bool) for v in q)
                               for q in p)):
                raise UserError(f"{where}: a polygon is a list of [x, y] integer points, "
                                f"got {json.dumps(p)[:60]}")
            if len(p) < 3:
                raise UserError(f"{where}: a polygon needs at least 3 points, got {len(p)}")
        zones.append((name if name is not None else f"zone {k}", parts))
    names = [n for n, _ in zones]
    if len(set(names)) != len(names):
        raise UserError(f"the zones file {shown(path)} names two zones alike: every name must "
                        f"be its own")
    return zones


def check_zones_fit(zones, shape, path):
    """Every point of every zone inside the frame (height, width): a point
    beyond it is most likely a zone drawn for another resolution."""
    h, w = shape[:2]
    for name, parts in zones:
        for p in parts:
            for x, y in p:
                if not (0 <= x < w and 0 <= y < h):
                    raise UserError(f"the zones file {shown(path)}, {name}: point ({x}, {y}) "
                                    f"lies outside the {w}x{h} frame")


@dataclasses.dataclass(frozen=True)
class MotionOptions:
    """What the motion step of a run is told, on the command line's host or
    on a Dask worker: the zones [(name, zone)] or None (the whole frame), the
    file they came from (its points are checked against the frame: None
    leaves that to the detector) and the detector's keyword arguments given
    (its defaults for the others)."""

    zones: list | None = None
    detector: dict = dataclasses.field(default_factory=dict)
    zones_file: str | None = None

    @classmethod
    def from_args(cls, args, zones):
        """The options the command line gives; zones: read_zones(args.zones)."""
        given = {name: getattr(args, name) for name in ("morphology", "min_area", "threshold")
                 if getattr(args, name) is not None}
        if given.get("morphology") is False:        # "none"
            given["morphology"] = None
        return cls(zones, given, None if args.zones is None else os.fsdecode(args.zones))

    @classmethod
    def from_kwargs(cls, kwargs):
        """fastmog.MotionDetector's keyword arguments as a library caller gives
        them, fps aside (each source has its own); the zones are named "zone
        K". What the detector refuses is refused here (TypeError, ValueError),
        before any source is opened."""
        kwargs = dict(kwargs)
        if "fps" in kwargs:
            raise TypeError("motion takes no fps: each source's events are timed by its own "
                            "frame rate")
        cpu.MotionDetector(**kwargs)
        zones = kwargs.pop("zones", None)
        return cls(None if zones is None else [(f"zone {k}", z) for k, z in enumerate(zones)],
                   kwargs)

    def check(self):
        """Refuses what the detector refuses (TypeError, ValueError), before
        any source is opened."""
        self.detector_for(on_gpu=False, fps=None)

    def detector_for(self, *, on_gpu, fps):
        """A detector with these options: the GPU face or the host's."""
        face = _motion_detector.MotionDetector if on_gpu else cpu.MotionDetector
        return face(zones=None if self.zones is None else [z for _, z in self.zones],
                    fps=fps, **self.detector)


class MotionStep:
    """The detector and its outputs for one run. With on_gpu,
    on_device_mask(index, mask, stream) takes each of the frame loop's device
    masks, else on_mask(index, mask) its host masks; close() ends open events
    and the files. events, regions: the JSON lines files to write, or None."""

    def __init__(self, options, shape, fps, first=0, on_gpu=False, timer=None, *,
                 events=None, regions=None):
        self.zones = options.zones
        if options.zones_file is not None and shape is not None:
            check_zones_fit(self.zones, shape, options.zones_file)
        self.on_gpu, self._timer = on_gpu, timer
        try:
            self.detector = options.detector_for(on_gpu=on_gpu, fps=fps)
        except (TypeError, ValueError) as e:
            raise UserError(str(e)) from None
        self.detector.index = first     # a resumed run's frames are numbered on
        self.names = ["frame"] if self.zones is None else [n for n, _ in self.zones]
        self.fps = fps
        self.last = None            # the last frame's FrameMotion (the preview's boxes)
        self._regions = _open(regions, "the regions file")
        try:
            self._events = _open(events, "the events file")
        except BaseException:
            if self._regions is not None:
                self._regions.close()
            raise

    def on_device_mask(self, index, mask, stream):
        self._took(self.detector.update(mask, stream=stream, timer=self._timer))

    def on_mask(self, index, mask):
        self._took(self.detector.update(mask))

    def _took(self, m):
        self.last = m
        if self._regions is not None:
            _write(self._regions, {
                "frame": m.index,
                "time": None if self.fps is None else round(m.index / self.fps, 6),
                "fraction": round(m.fraction, 6),
                "light_switch": m.light_switch,
                "zones": [{"zone": name, "score": round(z.score, 6), "motion": z.motion,
                           "regions": z.regions.stats.tolist()}
                          for name, z in zip(self.names, m.zones)]})
        for e in m.ended:
            self._event(e)

    def _event(self, e):
        if self._events is not None:
            _write(self._events, {
                "zone": self.names[e.zone], "start_frame": e.start_frame,
                "end_frame": e.end_frame, "start_time": e.start_time, "end_time": e.end_time,
                "frames": e.frames, "peak_score": round(e.peak_score, 6),
                "peak_frame": e.peak_frame, "box": None if e.box is None else list(e.box)})

    def close(self):
        """Ends the events still open (the frames ended, or the run was
        stopped) and closes the files."""
        try:
            for e in self.detector.finish():
                self._event(e)
        finally:
            failed = None
            for f in (self._regions, self._events):
                if f is not None:
                    try:
                        f.close()           # buffered lines are written here
                    except OSError as e:
                        failed = failed or UserError(
                            f"cannot write {shown(f.name)}: {e.strerror or e}"
                            + (" (ENOSPC)" if e.errno == errno.ENOSPC else ""))
            self._regions = self._events = None
            if failed is not None:
                raise failed

    def drawing(self):
        """What the preview draws on its frame: (the zones' polygons, the
        last frame's region boxes)."""
        outlines = [] if self.zones is None else [p for _, parts in self.zones for p in parts]
        boxes = [] if self.last is None else \
            [b for z in self.last.zones for b in z.regions.boxes.tolist()]
        return outlines, boxes

    def summary(self, paths):
        """The summary's lines (summary_lines) of this run."""
        return summary_lines(self.detector.events, self.detector,
                             None if self.zones is None else self.names, self.on_gpu, paths)


def summary_lines(events, detector, names, on_gpu, paths, source=None):
    """The summary's lines: how many events, then each (the first
    EVENTS_SHOWN), then where the files are. detector: one built with the
    run's options (its settings are shown); names: the zones' names, None
    for the whole frame; source: the source's name, for a run of several."""
    who = "" if source is None else f"{source}: "
    events = sorted(events, key=lambda e: (e.start_frame, e.zone))
    zones = "the whole frame" if names is None else \
        f"{len(names)} zone{'s' if len(names) != 1 else ''}"
    names = names or ["frame"]
    d = detector
    how = ("no morphology" if d.morphology is None else
           f"{d.morphology[0]} {_kernel_text(d.morphology[1])} {d.morphology[2]}")
    lines = [f"fastmog: {who}motion: {len(events)} event{'s' if len(events) != 1 else ''} "
             f"in {zones} (threshold {d.threshold:g}, {how}, min area {d.min_area}; "
             f"on {'the GPU' if on_gpu else 'the host'})"]
    for e in events[:EVENTS_SHOWN]:
        times = ("" if e.start_time is None else
                 f" ({e.start_time:.2f}-{e.end_time:.2f} s)")
        box = "no region" if e.box is None else \
            f"box {e.box[0]},{e.box[1]} {e.box[2]}x{e.box[3]}"
        lines.append(f"fastmog: {who}event: {names[e.zone]}, frames {e.start_frame}-"
                     f"{e.end_frame}{times}, peak {e.peak_score:.4f} at frame "
                     f"{e.peak_frame}, {box}")
    if len(events) > EVENTS_SHOWN:
        lines.append(f"fastmog: {who}... and {len(events) - EVENTS_SHOWN} more events"
                     + (f" (all in {shown(paths['events'])})" if paths["events"] else ""))
    for what, path in (("events", paths["events"]), ("regions", paths["regions"])):
        if path is not None:
            lines.append(f"fastmog: {who}wrote the {what} {shown(path)}")
    return lines


def _kernel_text(kernel):
    return f"{kernel[0]}x{kernel[1]}" if isinstance(kernel, tuple) else f"{kernel}x{kernel}"


def _open(path, what):
    if path is None:
        return None
    try:
        return open(path, "w", encoding="utf-8")
    except OSError as e:
        raise UserError(f"cannot write {what} {shown(path)}: {e.strerror or e}") from None


def _write(f, record):
    try:
        f.write(json.dumps(record, separators=(",", ":")) + "\n")
    except OSError as e:
        raise UserError(f"cannot write {shown(f.name)}: {e.strerror or e}"
                        + (" (ENOSPC)" if e.errno == errno.ENOSPC else "")) from None
