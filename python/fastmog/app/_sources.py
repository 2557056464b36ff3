"""The main job's inputs: a video file, a folder of frames, a CDnet sequence
folder, the built-in scene or (on Dask) a callable, each opened as a Source
of frames, for the command line and the Dask workers alike.

Everything that can be checked before the run is checked when the source is
found or opened: the path is a regular file or a folder, the folder holds
frames, the first frame decodes, and the frames fit in memory (the caller's
`check_memory(shape)` runs before anything large is allocated).
"""
import dataclasses
import os
import pathlib
import stat
import time

from .. import _fastmog
from ..scene import BuiltinScene
from ..scoring import frame_number_of
from ..video import DecodeError, VideoReader
from ..video._live import LIVE_SCHEMES, is_live
from . import _cvio
from ._checks import PIPELINE_DEPTH
from ._errors import UserError, shown
from ._progress import Progress

# A host decoder's ring of pinned frames outlasts what the pipeline keeps in
# flight, so its frames are uploaded as they are, not copied first
# (_loop._host_frames): a live stream's one frame a launch; a file's while an
# automatic batch measures one frame a launch (the next slots may then take
# two) and after it keeps one.
LIVE_READER_DEPTH = PIPELINE_DEPTH + 2
FILE_READER_DEPTH = 2 * PIPELINE_DEPTH + 1

FRAME_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp"}
DEFAULT_FPS = 25.0


@dataclasses.dataclass(frozen=True)
class SourceOptions:
    """How a source is read, as the main job's options ask (their defaults
    here, so a caller names only what it sets): at most `frames` frames,
    converted to `grey`, decoded as `decode` says with `nvdec_sessions`
    sessions; `fps` overrides the source's frame rate; `size` and `colour`
    shape the built-in scene."""

    frames: int | None = None
    grey: bool = False
    decode: str = "auto"
    nvdec_sessions: int = 1
    fps: float | None = None
    size: tuple[int, int] | None = None
    colour: bool = False
    open_timeout: float = 10.0
    stall_timeout: float = 5.0
    rtsp_transport: str | None = None
    low_latency: bool = False
    on_stream_event: object = None      # called (url, StreamEvent) for a live stream's drops


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
    if not os.fsdecode(text).strip():
        # pathlib would read "" as ".", the current folder
        raise UserError("the input is an empty path: give a video file or a folder of frames")
    if "://" in os.fsdecode(text):
        url = os.fsdecode(text)              # as given: a path would fold its "//"
        if not is_live(url):
            raise UserError(f"{shown(url)} is a URL fastmog does not read: give a live "
                            f"stream ({', '.join(s + '://' for s in LIVE_SCHEMES)}), a "
                            f"video file or a folder of frames")
        return Input("stream", url)
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
                   if pathlib.Path(e.name).suffix.lower() in FRAME_SUFFIXES
                   and pathlib.Path(e.name).stem.lower() != "roi" and _regular(e))
    if not files:
        raise UserError(f"{shown(folder)} holds no frames (JPEG, PNG, BMP, TIFF or WebP files)")
    return files


def _regular(entry):
    """Whether a folder entry is a regular file, following links; a link that
    loops or leads nowhere is a UserError naming it."""
    try:
        if entry.is_file():
            return True
        if entry.is_symlink():
            os.stat(entry.path)          # raises for a loop or a dangling link
        return False
    except OSError as e:
        raise UserError(f"cannot read frame {shown(entry.path)}: {e.strerror or e}") from None


def _wxh(shape):
    return f"{shape[1]}x{shape[0]}" + (f"x{shape[2]}" if len(shape) > 2 else "")


class Source:
    """Frames of one input. frames: an iterator of host frames (numpy) or, from
    NVDEC, of the reader's frame objects (on_device). shape: the first frame's
    shape, which every frame must have (None: not checked). expected: frames the container announces (after --frames), or None.
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
        self.reader = None       # the VideoReader behind the frames, if any
        self.arrivals = None     # a live stream's: {index: when the frame was decoded}
        self._frames = frames

    def __iter__(self):
        for frame in self._frames:
            # a model is per size: a change would silently restart it
            if self.shape is not None and not self.on_device and frame.shape != self.shape:
                raise UserError(f"frame {self.read} is {_wxh(frame.shape)} but the first was "
                                f"{_wxh(self.shape)}: all frames must have one size")
            self.read += 1
            yield frame

    def close(self):
        """Releases the decoder, if any (before its stream: NVDEC works on it)."""
        if self.reader is not None:
            self.reader.close()

    @property
    def gaps(self):
        """Ranges of frame numbers missing between frames read (a damaged
        video whose decoder skipped ahead), from the reader's timestamps."""
        return self.reader.gaps if self.reader is not None else []

    @property
    def short(self):
        """True when fewer frames came than the container announced (or the
        decoder stopped on an error) and the stream did not reach the end of
        its timeline: a file that stores repeated frames as empty chunks
        (tree.avi: 444 announced, 68 decoded, the last at 29.5 s of 29.6) is
        complete, even where the reader calls it truncated."""
        if self.gaps:
            return True
        if self.expected is None:
            return self.decode_error is not None
        if self.read >= self.expected:
            return False
        return self.reached is None or self.reached < self.expected


    def incomplete(self):
        """What is missing, as a message (None when the source was whole)."""
        if not self.short:
            return None
        of = f" of the {self.expected} its container announces" if self.expected else ""
        if self.gaps:
            missing = ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in self.gaps)
            return f"read {self.read} frames{of}: frames {missing} are missing (corrupt video)"
        why = f": {self.decode_error}" if self.decode_error else ""
        return f"read {self.read} frames{of} (truncated or corrupt video{why})"


