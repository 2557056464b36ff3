"""python -m fastmog: background subtraction of a video, a directory of
frames or the built-in scene, with a truthful report.

Runs on the GPU through the overlapped pipeline when one is usable, else on
the host reference (with a one-line notice). Errors a user will make end with
one clear line on stderr and a non-zero exit; Ctrl-C stops cleanly, keeping
what was written.
"""
import argparse
import os
import pathlib
import sys
import time

import numpy as np

from . import _fastmog

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp"}
VIDEO_SUFFIXES = {".avi": "MJPG", ".mp4": "mp4v", ".mkv": "MJPG", ".mov": "mp4v"}


class UserError(Exception):
    """A mistake of the user's: reported as one line, exit status 2."""


def _cv2(why):
    try:
        import cv2
    except ImportError:
        raise UserError(f"{why} needs OpenCV, which is not installed: "
                        f"pip install opencv-python-headless") from None
    return cv2


def _size(text):
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 3840x2160, got {text!r}")
    if w < 16 or h < 16:
        raise argparse.ArgumentTypeError(f"size must be at least 16x16, got {text!r}")
    return w, h


def _positive(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    """Reports a bad option as one line, not a usage block."""

    def error(self, message):
        self.exit(2, f"fastmog: error: {message} (see fastmog --help)\n")


def build_parser():
    p = _Parser(
        prog="fastmog",
        description="MOG2 background subtraction on the GPU (OpenCV's CPU results, bit for bit).")
    p.add_argument("input", nargs="?", help="a video file or a directory of frames (JPEG/PNG, "
                   "sorted by name); omitted: the built-in scene")
    p.add_argument("--frames", type=_positive, help="process at most N frames "
                   "(built-in scene: 300 on the GPU, 20 on the host)")
    p.add_argument("--size", type=_size, default=(3840, 2160),
                   help="built-in scene size WIDTHxHEIGHT (default 3840x2160)")
    p.add_argument("--colour", "--color", action="store_true",
                   help="built-in scene in colour (default grey)")
    p.add_argument("--grey", "--gray", action="store_true",
                   help="convert file input to grey before subtraction")
    p.add_argument("--out", type=pathlib.Path,
                   help="write masks: a directory (PNG sequence) or a video file "
                        "(.avi, .mp4, .mkv, .mov)")
    p.add_argument("--preview", type=pathlib.Path,
                   help="write frame | mask | background of the last frame as one PNG")
    p.add_argument("--ground-truth", type=pathlib.Path, metavar="DIR",
                   help="score against CDnet-layout ground truth (precision, recall, F)")
    p.add_argument("--profile", action="store_true", help="print the per-call timer report")
    p.add_argument("--sync", action="store_true",
                   help="timer sync mode: each call waits for its own stream (implies --profile)")
    p.add_argument("--trace", type=pathlib.Path, help="write a Chrome/Perfetto trace (JSON)")
    p.add_argument("--device", type=int, default=None, help="CUDA device (default: current)")
    p.add_argument("--cpu", action="store_true", help="use the host reference even with a GPU")
    m = p.add_argument_group("MOG2 parameters (OpenCV's defaults)")
    m.add_argument("--history", type=_positive, default=500)
    m.add_argument("--var-threshold", type=float, default=16.0)
    m.add_argument("--no-shadows", dest="detect_shadows", action="store_false")
    m.add_argument("--n-mixtures", type=int, default=5)
    m.add_argument("--background-ratio", type=float, default=0.9)
    m.add_argument("--var-threshold-gen", type=float, default=9.0)
    m.add_argument("--var-init", type=float, default=15.0)
    m.add_argument("--var-min", type=float, default=4.0)
    m.add_argument("--var-max", type=float, default=75.0)
    m.add_argument("--complexity-reduction-threshold", type=float, default=0.05)
    m.add_argument("--shadow-value", type=int, default=127)
    m.add_argument("--shadow-threshold", type=float, default=0.5)
    m.add_argument("--learning-rate", type=float, default=-1.0,
                   help="negative: automatic (default)")
    return p


def mog2_kwargs(args):
    return dict(history=args.history, var_threshold=args.var_threshold,
                detect_shadows=args.detect_shadows, n_mixtures=args.n_mixtures,
                background_ratio=args.background_ratio, var_threshold_gen=args.var_threshold_gen,
                var_init=args.var_init, var_min=args.var_min, var_max=args.var_max,
                complexity_reduction_threshold=args.complexity_reduction_threshold,
                shadow_value=args.shadow_value, shadow_threshold=args.shadow_threshold)


# ---- input ------------------------------------------------------------------


class Source:
    """Frames with their CDnet numbers (None where there is none)."""

    def __init__(self, frames, count, description, numbers=None):
        self.frames, self.count, self.description = frames, count, description
        self.numbers = numbers


def open_source(args, on_gpu):
    limit = args.frames
    if args.input is None:
        from .scene import BuiltinScene

        n = limit or (300 if on_gpu else 20)
        w, h = args.size
        scene = BuiltinScene(w, h, colour=args.colour)
        kind = "colour" if args.colour else "grey"
        return Source(scene.frames(n), n, f"built-in scene, {w}x{h} {kind}, {n} frames")
    path = pathlib.Path(args.input)
    if not path.exists():
        raise UserError(f"no such file or directory: {path}")
    if path.is_dir():
        files = sorted(f for f in path.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES)
        if not files:
            raise UserError(f"{path} holds no frames (JPEG, PNG, BMP, TIFF or WebP files)")
        files = files[:limit] if limit else files
        cv2 = _cv2("reading image files")

        def read():
            for f in files:
                frame = cv2.imread(str(f), cv2.IMREAD_COLOR)
                if frame is None:
                    raise UserError(f"cannot read image {f}")
                yield cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY) if args.grey else frame

        from .scoring import frame_number_of

        return Source(read(), len(files), f"{path} ({len(files)} frames)",
                      [frame_number_of(f) for f in files])
    cv2 = _cv2("reading video files")
    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        raise UserError(f"cannot read video {path}: not a video OpenCV can decode")
    ok, first = cap.read()
    if not ok:
        cap.release()
        raise UserError(f"cannot read video {path}: no frame could be decoded")
    total = int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) or 0
    count = min(total, limit) if limit and total else (limit or total)

    def read():
        try:
            frame, n = first, 0
            while frame is not None and (limit is None or n < limit):
                yield cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY) if args.grey else frame
                n += 1
                ok, frame = cap.read()
                if not ok:
                    frame = None
        finally:
            cap.release()

    return Source(read(), count, f"{path} ({total or '?'} frames)")


