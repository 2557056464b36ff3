"""fastmog.VideoReader: the frames of a video file or stream, in order, from
the backend it chooses (NVDEC into device memory, or FFmpeg on the host into
a ring of pinned buffers), each decode timed like a fastmog call.

NVDEC frames stay on the GPU: a frame's luma and interleaved UV planes are
PyNvVideoCodec's own device buffers, viewed, never copied. The decoder queues
its output copy on the caller's stream, so MOG2 applied on that stream is
ordered after the decode, and the next decode's copy (which reuses the
buffers) is ordered after MOG2, with no host wait.
"""
import dataclasses
import os
import time
import weakref

import numpy as np

from .. import _fastmog
from ._backend import Backend
from ._errors import DecodeError
from ._host import HostDecoder
from ._live import LiveDecoder, is_live
from ._live_nvdec import LiveNvdecDecoder
from ._nvdec import NvdecDecoder, import_nvc
from ._nvdec_sessions import ParallelNvdecDecoder


@dataclasses.dataclass(frozen=True, slots=True)
class VideoFrame:
    """One decoded frame. From NVDEC, `luma` (H×W×1 uint8) and `chroma`
    (H/2×W/2×2, interleaved U and V) are the decoder's device planes with
    ``__cuda_array_interface__``, valid until the next frame is taken from
    the reader; `host` is None. From the host decoder, `host` is an H×W×3 BGR
    or H×W grey numpy array in the reader's ring; `luma` and `chroma` are None.
    `pts` is the presentation time in seconds (None where unknown); `number`
    is the frame's place in the container's timeline, round(pts x fps) (None
    where either is unknown): it skips where frames are missing. `arrival`,
    for a live stream, is when its packet came in (NVDEC) or when it was
    decoded (host), in time.monotonic() seconds: the start of its latency;
    None for files."""

    index: int
    pts: float | None
    grey: bool
    luma: object = None
    chroma: object = None
    host: np.ndarray | None = None
    number: int | None = None
    arrival: float | None = None

    @property
    def on_device(self):
        return self.luma is not None

    def as_input(self, stream, *, out=None):
        """What BackgroundSubtractorMOG2.apply takes for this frame: the host
        array; the luma plane viewed as a grey GpuMat (no copy); or, for
        colour, BGR converted on the GPU by fastmog.nv12_to_bgr on `stream`
        (into `out` when given)."""
        if self.host is not None:
            return self.host
        if self.grey:
            return _fastmog.asgpumat(self.luma, stream=stream)
        nv12_to_bgr = getattr(_fastmog, "nv12_to_bgr", None)
        if nv12_to_bgr is None:
            raise RuntimeError("colour frames from NVDEC need fastmog.nv12_to_bgr, which this "
                               "build of fastmog lacks: read with grey=True or decode='cpu'")
        return nv12_to_bgr(self.luma, self.chroma, stream=stream, out=out)