def open_source(found, options, *, on_gpu, stream, timer, check_memory):
    """The Source of what find_input found: the built-in scene, a folder of
    frames or a video file (NVDEC queues its frames on `stream`)."""
    if found.kind == "scene":
        return open_scene(options, on_gpu, check_memory)
    if found.kind == "frames":
        return open_frames(found, options, check_memory)
    if found.kind == "stream":
        return open_stream(found, options, on_gpu=on_gpu, stream=stream,
                           check_memory=check_memory)
    return open_video(found, options, on_gpu=on_gpu, stream=stream, timer=timer,
                      check_memory=check_memory)


def _frame_shape(frame, grey):
    """The shape MOG2 sees of a VideoReader frame: an NVDEC frame's luma
    size (grey, or BGR after nv12_to_bgr), a host frame's own."""
    if frame.host is not None:
        return frame.host.shape
    h, w = frame.luma.__cuda_array_interface__["shape"][:2]
    return (h, w) if grey else (h, w, 3)


def _decoder_asked(options, on_gpu):
    """VideoReader's decode= for --decode: the host where the host reference
    runs (--decode nvdec there is one line)."""
    if on_gpu:
        return options.decode
    if options.decode == "nvdec":
        raise UserError("--decode nvdec needs a usable GPU, and the host reference runs "
                        "here; use --decode cpu")
    return "cpu"


def open_stream(found, options, *, on_gpu, stream, check_memory):
    """A live stream through fastmog.VideoReader, decoded by NVDEC (on
    `stream`) or on the host as `options.decode` asks; it has no count and no
    end (--frames, Ctrl-C or SIGTERM end the run). Its drops and reconnects go
    to options.on_stream_event as they are seen; each frame's arrival is
    kept, by index, for its latency (Source.arrivals)."""
    url = found.path
    decode = _decoder_asked(options, on_gpu)
    try:
        reader = VideoReader(url, stream=stream if on_gpu else None, decode=decode,
                             grey=options.grey, depth=LIVE_READER_DEPTH,
                             open_timeout=options.open_timeout,
                             stall_timeout=options.stall_timeout,
                             rtsp_transport=options.rtsp_transport,
                             low_latency=options.low_latency)
    except (ValueError, TypeError, _fastmog.CudaError) as e:
        raise UserError(str(e)) from None
    on_device = reader.backend == "nvdec"
    try:
        frames = iter(reader)
        first = next(frames)
        shape = _frame_shape(first, options.grey)
        check_memory(shape)
    except StopIteration:
        reader.close()
        raise UserError(f"{url}: the stream gave no frame") from None
    except ValueError as e:
        reader.close()
        raise UserError(str(e)) from None
    except BaseException:
        reader.close()
        raise
    limit = options.frames
    source = None

    seen = [0]

    def report_events():
        if options.on_stream_event is not None:
            for event in reader.events[seen[0]:]:
                options.on_stream_event(url, event)
            seen[0] = len(reader.events)

    def items():
        frame, n = first, 0
        while True:
            source.arrivals[n] = frame.arrival
            report_events()
            yield frame if on_device else frame.host
            n += 1
            if limit is not None and n >= limit:
                return
            try:
                frame = next(frames)
            except StopIteration:
                report_events()
                return
            except DecodeError as e:           # the reconnects ran out
                report_events()
                source.decode_error = str(e)
                return

    source = Source(f"{url} (live stream)", shape, items(),
                    fps=options.fps or reader.fps or DEFAULT_FPS, on_device=on_device)
    source.reader = reader
    source.arrivals = {}
    source.decoder_line = ("decoding with NVDEC (FFmpeg demuxes the stream)" if on_device
                           else "decoding on the CPU")
    if decode == "auto" and reader.fallback_reason and not on_device:
        source.decoder_line += f" ({reader.fallback_reason})"
    return source


def open_callable(fn, limit=None):
    """The frames of `fn()` (at most `limit`), a source of Python's own: no
    decoder, and their shapes are the subtractor's business."""
    frames = iter(fn())
    if limit:
        frames = (f for _, f in zip(range(limit), frames))
    return Source(getattr(fn, "__qualname__", repr(fn)), None, frames)


