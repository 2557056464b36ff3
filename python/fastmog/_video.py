"""fastmog.VideoReader: the frames of a video file or stream, decoded by NVDEC
into device memory (PyNvVideoCodec) or by FFmpeg on the host (OpenCV) into a
ring of pinned buffers, each decode timed like a fastmog call.

NVDEC frames stay on the GPU: a frame's luma and interleaved UV planes are
PyNvVideoCodec's own device buffers, viewed, never copied. The decoder queues
its output copy on the caller's stream, so MOG2 applied on that stream is
ordered after the decode, and the next decode's copy (which reuses the
buffers) is ordered after MOG2, with no host wait.
"""
import dataclasses
import os
import threading
import time
import weakref

import numpy as np

from . import _fastmog


class DecodeError(ValueError):
    """A video that cannot be decoded as asked: a source that does not open, a
    codec or size NVDEC cannot do (named), or a stream that breaks mid-file
    (`frame_index` is the first frame that could not be decoded; every frame
    before it was delivered)."""

    def __init__(self, message, *, frame_index=None):
        super().__init__(message)
        self.frame_index = frame_index


@dataclasses.dataclass(frozen=True, slots=True)
class VideoFrame:
    """One decoded frame. From NVDEC, `luma` (H×W×1 uint8) and `chroma`
    (H/2×W/2×2, interleaved U and V) are the decoder's device planes with
    ``__cuda_array_interface__``, valid until the next frame is taken from
    the reader; `host` is None. From the host decoder, `host` is an H×W×3 BGR
    or H×W grey numpy array in the reader's ring; `luma` and `chroma` are None.
    `pts` is the presentation time in seconds (None where unknown)."""

    index: int
    pts: float | None
    grey: bool
    luma: object = None
    chroma: object = None
    host: np.ndarray | None = None

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


def _open_interruptibly(opener, timeout, what):
    """Runs a blocking open (a FIFO without a writer, a camera that does not
    answer) in a daemon thread and waits in short steps, so Ctrl-C raises
    KeyboardInterrupt at once and `timeout` seconds raise DecodeError. The
    abandoned open is left to finish (or block) in its thread."""
    result = {}

    def run():
        try:
            result["value"] = opener()
        except BaseException as e:          # handed to the waiting thread
            result["error"] = e

    worker = threading.Thread(target=run, name=f"fastmog open {what}", daemon=True)
    worker.start()
    deadline = None if timeout is None else time.monotonic() + timeout
    while worker.is_alive():
        worker.join(0.05)
        if deadline is not None and time.monotonic() > deadline and worker.is_alive():
            raise DecodeError(f"cannot open {what}: no answer within {timeout:g} s")
    if "error" in result:
        raise result["error"]
    return result["value"]


def _quietly(create_demuxer, source):
    """PyNvVideoCodec's demuxer, opened with FFmpeg's own log lines (probe
    warnings of a file it cannot read) kept out of the user's terminal. Only
    for regular files, which open at once: fd 2 is the process's, and a stream
    that blocks must not leave it silenced."""
    if not os.path.isfile(source):
        return create_demuxer(filename=source)
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        return create_demuxer(filename=source)
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _declared_frames(source):
    """The frame count a regular file's container declares (0 if unknown).
    Streams are not probed: opening them twice would consume their data."""
    if not os.path.isfile(source):
        return 0
    try:
        import cv2
    except ImportError:
        return 0
    cap = cv2.VideoCapture(os.fsencode(source))  # bytes: any file name works
    try:
        return max(int(cap.get(cv2.CAP_PROP_FRAME_COUNT)), 0) if cap.isOpened() else 0
    finally:
        cap.release()


def _truncated(source, index, declared):
    return DecodeError(f"{source}: frame {index} could not be decoded (the file declares "
                       f"{declared} frames): the stream is truncated or corrupt",
                       frame_index=index)


