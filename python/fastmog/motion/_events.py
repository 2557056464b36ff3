"""Motion events over time, per zone, as DVR-Scan segments them: an event
starts once `min_event_frames` frames in a row are over the threshold (it
starts at the first of them) and ends after `gap_frames` frames in a row
below it (it ends at its last frame over). Pure Python over scores, shared
by every face of the motion detector."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Event:
    """One event of one zone: frames start_frame..end_frame (the first and the
    last over the threshold), their times in seconds when the frame rate is
    known (else None), the highest score and its frame, and the union of the
    regions' boxes over the event's frames as (x, y, width, height), or None
    when no region was found (a score from pixels below min_area)."""

    zone: int
    start_frame: int
    end_frame: int
    start_time: float | None
    end_time: float | None
    peak_score: float
    peak_frame: int
    box: tuple | None

    @property
    def frames(self) -> int:
        return self.end_frame - self.start_frame + 1


def union_box(a, b):
    """The smallest (x, y, width, height) holding both (None: nothing)."""
    if a is None:
        return b
    if b is None:
        return a
    x0, y0 = min(a[0], b[0]), min(a[1], b[1])
    x1, y1 = max(a[0] + a[2], b[0] + b[2]), max(a[1] + a[3], b[1] + b[3])
    return (x0, y0, x1 - x0, y1 - y0)


class Segmenter:
    """The event state of one zone. step() takes a frame's index, whether it
    is over the threshold, its score and box, and returns the event that
    ended with it, if any; finish() ends what is open at the end of input."""

    def __init__(self, zone, min_event_frames, gap_frames, fps):
        self.zone, self.min_frames, self.gap, self.fps = zone, min_event_frames, gap_frames, fps
        self._run = []          # (index, score, box) of the frames over, since the last event
        self._open = False
        self._below = 0

    def _event(self):
        start, end = self._run[0][0], self._run[-1][0]
        peak_index, peak_score = max(((i, s) for i, s, _ in self._run), key=lambda p: p[1])
        box = None
        for _, _, b in self._run:
            box = union_box(box, b)
        t = (lambda i: i / self.fps) if self.fps else (lambda i: None)
        return Event(self.zone, start, end, t(start), t(end), peak_score, peak_index, box)

    def step(self, index, over, score, box):
        if over:
            if not self._open and self._below > 0:
                self._run = []      # a run too short to open an event is forgotten
            self._run.append((index, score, box))
            self._below = 0
            if not self._open and len(self._run) >= self.min_frames:
                self._open = True
            return None
        self._below += 1
        if self._open and self._below >= self.gap:
            return self._close()
        return None

    def _close(self):
        event = self._event()
        self._run, self._open, self._below = [], False, 0
        return event

    def finish(self):
        if self._open:
            return self._close()
        self._run, self._below = [], 0
        return None