def check_frames(frames):
    """Passes frames on, refusing a change of size or type mid-stream."""
    first = None
    for i, frame in enumerate(frames):
        if first is None:
            first = (frame.shape, frame.dtype)
        elif (frame.shape, frame.dtype) != first:
            raise UserError(f"frame {i} is {frame.shape[1]}x{frame.shape[0]} but the first was "
                            f"{first[0][1]}x{first[0][0]}: all frames must have one size")
        yield frame


# ---- output -------------------------------------------------------------------


class MaskWriter:
    def __init__(self, out):
        self.out, self.video, self.count, self.cv2 = out, None, 0, None
        if out is None:
            return
        self.cv2 = _cv2("writing masks")
        if out.suffix.lower() in VIDEO_SUFFIXES:
            parent = out.parent if str(out.parent) else pathlib.Path(".")
            if not parent.is_dir() or not os.access(parent, os.W_OK):
                raise UserError(f"cannot write {out}: {parent} is not a writable directory")
        else:
            try:
                out.mkdir(parents=True, exist_ok=True)
                probe = out / ".fastmog-write-test"
                probe.write_bytes(b"")
                probe.unlink()
            except OSError as e:
                raise UserError(f"cannot write masks to {out}: {e.strerror or e}") from None

    def write(self, mask):
        if self.out is None:
            return
        if self.out.suffix.lower() in VIDEO_SUFFIXES:
            if self.video is None:
                fourcc = self.cv2.VideoWriter_fourcc(*VIDEO_SUFFIXES[self.out.suffix.lower()])
                self.video = self.cv2.VideoWriter(str(self.out), fourcc, 25.0,
                                                  (mask.shape[1], mask.shape[0]), False)
                if not self.video.isOpened():
                    raise UserError(f"cannot write video {self.out}")
            self.video.write(mask)
        else:
            path = self.out / f"mask_{self.count:06d}.png"
            if not self.cv2.imwrite(str(path), mask):
                raise UserError(f"cannot write {path}")
        self.count += 1

    def close(self):
        if self.video is not None:
            self.video.release()
            self.video = None


def write_preview(path, frame, mask, background):
    cv2 = _cv2("writing the preview")

    def bgr(img):
        return cv2.cvtColor(img, cv2.COLOR_GRAY2BGR) if img.ndim == 2 else img[..., :3]

    strip = np.concatenate([bgr(frame), bgr(mask), bgr(background)], axis=1)
    if not cv2.imwrite(str(path), strip):
        raise UserError(f"cannot write the preview {path}")