class _HostDecoder:
    """FFmpeg through cv2.VideoCapture, decoding into a ring of `depth`
    pinned buffers (plain numpy buffers where pinned memory is unavailable)."""

    name = "cpu"

    def __init__(self, source, grey, depth, open_timeout):
        try:
            import cv2
        except ImportError:
            raise DecodeError("host decoding needs OpenCV, which is not installed: "
                              "pip install opencv-python-headless") from None
        self.cv2, self.source, self.grey, self.depth = cv2, source, grey, depth
        # bytes: OpenCV's binding crashes on a str that is not valid UTF-8
        self.cap = _open_interruptibly(lambda: cv2.VideoCapture(os.fsencode(source)),
                                       open_timeout, source)
        if not self.cap.isOpened():
            raise DecodeError(f"cannot read video {source}: not a video OpenCV can open")
        self.width = int(self.cap.get(cv2.CAP_PROP_FRAME_WIDTH))
        self.height = int(self.cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        fourcc = int(self.cap.get(cv2.CAP_PROP_FOURCC))
        self.codec = fourcc.to_bytes(4, "little").decode("ascii", "replace").strip("\0 ") or None
        self.declared = (max(int(self.cap.get(cv2.CAP_PROP_FRAME_COUNT)), 0)
                         if os.path.isfile(source) else 0)
        self.ring, self.scratch = None, None
        self.pinned, self.pinned_reason = None, None
        self.in_place = None         # whether OpenCV wrote the last frame into the ring
        self.copies = 0              # frames copied into the ring because it did not
        if self.width > 0 and self.height > 0:
            self._allocate((self.height, self.width, 3))

    def _allocate(self, bgr_shape):
        shape = bgr_shape[:2] if self.grey else bgr_shape
        try:
            self.ring = [_fastmog.pinned_empty(shape, np.uint8) for _ in range(self.depth)]
            self.pinned = True
        except (_fastmog.CudaError, MemoryError) as e:
            # no usable GPU (or no page-locked memory): ordinary buffers still work
            self.ring = [np.empty(shape, np.uint8) for _ in range(self.depth)]
            self.pinned, self.pinned_reason = False, str(e).split(";")[0]
        self.height, self.width = bgr_shape[:2]
        if self.grey:
            self.scratch = np.empty(bgr_shape, np.uint8)   # BGR, converted into the ring

    def frames(self):
        cv2, i = self.cv2, 0
        while True:
            slot = self.ring[i % self.depth] if self.ring is not None else None
            ok, image = self.cap.read(image=self.scratch if self.grey else slot)
            if not ok:
                break
            if self.ring is None:            # a stream that told its size only now
                self._allocate(image.shape)
                slot = self.ring[0]
            if image.shape[:2] != (self.height, self.width):
                raise DecodeError(f"{self.source}: frame {i} is {image.shape[1]}x{image.shape[0]},"
                                  f" the first was {self.width}x{self.height}", frame_index=i)
            if self.grey:
                image = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY, dst=slot)
            self.in_place = image.ctypes.data == slot.ctypes.data
            if not self.in_place:
                np.copyto(slot, image)       # one copy into the ring
                self.copies += 1
            msec = self.cap.get(cv2.CAP_PROP_POS_MSEC)
            yield None, None, slot, (msec / 1000.0 if msec >= 0 else None)
            i += 1
        if self.declared and i < self.declared:
            raise _truncated(self.source, i, self.declared)

    def close(self):
        self.cap.release()


def _import_nvc():
    if not _fastmog.cuda_available():
        raise DecodeError(f"no usable GPU ({_fastmog._cuda_status()[0]})")
    try:
        import PyNvVideoCodec as nvc
    except Exception as e:                   # missing, or no driver/libnvcuvid
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise DecodeError(f"PyNvVideoCodec is not usable ({why}): "
                          f"pip install 'fastmog[nvdec]'") from None
    return nvc


def _codec_name(codec):
    return str(codec).rsplit(".", 1)[-1]