def open_scene(options, on_gpu, check_memory):
    """The built-in scene, rendered now (with a progress line), so rendering
    is timed apart from processing."""
    n = options.frames or (300 if on_gpu else 10)
    w, h = options.size or (3840, 2160)
    channels = 3 if options.colour else 1
    check_memory((h, w, channels) if channels > 1 else (h, w), render=min(n, 32))
    progress = Progress("rendering the built-in scene")
    started = time.perf_counter()
    try:
        scene = BuiltinScene(w, h, colour=options.colour, pinned=on_gpu, count=n,
                             progress=progress.update)
    finally:
        progress.close()
    kind = "colour" if options.colour else "grey"
    source = Source(f"built-in scene, {w}x{h} {kind}, {n} frames", scene.shape,
                    scene.frames(n), count=n, fps=options.fps or DEFAULT_FPS)
    source.render_seconds = time.perf_counter() - started
    return source


def open_frames(found, options, check_memory):
    """A folder of frames; the first is decoded now."""
    cv2 = _cvio.cv2("reading image files")
    files = found.files[:options.frames] if options.frames else found.files

    def read(f):
        frame = _cvio.read_image(f, cv2.IMREAD_COLOR)
        return cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY) if options.grey else frame

    first = read(files[0])
    check_memory(first.shape)

    def frames():
        yield first
        for f in files[1:]:
            yield read(f)

    return Source(f"{shown(found.path)} ({len(files)} frames)", first.shape, frames(),
                  count=len(files), numbers=[frame_number_of(f) for f in files],
                  fps=options.fps or DEFAULT_FPS)


def _expected(total, limit):
    if total is None or total <= 0:
        return None
    return min(total, limit) if limit else total


def open_video(found, options, *, on_gpu, stream, timer, check_memory):
    """A video file through fastmog.VideoReader, the one way fastmog reads
    video: NVDEC or host decoding as `options.decode` asks, the host where
    the host reference runs; the first frame is decoded now."""
    decode = _decoder_asked(options, on_gpu)
    path = found.path
    try:
        # NVDEC queues its output on the stream MOG2 runs on
        reader = VideoReader(path, stream=stream if on_gpu else None, decode=decode,
                             grey=options.grey, depth=FILE_READER_DEPTH, timer=timer,
                             sessions=options.nvdec_sessions if decode != "cpu" else 1)
    except (ValueError, TypeError, _fastmog.CudaError) as e:
        # DecodeError is a ValueError: unreadable file, codec or size NVDEC lacks
        raise UserError(f"cannot read video {shown(path)}: {_why(e, path)}") from None
    try:
        source = _video_source(reader, path, options, on_gpu, check_memory)
    except BaseException:
        reader.close()
        raise
    return source


def _why(error, path):
    """The reader's message without the file name it starts with, which the
    caller's own message already gives."""
    text = str(error)
    for prefix in (f"cannot read video {os.fsdecode(path)}: ", f"{os.fsdecode(path)}: "):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def _video_source(reader, path, options, on_gpu, check_memory):
    if options.decode == "nvdec" and reader.backend != "nvdec":
        raise UserError(f"--decode nvdec: the reader chose {reader.backend} "
                        f"({reader.fallback_reason or 'no reason given'})")
    on_device = reader.backend == "nvdec"
    frames = iter(reader)
    try:
        first = next(frames)
    except StopIteration:
        raise UserError(f"cannot read video {shown(path)}: no frame could be decoded") from None
    except ValueError as e:
        raise UserError(f"cannot read video {shown(path)}: {_why(e, path)}") from None
    shape = _frame_shape(first, options.grey)
    check_memory(shape)
    limit = options.frames
    source = None

    def passed(frame):
        if reader.fps and frame.pts is not None:
            # the timestamp tells how far into the stream this frame is
            source.reached = round(frame.pts * reader.fps) + 1
        return frame if on_device else frame.host

    def items():
        yield passed(first)
        n = 1
        while limit is None or n < limit:
            try:
                frame = next(frames)
            except StopIteration:
                return
            except DecodeError as e:
                # the stream ends here; whether it is short input, the timeline says
                source.decode_error = (f"frame {e.frame_index} could not be decoded"
                                       if e.frame_index is not None else _why(e, path))
                return
            yield passed(frame)
            n += 1

    announced = reader.frame_count
    expected = _expected(announced, limit)
    source = Source(f"{shown(path)} ({announced or '?'} frames announced)", shape, items(),
                    count=expected, expected=expected,
                    fps=options.fps or reader.fps or DEFAULT_FPS, on_device=on_device)
    source.reader = reader
    source.decoder_line = "decoding with NVDEC" if on_device else "decoding on the CPU"
    if on_device and options.nvdec_sessions > 1:
        source.decoder_line += f" ({options.nvdec_sessions} sessions, a closed GOP each)"
    if options.decode == "auto" and not on_gpu:
        source.decoder_line += " (the host reference runs here)"
    elif options.decode == "auto" and reader.fallback_reason:
        source.decoder_line += f" ({reader.fallback_reason})"
    return source