def timeline_gaps(numbers):
    """The (first, last) frame numbers missing between consecutive `numbers`
    (places in a timeline, increasing). A stream whose frames follow one
    another (a typical step of 1) misses every number it skips. A stream
    sparser than its declared rate (a typical step s > 1: repeated frames
    stored as empty chunks, as in tree.avi, or a variable rate) misses only
    where a step exceeds 2s."""
    steps = [b - a for a, b in zip(numbers, numbers[1:]) if b > a]
    if not steps:
        return []
    typical = sorted(steps)[len(steps) // 2]
    limit = 1 if typical <= 1 else 2 * typical
    return [(a + 1, b - 1) for a, b in zip(numbers, numbers[1:]) if b - a > limit]


def _close_quietly(frames, decoder):
    frames.close()
    decoder.close()


class VideoReader:
    """VideoReader(source, *, stream=None, decode="auto", device=None, grey=False,
    depth=4, sessions=1, open_timeout=None, timer=None, stall_timeout=5.0,
    max_reconnects=None, rtsp_transport=None, low_latency=False): iterate for
    the frames of a video file or stream URL, in order, as VideoFrame records.

    decode: "nvdec" decodes on the GPU with PyNvVideoCodec (DecodeError naming
    the codec and size when it cannot), "cpu" with FFmpeg on the host through
    OpenCV, "auto" uses NVDEC when it can and says why not in
    `fallback_reason`. `backend` is "nvdec" or "cpu".

    stream: the fastmog.Stream you apply MOG2 on; NVDEC queues its output
    copies there (so needs one; "auto" without it uses the host). device:
    the CUDA device NVDEC decodes on (default: the stream's).

    grey: frames are given as grey (NVDEC: the luma plane, which is the
    video's Y; host: OpenCV's BGR-to-grey). `frame.as_input(stream)` is what
    `BackgroundSubtractorMOG2.apply` takes.

    sessions: NVDEC sessions decoding one video file at once, a closed GOP
    each (an NVDEC session runs on one engine; a GPU has up to 7). Frames still
    come in order; each session holds up to two GOPs of frames, so memory
    grows with sessions x 2 x GOP length (4K: 12.4 MB a frame). Open-GOP streams (HEVC CRA)
    are not cut and decode in one session.

    `fps` and `frame_count` are what the container declares (None where it
    does not, as for streams). `gaps` lists the ranges of frame numbers
    missing between the frames read so far (a damaged file whose decoder
    skips ahead without an error), from the frames' timestamps: see
    timeline_gaps. It needs timestamps and a frame rate (NVDEC gives
    timestamps where PyNvVideoCodec reports the stream's time base).

    Lifetimes: an NVDEC frame's planes are valid until the next frame is
    taken. A host frame lives in a ring of `depth` pinned buffers and is
    valid until `depth` more frames were read; if the GPU may still be
    uploading it asynchronously by then, raise `depth`. `pinned` says whether
    the ring is page-locked (it falls back to ordinary memory without a GPU).

    Opening runs in a helper thread: Ctrl-C interrupts a source that does not
    answer (a FIFO with no writer, a silent camera) with KeyboardInterrupt, and
    `open_timeout` seconds end it with DecodeError; the abandoned open stays
    blocked in its daemon thread. A stream that breaks mid-file raises
    DecodeError with `frame_index` after yielding every frame before it.

    Live streams (`live`: an rtsp://, udp://, tcp://, http(s):// ... URL) are
    read by FFmpeg (through OpenCV) in a reader thread and decoded by NVDEC
    (H.264, HEVC, AV1, VP9, VP8; FFmpeg only demuxes) or on the host as
    `decode` says, and have no frame count and no end: a drop (the server closes, an error, or no frame for
    `stall_timeout` seconds) is followed by reconnects with a growing pause
    (0.5 s to 8 s), up to `max_reconnects` (None: until closed), after which
    DecodeError. `reconnects`, `lost_frames` (frames missing, from timestamp
    jumps and the time down) and `events` (StreamEvent records) say what
    happened; each frame's `arrival` starts its latency (NVDEC: when its
    packet came in; host: when it was decoded). The wait for a
    frame is interruptible by Ctrl-C; the first open gives up after
    `open_timeout` seconds (default 10) with DecodeError. `rtsp_transport`
    ("tcp" or "udp"; None: FFmpeg's choice) is how an rtsp:// stream's RTP
    packets travel. `low_latency` (NVDEC) hands each frame out as soon as
    its packet is decoded instead of holding one back for reordering: for
    streams without B-frames, as most cameras send (one with them ends with
    DecodeError at its first out-of-order picture); the host decoder ignores
    it (it holds nothing back but B-frames' reordering).

    Each decoded frame is timed like a fastmog call, "VideoReader.decode", in
    `timer` or the active fastmog.profile() Timer, and is an NVTX range when
    NVTX is on.
    """

    _decoder: Backend            # the backend chosen: every property below asks it

    def __init__(self, source, *, stream=None, decode="auto", device=None, grey=False, depth=4,
                 sessions=1, open_timeout=None, timer=None, stall_timeout=5.0,
                 max_reconnects=None, rtsp_transport=None, low_latency=False):
        if decode not in ("auto", "nvdec", "cpu"):
            raise ValueError(f"decode must be 'auto', 'nvdec' or 'cpu', not {decode!r}")
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth must be a positive int, not {depth!r}")
        if not isinstance(sessions, int) or isinstance(sessions, bool) or sessions < 1:
            raise ValueError(f"sessions must be a positive int, not {sessions!r}")
        if stream is not None and not isinstance(stream, _fastmog.Stream):
            raise TypeError(f"stream must be a fastmog.Stream, not {type(stream).__name__}")
        if timer is not None and not isinstance(timer, _fastmog._Timer):
            raise TypeError(f"timer must be a fastmog.Timer, not {type(timer).__name__}")
        source = os.fspath(source)
        if "://" not in source and not os.path.exists(source):
            raise FileNotFoundError(f"no such video file: {source}")
        if sessions > 1 and not os.path.isfile(source):
            raise ValueError(f"sessions={sessions} needs a video file (a stream is read once, "
                             f"in order): {source}")
        self.source, self.grey, self.depth, self.timer = source, bool(grey), depth, timer
        self.stream = stream                 # kept alive: NVDEC queues work on it
        self.fallback_reason = None
        self._decoder, self._pending = None, None
        self.live = is_live(source)
        if self.live:
            self._open_live(decode, stream, device, open_timeout, stall_timeout,
                            max_reconnects, rtsp_transport, bool(low_latency))
        elif rtsp_transport is not None:
            raise ValueError("rtsp_transport is for rtsp:// streams")
        elif low_latency:
            raise ValueError("low_latency is for live streams")
        elif decode != "cpu":
            try:
                self._open_nvdec(stream, device, open_timeout, sessions)
            except DecodeError as e:
                if decode == "nvdec":
                    raise
                self.fallback_reason = str(e).splitlines()[0]
            except TypeError as e:
                if decode == "nvdec":
                    raise
                self.fallback_reason = str(e)
        else:
            self.fallback_reason = "decode='cpu' was asked for"
        if self._decoder is None:                # no NVDEC: the host
            self._decoder = HostDecoder(source, self.grey, depth, open_timeout)
            self._frames = self._decoder.frames()
        self._index = 0
        self._numbers = []                   # the timeline places read, for gaps
        self._closed = False

    def _open_live(self, decode, stream, device, open_timeout, stall_timeout, max_reconnects,
                   rtsp_transport, low_latency):
        if not (isinstance(stall_timeout, (int, float)) and 0 < stall_timeout < float("inf")):
            raise ValueError(f"stall_timeout must be a positive number of seconds, not "
                             f"{stall_timeout!r}")
        if max_reconnects is not None and (isinstance(max_reconnects, bool)
                                           or not isinstance(max_reconnects, int)
                                           or max_reconnects < 0):
            raise ValueError(f"max_reconnects must be None or a whole number, not "
                             f"{max_reconnects!r}")
        if rtsp_transport not in (None, "tcp", "udp"):
            raise ValueError(f"rtsp_transport must be None (FFmpeg's choice), 'tcp' or 'udp', "
                             f"not {rtsp_transport!r}")
        if rtsp_transport is not None and not self.source.lower().startswith("rtsp"):
            raise ValueError("rtsp_transport is for rtsp:// streams")
        connection = (open_timeout, stall_timeout, max_reconnects, rtsp_transport)
        if decode != "cpu":
            try:
                self._decoder = self._open_live_nvdec(stream, device, connection, low_latency)
            except (DecodeError, TypeError) as e:
                if decode == "nvdec":
                    raise
                self.fallback_reason = str(e).splitlines()[0]
        else:
            self.fallback_reason = "decode='cpu' was asked for"
        if self._decoder is None:
            self._decoder = LiveDecoder(self.source, self.grey, self.depth, *connection)
        self._frames = self._decoder.frames()

    @staticmethod
    def _check_nvdec(stream, device):
        """Refuses NVDEC for its most basic reason first: PyNvVideoCodec or
        the GPU unusable, no stream to queue its output on, another device."""
        import_nvc()
        if stream is None:
            raise TypeError("NVDEC decoding needs stream=: pass the fastmog.Stream you apply "
                            "MOG2 on (NVDEC's output copies are queued there)")
        if device is not None and device != stream.device:
            raise ValueError(f"device={device} but the stream is on device {stream.device}")

    def _open_live_nvdec(self, stream, device, connection, low_latency):
        self._check_nvdec(stream, device)
        return LiveNvdecDecoder(self.source, stream, self.grey, *connection,
                                low_latency=low_latency)

    def _open_nvdec(self, stream, device, open_timeout, sessions):
        self._check_nvdec(stream, device)
        if sessions > 1:
            decoder = ParallelNvdecDecoder(
                self.source, stream, stream.device, open_timeout, sessions,
                timer=self.timer if self.timer is not None else _fastmog.active_timer())
        else:
            decoder = NvdecDecoder(self.source, stream, stream.device, open_timeout)
        frames = decoder.frames()
        try:
            # NVDEC creates its session at the first sequence header: decode the
            # first frame now, so an unsupported stream is refused (or falls back) here.
            first = self._timed_next(frames, decoder)
        except BaseException as e:
            frames.close()
            decoder.close()
            if isinstance(e, StopIteration):
                raise DecodeError(f"{self.source}: NVDEC decoded no frame") from None
            raise
        self._decoder, self._frames, self._pending = decoder, frames, first
        if sessions > 1:
            # Session threads hold the decoder, not the reader: a reader dropped
            # without close() still stops them.
            weakref.finalize(self, _close_quietly, frames, decoder)

    # ---- reading -------------------------------------------------------------------

    @property
    def backend(self):
        return self._decoder.name

    @property
    def width(self):
        return self._decoder.width

    @property
    def height(self):
        return self._decoder.height

    @property
    def codec(self):
        return self._decoder.codec

    @property
    def fps(self):
        """The frame rate the container declares, or None (streams, unknown)."""
        return self._decoder.fps

    @property
    def frame_count(self):
        """The frame count the container declares, or None (streams, unknown)."""
        return self._decoder.declared or None

    @property
    def reconnects(self):
        """A live stream's reconnects so far (0 for files)."""
        return getattr(self._decoder, "reconnects", 0)

    @property
    def lost_frames(self):
        """A live stream's frames lost so far, from its timestamps' jumps and
        the time it was down between connections (0 for files)."""
        return getattr(self._decoder, "lost", 0)

    @property
    def events(self):
        """A live stream's drops and reconnects so far, as StreamEvent records
        (a list the reader thread appends to; [] for files)."""
        return getattr(self._decoder, "events", [])

    @property
    def gaps(self):
        """[(first, last), ...]: the frame numbers missing so far, inclusive."""
        return timeline_gaps(self._numbers)

    @property
    def pinned(self):
        """Host backend: whether the ring is page-locked (None before the first
        frame, or with NVDEC)."""
        return getattr(self._decoder, "pinned", None)

    @property
    def closed(self):
        return self._closed

    def _timed_next(self, frames, decoder):
        timer = self.timer if self.timer is not None else _fastmog.active_timer()
        nvtx = _fastmog.nvtx_enabled() or (timer is not None and timer.nvtx)
        start = time.perf_counter_ns()       # CLOCK_MONOTONIC, the Timer's clock
        if nvtx:
            _fastmog._nvtx_push("VideoReader.decode")
        try:
            item = next(frames)
        finally:
            if nvtx:
                _fastmog._nvtx_pop()
        record = getattr(timer, "_decoder_call", None)
        if record is not None:
            channels = 1 if self.grey or decoder.name == "nvdec" else 3
            record("VideoReader.decode", start, time.perf_counter_ns() - start,
                   (decoder.height, decoder.width, channels),
                   "NVDEC" if decoder.name == "nvdec" else None, -1)
        return item

    def __iter__(self):
        return self

    def __next__(self):
        if self._closed:
            if self.live:
                raise StopIteration      # closed (by another thread, say): the stream ends
            raise ValueError("the VideoReader is closed")
        if self._pending is not None:
            item, self._pending = self._pending, None
        else:
            item = self._timed_next(self._frames, self._decoder)
        luma, chroma, host, pts = item
        fps = self._decoder.fps
        # a live stream's timestamps start afresh at each reconnect: no timeline
        number = round(pts * fps) if pts is not None and fps and not self.live else None
        if number is not None:
            self._numbers.append(number)
        frame = VideoFrame(self._index, pts, self.grey, luma, chroma, host, number,
                           getattr(self._decoder, "arrival", None))
        self._index += 1
        return frame

    def close(self):
        """Releases the decoder (idempotent). NVDEC frames are invalid after it;
        close the reader before its stream."""
        if not self._closed:
            self._closed = True
            self._pending = None
            try:
                self._frames.close()
            except ValueError:
                pass        # another thread is inside it: the decoder's close ends it
            self._decoder.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return (f"<fastmog.VideoReader {self.source!r} {self.backend} {self.codec} "
                f"{self.width}x{self.height}{' grey' if self.grey else ''}"
                f"{' closed' if self._closed else ''}>")