class _NvdecDecoder:
    """PyNvVideoCodec's demuxer and decoder: NV12 in device memory, the output
    copy queued on the caller's stream."""

    name = "nvdec"

    def __init__(self, source, stream, device, open_timeout, decoder=True):
        nvc = self.nvc = _import_nvc()
        self.source = source
        try:
            self.demuxer = _open_interruptibly(lambda: _quietly(nvc.CreateDemuxer, source),
                                               open_timeout, source)
        except DecodeError:
            raise
        except Exception as e:  # PyNvVCException derives from Exception alone
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()] or [repr(e)]
            why = next((ln for ln in lines if "returned error" in ln), lines[0])
            raise DecodeError(f"cannot read video {source}: {why}") from None
        dmx = self.demuxer
        self.width, self.height = int(dmx.Width()), int(dmx.Height())
        self.codec = _codec_name(dmx.GetNvCodecId())
        what = f"{self.codec} {self.width}x{self.height}"
        bit_depth = int(dmx.BitDepth()) if hasattr(dmx, "BitDepth") else 8
        if bit_depth != 8:
            raise DecodeError(f"{source}: {what} is {bit_depth}-bit; fastmog takes 8-bit video")
        try:
            caps = nvc.GetDecoderCaps(gpuid=device, codec=dmx.GetNvCodecId(),
                                      chromaformat=dmx.ChromaFormat(), bitdepth=bit_depth)
        except Exception as e:
            raise DecodeError(f"NVDEC cannot be queried for {what}: {e}") from None
        if not caps.get("supported", 0):
            raise DecodeError(f"NVDEC on device {device} does not decode {what} "
                              f"({_codec_name(dmx.ChromaFormat())} chroma)")
        if not (caps.get("width_min", 0) <= self.width <= caps.get("width_max", 1 << 30)
                and caps.get("height_min", 0) <= self.height <= caps.get("height_max", 1 << 30)
                and (self.width // 16) * (self.height // 16) <= caps.get("mb_num_max", 1 << 30)):
            raise DecodeError(f"NVDEC on device {device} does not decode {what}: {self.codec} "
                              f"sizes from {caps.get('width_min')}x{caps.get('height_min')} to "
                              f"{caps.get('width_max')}x{caps.get('height_max')}")
        self.engines = caps.get("num_decoder_engines")
        self.device = device
        self.decoder = self.new_decoder(stream) if decoder else None
        tb_num = getattr(dmx, "GetTimebaseNum", lambda: 0)()
        tb_den = getattr(dmx, "GetTimebaseDen", lambda: 0)()
        self.time_base = tb_num / tb_den if tb_num and tb_den else None
        self.declared = _declared_frames(source)

    def new_decoder(self, stream):
        """A decoder session for this video whose output copies go on `stream`."""
        try:
            return self.nvc.CreateDecoder(gpuid=self.device, codec=self.demuxer.GetNvCodecId(),
                                          cudacontext=0, cudastream=stream.handle,
                                          usedevicememory=True)
        except Exception as e:
            raise DecodeError(f"NVDEC cannot decode {self.codec} {self.width}x{self.height}: "
                              f"{e}") from None

    def _decode(self, packet, index):
        try:
            return self.decoder.Decode(packet)
        except Exception as e:
            raise DecodeError(f"{self.source}: NVDEC failed at frame {index} ({self.codec} "
                              f"{self.width}x{self.height}): {e}", frame_index=index) from None

    def frames(self):
        index, packets, last_size = 0, 0, 0
        demuxed = iter(self.demuxer)
        while True:
            try:
                packet = next(demuxed)
            except StopIteration:
                break
            except Exception as e:
                raise DecodeError(f"{self.source}: demuxing failed at frame {index}: {e}",
                                  frame_index=index) from None
            last_size = int(packet.bsl)
            packets += last_size > 0
            # The frames of one Decode() live in buffers the next Decode() reuses:
            # they are handed out one by one before it is called.
            for frame in self._decode(packet, index):
                yield self._planes(frame) + (None, self._time(frame))
                index += 1
        if last_size:                        # the demuxer gave no empty packet: flush
            for frame in self._decode(self.nvc.PacketData(), index):
                yield self._planes(frame) + (None, self._time(frame))
                index += 1
        expected = max(packets, self.declared)
        if index < expected:
            raise _truncated(self.source, index, expected)

    @staticmethod
    def _planes(frame):
        # Plane 0 is [H, W, 1], plane 1 [H/2, W/2, 2], both |u1 with lists for
        # shape and strides. Their CAI "stream" is 2 (CAI: per-thread default
        # stream) whenever the decoder has a stream, 0 otherwise: never the
        # decoder's stream. The ordering comes from decoding on the caller's stream.
        planes = frame.cuda()
        return planes[0], planes[1]

    def _time(self, frame):
        pts = frame.getPTS()
        return pts * self.time_base if self.time_base is not None else None

    def close(self):
        # decoder first: it owns the frame buffers and runs on the caller's stream
        self.decoder = None
        self.demuxer = None


def _close_quietly(frames, decoder):
    frames.close()
    decoder.close()


class VideoReader:
    """VideoReader(source, *, stream=None, decode="auto", device=None, grey=False,
    depth=4, sessions=1, open_timeout=None, timer=None): iterate for the frames of a video
    file or stream URL, in order, as VideoFrame records.

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

    Lifetimes: an NVDEC frame's planes are valid until the next frame is
    taken. A host frame lives in a ring of `depth` pinned buffers and is
    valid until `depth` more frames were read; if the GPU may still be
    uploading it asynchronously by then, raise `depth`. `pinned` says whether
    the ring is page-locked (it falls back to ordinary memory without a GPU).

    Opening runs in a helper thread: Ctrl-C interrupts a source that does not
    answer (a FIFO with no writer, a silent camera) with KeyboardInterrupt, and
    `open_timeout` seconds end it with DecodeError; the abandoned open stays
    blocked in its daemon thread. Reading a live stream that stalls waits for
    the backend's own read timeout (OpenCV: 30 s). A stream that breaks
    mid-file raises DecodeError with `frame_index` after yielding every frame
    before it.

    Each decoded frame is timed like a fastmog call, "VideoReader.decode", in
    `timer` or the active fastmog.profile() Timer, and is an NVTX range when
    NVTX is on.
    """

    def __init__(self, source, *, stream=None, decode="auto", device=None, grey=False, depth=4,
                 sessions=1, open_timeout=None, timer=None):
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
        if decode != "cpu":
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
        if self._decoder is None:
            self._decoder = _HostDecoder(source, self.grey, depth, open_timeout)
            self._frames = self._decoder.frames()
        self._index = 0
        self._closed = False

    def _open_nvdec(self, stream, device, open_timeout, sessions):
        _import_nvc()                        # the most basic reason first
        if stream is None:
            raise TypeError("NVDEC decoding needs stream=: pass the fastmog.Stream you apply "
                            "MOG2 on (NVDEC's output copies are queued there)")
        if device is not None and device != stream.device:
            raise ValueError(f"device={device} but the stream is on device {stream.device}")
        if sessions > 1:
            from ._nvdec_sessions import ParallelNvdecDecoder
            decoder = ParallelNvdecDecoder(self.source, stream, stream.device, open_timeout,
                                           sessions)
        else:
            decoder = _NvdecDecoder(self.source, stream, stream.device, open_timeout)
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
    def frame_count(self):
        """The frame count the container declares, or None (streams, unknown)."""
        return self._decoder.declared or None

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
        record = getattr(timer, "_host_call", None)
        if record is not None:
            channels = 1 if self.grey or decoder.name == "nvdec" else 3
            record("VideoReader.decode", start, time.perf_counter_ns() - start,
                   (decoder.height, decoder.width, channels))
        return item

    def __iter__(self):
        return self

    def __next__(self):
        if self._closed:
            raise ValueError("the VideoReader is closed")
        if self._pending is not None:
            item, self._pending = self._pending, None
        else:
            item = self._timed_next(self._frames, self._decoder)
        luma, chroma, host, pts = item
        frame = VideoFrame(self._index, pts, self.grey, luma, chroma, host)
        self._index += 1
        return frame

    def close(self):
        """Releases the decoder (idempotent). NVDEC frames are invalid after it;
        close the reader before its stream."""
        if not self._closed:
            self._closed = True
            self._pending = None
            self._frames.close()
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
