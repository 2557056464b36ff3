"""The main job's inputs: a video file, a folder of frames, a CDnet sequence
folder or the built-in scene, each opened as a Source of frames.

Everything that can be checked before the run is checked when the source is
found or opened: the path is a regular file or a folder, the folder holds
frames, the first frame decodes, and the frames fit in memory (the caller's
`check_memory(shape)` runs before anything large is allocated).
"""
import os
import pathlib
import stat
import time

from . import _cvio
from ._errors import UserError, shown
from ._progress import Progress
from .scoring import frame_number_of

FRAME_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp"}
DEFAULT_FPS = 25.0


class Input:
    """What the input argument names, before anything is decoded.
    kind: "scene", "frames" or "video"; files: the frame files, by name;
    cdnet: the sequence folder when a CDnet folder was given."""

    def __init__(self, kind, path=None, files=None, cdnet=None):
        self.kind, self.path, self.files, self.cdnet = kind, path, files, cdnet


def find_input(text):
    """Classifies the input argument; a UserError for anything unusable."""
    if text is None:
        return Input("scene")
    path = pathlib.Path(text)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise UserError(f"no such file or directory: {shown(path)}") from None
    except OSError as e:
        raise UserError(f"cannot open {shown(path)}: {e.strerror or e}") from None
    if stat.S_ISDIR(mode):
        cdnet = None
        if (path / "input").is_dir() and (path / "groundtruth").is_dir():
            cdnet, path = path, path / "input"
        return Input("frames", path, _frame_files(path), cdnet)
    if not stat.S_ISREG(mode):
        # a FIFO or a device would block the decoder with no way out
        raise UserError(f"{shown(path)} is not a regular file (a FIFO, socket or device): "
                        f"give a video file or a folder of frames")
    return Input("video", path)


def _frame_files(folder):
    """Image files of a folder, sorted by name. Only regular files (a FIFO
    named x.png would hang the reader); CDnet's ROI.bmp/ROI.jpg, a region of
    interest and never a frame, is left out."""
    try:
        entries = list(os.scandir(folder))
    except OSError as e:
        raise UserError(f"cannot list {shown(folder)}: {e.strerror or e}") from None
    files = sorted(pathlib.Path(e.path) for e in entries
                   if e.is_file() and pathlib.Path(e.name).suffix.lower() in FRAME_SUFFIXES
                   and pathlib.Path(e.name).stem.lower() != "roi")
    if not files:
        raise UserError(f"{shown(folder)} holds no frames (JPEG, PNG, BMP, TIFF or WebP files)")
    return files


def _wxh(shape):
    return f"{shape[1]}x{shape[0]}" + (f"x{shape[2]}" if len(shape) > 2 else "")


class Source:
    """Frames of one input. frames: an iterator of host frames (numpy) or, from
    NVDEC, of the reader's frame objects (on_device). shape: the first frame's
    shape. expected: frames the container announces (after --frames), or None.
    read: frames delivered so far; decode_error: why decoding stopped early."""

    def __init__(self, description, shape, frames, *, count=None, expected=None,
                 numbers=None, fps=DEFAULT_FPS, on_device=False):
        self.description, self.shape = description, shape
        self.count, self.expected, self.numbers, self.fps = count, expected, numbers, fps
        self.on_device = on_device
        self.render_seconds = None
        self.decoder_line = None
        self.read = 0
        self.reached = None      # frames of the timeline passed, where the decoder says
        self.decode_error = None
        self._frames = frames

    def __iter__(self):
        for frame in self._frames:
            # a model is per size: a change would silently restart it
            if not self.on_device and frame.shape != self.shape:
                raise UserError(f"frame {self.read} is {_wxh(frame.shape)} but the first was "
                                f"{_wxh(self.shape)}: all frames must have one size")
            self.read += 1
            yield frame

    @property
    def short(self):
        """True when fewer frames came than the container announced (or the
        decoder stopped on an error) and the stream did not reach the end of
        its timeline: a file that stores repeated frames as empty chunks
        (tree.avi: 444 announced, 68 decoded, the last at 29.5 s of 29.6) is
        complete, even where the reader calls it truncated."""
        if self.expected is None:
            return self.decode_error is not None
        if self.read >= self.expected:
            return False
        return self.reached is None or self.reached < self.expected