class Progress:
    """A progress line on stderr, only when stderr is a terminal."""

    def __init__(self, total):
        self.total = total
        self.enabled = sys.stderr.isatty()
        self.last = 0.0

    def update(self, done, started):
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self.last < 0.2 and done != self.total:
            return
        self.last = now
        rate = done / max(now - started, 1e-9)
        bar = ""
        if self.total:
            filled = int(30 * done / self.total)
            bar = "[" + "#" * filled + "." * (30 - filled) + f"] {done}/{self.total} "
        sys.stderr.write(f"\r{bar}{rate:.1f} fps")
        sys.stderr.flush()

    def close(self):
        if self.enabled:
            sys.stderr.write("\n")


# ---- the job ------------------------------------------------------------------------


def run(args):
    import fastmog

    gpu_reason = None
    if args.cpu:
        gpu_reason = "--cpu was given"
    elif not fastmog.cuda_available():
        status, text = _fastmog._cuda_status()
        gpu_reason = f"no usable GPU ({status})"
    on_gpu = gpu_reason is None
    if args.device is not None and on_gpu and not 0 <= args.device < fastmog.device_count():
        raise UserError(f"--device {args.device} does not exist: this machine has "
                        f"{fastmog.device_count()} CUDA device(s)")
    try:
        kwargs = mog2_kwargs(args)
        sub = (fastmog.BackgroundSubtractorMOG2(**kwargs, device=args.device) if on_gpu
               else fastmog.cpu.BackgroundSubtractorMOG2(**kwargs))
    except (ValueError, TypeError) as e:
        raise UserError(str(e)) from None
    writer = MaskWriter(args.out)
    truth = None
    if args.ground_truth is not None:
        from .scoring import GroundTruth

        cv2 = _cv2("reading ground truth")
        try:
            truth = GroundTruth(args.ground_truth,
                                lambda p: cv2.imread(str(p), cv2.IMREAD_GRAYSCALE))
        except FileNotFoundError as e:
            raise UserError(str(e)) from None
    source = open_source(args, on_gpu)
    where = (f"GPU {fastmog.device_properties(sub.device)['name']}" if on_gpu
             else "the host reference")
    if not on_gpu:
        print(f"fastmog: {gpu_reason}: running the host reference (slower)", file=sys.stderr)
    print(f"fastmog: {source.description} on {where}")

    profiling = args.profile or args.sync or args.trace is not None
    timer = fastmog.Timer(sync=args.sync) if profiling else None
    progress = Progress(source.count)
    frames = check_frames(source.frames)
    last = {}
    done, pixels, interrupted = 0, 0, False
    streams = [fastmog.Stream(device=args.device) for _ in range(3)] if on_gpu else []

    def keep_last(frame):
        last["frame"] = frame
        return frame

    started = time.perf_counter()
    try:
        if on_gpu:
            masks = fastmog.pipeline(sub, (keep_last(f) for f in frames), streams=streams,
                                     learning_rate=args.learning_rate, timer=timer)
        else:
            masks = (sub.apply(keep_last(f), args.learning_rate, timer=timer) for f in frames)
        for mask in masks:
            writer.write(mask)
            if truth is not None:
                number = source.numbers[done] if source.numbers else done
                truth.add(number if number is not None else done, mask)
            done += 1
            pixels += mask.size
            progress.update(done, started)
            last["mask"] = mask
    except KeyboardInterrupt:
        interrupted = True
    finally:
        elapsed = time.perf_counter() - started
        progress.close()
        writer.close()
    if done == 0 and not interrupted:
        raise UserError("no frame was processed")

    if args.preview is not None and "mask" in last:
        if on_gpu:
            with streams[0] as s:
                background = sub.get_background_image(stream=s).download(stream=s)
        else:
            background = sub.get_background_image()
        mask = np.array(last["mask"])
        write_preview(args.preview, last["frame"], mask, background)
    for s in streams:
        s.close()

    status = "interrupted after" if interrupted else "processed"
    print(f"fastmog: {status} {done} frames in {elapsed:.3f} s: {done / elapsed:.1f} frames/s, "
          f"{pixels / elapsed / 1e6:.1f} megapixels/s"
          + (" (including writing the masks)" if args.out is not None else ""))
    if writer.count:
        print(f"fastmog: wrote {writer.count} masks to {args.out}")
    if args.preview is not None and "mask" in last:
        print(f"fastmog: wrote the preview {args.preview}")
    if truth is not None:
        s = truth.score
        print(f"fastmog: ground truth {args.ground_truth}: precision {s.precision:.4f} "
              f"recall {s.recall:.4f} F-measure {s.f_measure:.4f} over {s.frames} frames")
    if timer is not None:
        if args.profile or args.sync:
            print(timer.report())
        if args.trace is not None:
            timer.to_chrome_trace(args.trace)
            print(f"fastmog: wrote the trace {args.trace}")
    return 130 if interrupted else 0


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except UserError as e:
        print(f"fastmog: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fastmog: interrupted", file=sys.stderr)
        return 130
