"""The main job's checkpoints: the model's snapshot with the count of the
input's frames it has seen ("source_frames"), written every N frames and
when the input ends, each whole (fastmog.save_snapshot); and a run resumed
from one, which skips those frames and numbers its masks on from there.

A checkpoint is taken only where the model has seen exactly the frames
whose masks were handed out: after each mask on the host and for NVDEC
frames (one by one), and at the end of a segment of N frames for the
overlapped pipeline, which runs ahead and is therefore run segment by
segment when checkpoints are asked for. A run that is interrupted writes no
new checkpoint: the last one stands.
"""
from __future__ import annotations

import errno
import os

from .. import _fastmog, cpu
from .._snapshot import load_snapshot, save_snapshot
from . import _motion
from ._errors import UserError, shown
from ._writers import LOSSLESS_VIDEO

KEY = "source_frames"


class Resumed:
    """A checkpoint read to resume from: the snapshot and the frames it saw.
    given: the MOG2 options the command line gave (refused: the checkpoint
    brings its parameters)."""

    def __init__(self, path, given=()):
        if given:
            raise UserError(f"{given[0]} cannot be given with --resume: a resumed model keeps "
                            f"the parameters of its checkpoint")
        try:
            self.snapshot = load_snapshot(path)
        except OSError as e:
            raise UserError(f"cannot read the checkpoint {shown(path)}: "
                            f"{e.strerror or e}") from None
        except ValueError as e:
            raise UserError(str(e)) from None
        frames = self.snapshot.pop(KEY, None)
        if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
            raise UserError(f"{shown(path)} is a model snapshot but not a checkpoint of the "
                            f"main job (it has no frame count); restore it with "
                            f"BackgroundSubtractorMOG2.restore")
        self.path, self.frames = path, frames
        # what the checks before the run read; restore() checks the rest, once
        g = self.snapshot.get("geometry")
        if not isinstance(g, dict) or not all(
                isinstance(g.get(k), int) for k in ("width", "height", "channels",
                                                    "n_mixtures", "is_float")):
            raise UserError(f"the checkpoint {shown(path)} is damaged: its geometry is not "
                            f"whole")

    def subtractor(self, on_gpu, stream):
        """The subtractor the checkpoint holds (restore() checks it whole)."""
        try:
            if on_gpu:
                return _fastmog.BackgroundSubtractorMOG2.restore(self.snapshot, stream=stream)
            return cpu.BackgroundSubtractorMOG2.restore(self.snapshot)
        except (TypeError, ValueError) as e:
            raise UserError(f"the checkpoint {shown(self.path)}: {e}") from None

    def check_source(self, shape, expected):
        """The input must give the frames the model was built for, and more of
        them than the checkpoint has seen."""
        g = self.snapshot["geometry"]
        channels = 1 if len(shape) == 2 else shape[2]
        if (g["height"], g["width"], g["channels"], g["is_float"]) != \
                (shape[0], shape[1], channels, False):
            raise UserError(f"the checkpoint {shown(self.path)} holds a model of "
                            f"{_frames_text(g['width'], g['height'], g['channels'])}; this "
                            f"input gives {_frames_text(shape[1], shape[0], channels)}")
        if expected is not None and self.frames >= expected:
            raise UserError(f"the checkpoint {shown(self.path)} has seen {self.frames} frames; "
                            f"this input has {expected}: nothing is left to process")


def _frames_text(width, height, channels):
    kind = {1: "grey", 3: "BGR", 4: "BGRA"}.get(channels, f"{channels}-channel")
    return f"{width}x{height} {kind} frames"


class Checkpoints:
    """Writes the checkpoints of one run to `path`: after every `every`
    frames processed (None: never) and at the end. `first`: the input's
    frames seen before this run (a resumed run's)."""

    def __init__(self, path, every, first):
        self.path, self.every, self.first = path, every, first
        self.sub = self.stream = None
        self.written = None          # the input's frames of the last checkpoint written

    def bind(self, sub, stream):
        self.sub, self.stream = sub, stream

    def after(self, processed):
        """Frame `processed` of this run (from 1) has its mask."""
        if self.every is not None and processed % self.every == 0:
            self.write(processed)

    def write(self, processed):
        snap = (self.sub.snapshot(stream=self.stream) if self.stream is not None
                else self.sub.snapshot())
        total = self.first + processed
        snap[KEY] = total
        try:
            save_snapshot(self.path, snap)
        except OSError as e:
            raise UserError(f"cannot write the checkpoint {shown(self.path)}: "
                            f"{e.strerror or e}" + (" (ENOSPC)" if e.errno == errno.ENOSPC else "")) \
                from None
        self.written = total


def check_options(args):
    """The checkpoint options that do not fit together, before the run."""
    if args.checkpoint_every is not None and args.checkpoint is None:
        raise UserError("--checkpoint-every says how often to write --checkpoint; no "
                        "--checkpoint is given")
    if args.resume is not None and _motion.wanted(args):
        raise UserError("the motion options cannot be used with --resume: the checkpoint "
                        "keeps the model, not the motion step's events, so they would not "
                        "be those of the uninterrupted run")
    if args.resume is not None and args.out is not None and os.path.splitext(
            os.fsdecode(args.out))[1].lower() in LOSSLESS_VIDEO:
        raise UserError("--resume cannot continue a mask video; give --out a folder, whose "
                        "masks are numbered on from the checkpoint's frame")