def open_scene(args, on_gpu, check_memory):
    """The built-in scene, rendered now (with a progress line), so rendering
    is timed apart from processing."""
    from .scene import BuiltinScene

    n = args.frames or (300 if on_gpu else 10)
    w, h = args.size or (3840, 2160)
    channels = 3 if args.colour else 1
    check_memory((h, w, channels) if channels > 1 else (h, w), render=min(n, 32))
    progress = Progress("rendering the built-in scene")
    started = time.perf_counter()
    try:
        scene = BuiltinScene(w, h, colour=args.colour, pinned=on_gpu, count=n,
                             progress=progress.update)
    finally:
        progress.close()
    kind = "colour" if args.colour else "grey"
    source = Source(f"built-in scene, {w}x{h} {kind}, {n} frames", scene.shape,
                    scene.frames(n), count=n, fps=args.fps or DEFAULT_FPS)
    source.render_seconds = time.perf_counter() - started
    return source


def open_frames(found, args, check_memory):
    """A folder of frames; the first is decoded now."""
    cv2 = _cvio.cv2("reading image files")
    files = found.files[:args.frames] if args.frames else found.files

    def read(f):
        frame = _cvio.read_image(f, cv2.IMREAD_COLOR)
        return cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY) if args.grey else frame

    first = read(files[0])
    check_memory(first.shape)

    def frames():
        yield first
        for f in files[1:]:
            yield read(f)

    return Source(f"{shown(found.path)} ({len(files)} frames)", first.shape, frames(),
                  count=len(files), numbers=[frame_number_of(f) for f in files],
                  fps=args.fps or DEFAULT_FPS)


def open_video(found, args, *, on_gpu, stream, timer, check_memory):
    """A video file, through fastmog.VideoReader (NVDEC or host decoding, as
    --decode asks), or OpenCV's decoder where the reader cannot take the file
    name or this build has no reader."""
    import fastmog

    reader_type = getattr(fastmog, "VideoReader", None)
    why_not = None
    if reader_type is None:
        why_not = "this build of fastmog has no VideoReader"
    else:
        try:
            os.fsdecode(found.path).encode("utf-8")
        except UnicodeEncodeError:
            # VideoReader hands str paths to OpenCV, whose binding crashes on
            # the surrogates of a name that is not UTF-8; bytes work here
            why_not = "the file name is not UTF-8"
    if why_not is None:
        return _open_with_reader(reader_type, found, args, on_gpu=on_gpu, stream=stream,
                                 timer=timer, check_memory=check_memory)
    if args.decode == "nvdec":
        raise UserError(f"--decode nvdec: {why_not}; use --decode cpu")
    source = _open_with_opencv(found, args, check_memory)
    source.decoder_line += f": {why_not}"
    return source


def _expected(total, limit):
    if total is None or total <= 0:
        return None
    return min(total, limit) if limit else total


def _open_with_opencv(found, args, check_memory):
    cv2 = _cvio.cv2("reading video files")
    path = found.path
    cap = cv2.VideoCapture(os.fsencode(path))
    if not cap.isOpened():
        raise UserError(f"cannot read video {shown(path)}: not a video OpenCV can decode")
    ok, first = cap.read()
    if not ok:
        cap.release()
        raise UserError(f"cannot read video {shown(path)}: no frame could be decoded")
    total = int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) or None
    fps = cap.get(cv2.CAP_PROP_FPS)
    limit = args.frames

    def grey(frame):
        return cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY) if args.grey else frame

    first = grey(first)
    try:
        check_memory(first.shape)
    except BaseException:
        cap.release()
        raise

    timeline_fps = fps if fps and fps > 0 else None

    def frames():
        try:
            frame, n = first, 0
            while frame is not None and (limit is None or n < limit):
                if timeline_fps:
                    # the timestamp tells how far into the stream this frame is
                    source.reached = round(cap.get(cv2.CAP_PROP_POS_MSEC) * timeline_fps
                                           / 1000.0) + 1
                yield frame
                n += 1
                if limit is not None and n >= limit:
                    break
                ok, frame = cap.read()
                frame = grey(frame) if ok else None
        finally:
            cap.release()

    expected = _expected(total, limit)
    source = Source(f"{shown(path)} ({total or '?'} frames announced)", first.shape, frames(),
                    count=expected, expected=expected,
                    fps=args.fps or (fps if fps and fps > 0 else DEFAULT_FPS))
    source.decoder_line = "decoding on the CPU (OpenCV)"
    return source


def _frame_count(reader):
    count = getattr(reader, "frame_count", None)
    if count is None:
        try:
            count = len(reader)
        except TypeError:
            count = None
    return count


def _container_fps(path):
    """The container's frame rate, through OpenCV (metadata only), or None."""
    try:
        cv2 = _cvio.cv2("reading the frame rate")
    except UserError:
        return None
    cap = cv2.VideoCapture(os.fsencode(path))
    try:
        fps = cap.get(cv2.CAP_PROP_FPS) if cap.isOpened() else 0.0
    finally:
        cap.release()
    return fps if fps and fps > 0 else None


def _open_with_reader(reader_type, found, args, *, on_gpu, stream, timer, check_memory):
    import fastmog

    decode = args.decode
    if not on_gpu:
        if decode == "nvdec":
            raise UserError("--decode nvdec needs a usable GPU, and the host reference runs "
                            "here; use --decode cpu")
        decode = "cpu"
    path = found.path
    try:
        # NVDEC queues its output on the stream MOG2 runs on
        reader = reader_type(path, stream=stream if on_gpu else None, decode=decode,
                             grey=args.grey, timer=timer,
                             sessions=args.nvdec_sessions if decode != "cpu" else 1)
    except (ValueError, TypeError, fastmog.CudaError) as e:
        # DecodeError is a ValueError: unreadable file, codec or size NVDEC lacks
        raise UserError(f"cannot read video {shown(path)}: {e}") from None
    if decode == "nvdec" and reader.backend != "nvdec":
        raise UserError(f"--decode nvdec: the reader chose {reader.backend} "
                        f"({reader.fallback_reason or 'no reason given'})")
    on_device = reader.backend == "nvdec"
    frames = iter(reader)
    try:
        first = next(frames)
    except StopIteration:
        raise UserError(f"cannot read video {shown(path)}: no frame could be decoded") from None
    except ValueError as e:
        raise UserError(f"cannot read video {shown(path)}: {e}") from None
    if on_device:
        h, w = first.luma.__cuda_array_interface__["shape"][:2]
        shape = (h, w) if args.grey else (h, w, 3)
    else:
        shape = first.host.shape
    check_memory(shape)
    limit = args.frames
    timeline_fps = getattr(reader, "fps", None) or _container_fps(path)
    source = None

    def passed(frame):
        if timeline_fps and frame.pts is not None:
            source.reached = round(frame.pts * timeline_fps) + 1
        return frame if on_device else frame.host

    def items():
        yield passed(first)
        n = 1
        while limit is None or n < limit:
            try:
                frame = next(frames)
            except StopIteration:
                return
            except fastmog.DecodeError as e:
                # the stream ends here; whether it is short input, the timeline says
                source.decode_error = str(e)
                return
            yield passed(frame)
            n += 1

    announced = _frame_count(reader)
    expected = _expected(announced, limit)
    source = Source(f"{shown(path)} ({announced or '?'} frames announced)", shape, items(),
                    count=expected, expected=expected,
                    fps=args.fps or timeline_fps or DEFAULT_FPS, on_device=on_device)
    source.reader = reader
    source.decoder_line = "decoding with NVDEC" if on_device else "decoding on the CPU"
    if on_device and args.nvdec_sessions > 1:
        source.decoder_line += f" ({args.nvdec_sessions} sessions, a closed GOP each)"
    if args.decode == "auto" and not on_gpu:
        source.decoder_line += " (the host reference runs here)"
    elif args.decode == "auto" and reader.fallback_reason:
        source.decoder_line += f" ({reader.fallback_reason})"
    return source
