"""The live backend of VideoReader: a network stream (rtsp, udp, tcp, http,
...) decoded by FFmpeg through OpenCV in a thread of its own, which
reconnects when the stream drops or stalls and hands frames over a queue,
so the caller's wait is interruptible and nothing blocks forever.

A stream has no frame count and no end: a drop (the server closes, an
error, or no frame for `stall_timeout` seconds, FFmpeg's read timeout) is
followed by a reconnect after 0.5, 1, 2, 4, then every 8 seconds, until the
reader is closed or `max_reconnects` is spent. Frames are never invented or
repeated; those lost are counted: within a connection from the timestamps'
jumps, across a reconnect from the time the stream was down at its frame
rate (a new connection's timestamps start afresh).
"""
from __future__ import annotations

import collections
import dataclasses
import os
import queue
import threading
import time

import numpy as np

from .. import _fastmog
from ._backend import open_interruptibly
from ._errors import DecodeError

LIVE_SCHEMES = ("rtsp", "rtsps", "rtmp", "rtp", "srt", "udp", "tcp", "http", "https")
BACKOFF = (0.5, 1.0, 2.0, 4.0, 8.0)      # seconds before each reconnect, the last repeated
_POLL = 0.05                             # seconds between looks at the queue
_OPTIONS = "OPENCV_FFMPEG_CAPTURE_OPTIONS"
_OPTIONS_LOCK = threading.Lock()


def is_live(source) -> bool:
    """Whether `source` names a network stream VideoReader reads live."""
    scheme, sep, _ = str(source).partition("://")
    return bool(sep) and scheme.lower() in LIVE_SCHEMES


@dataclasses.dataclass(frozen=True)
class StreamEvent:
    """Something that happened to a live stream: kind "dropped" (after
    `frames` frames: `reason`) or "reconnected" (after `attempt` tries and
    `seconds` down; `lost` frames estimated missing)."""

    kind: str
    frames: int
    reason: str = ""
    attempt: int = 0
    seconds: float = 0.0
    lost: int = 0


class _End:
    """Put on the queue when the reader thread stops: why (None: closed)."""

    def __init__(self, error=None):
        self.error = error


class LiveDecoder:
    """A network stream through cv2.VideoCapture in a reader thread, frames
    in `depth` + 2 pinned buffers (a frame stays valid until `depth` more
    were taken, as the host ring's). The connection, its reader thread and
    the consumer's interruptible wait are this class's; what one read gives
    and how it becomes frames are `_item` and `_frames_of`, which the NVDEC
    backend (_live_nvdec.py) replaces."""

    name = "cpu"
    declared = 0
    capture_options = ()                 # (property, value) pairs added to each open

    def __init__(self, source, grey, depth, open_timeout, stall_timeout, max_reconnects,
                 rtsp_transport=None):
        try:
            import cv2
        except ImportError:
            raise DecodeError("live streams need OpenCV, which is not installed: "
                              "pip install opencv-python-headless") from None
        self.cv2, self.source, self.grey, self.depth = cv2, source, grey, depth
        self.open_timeout = 10.0 if open_timeout is None else float(open_timeout)
        self.stall_timeout, self.max_reconnects = float(stall_timeout), max_reconnects
        self.rtsp_transport = rtsp_transport
        self.cap = open_interruptibly(self._connect, self.open_timeout + 1.0, source)
        if not self.cap.isOpened():
            raise DecodeError(f"cannot open {source}: no stream there, or no answer within "
                              f"{self.open_timeout:g} s")
        self.width = int(self.cap.get(cv2.CAP_PROP_FRAME_WIDTH))
        self.height = int(self.cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        fourcc = int(self.cap.get(cv2.CAP_PROP_FOURCC))
        self.codec = fourcc.to_bytes(4, "little").decode("ascii", "replace").strip("\0 ") or None
        fps = self.cap.get(cv2.CAP_PROP_FPS)
        self.fps = fps if 0 < fps < 1000 else None
        self.pinned, self.pinned_reason = None, None
        self.reconnects, self.lost = 0, 0
        self.events: list[StreamEvent] = []
        self.arrival = None          # monotonic seconds the frame last handed out was decoded
        self._ready: queue.Queue = queue.Queue(maxsize=2)
        self._free: queue.Queue = queue.Queue()
        self._buffers: list = []
        self._held: collections.deque = collections.deque()   # handed out, still valid
        self._last_pts = None
        self._stopping = threading.Event()
        self._thread = None

    def _connect(self):
        cv2, ms = self.cv2, int(self.open_timeout * 1000)

        # One decoding thread: FFmpeg's frame threading holds back a frame per
        # thread (15 on a 16-core machine), so a live frame would come that
        # much late, and those before a stall only after the stall timeout.
        def capture():
            return cv2.VideoCapture(self.source, cv2.CAP_FFMPEG,
                                    [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, ms,
                                     cv2.CAP_PROP_READ_TIMEOUT_MSEC,
                                     int(self.stall_timeout * 1000),
                                     cv2.CAP_PROP_N_THREADS, 1,
                                     *(v for pair in self.capture_options for v in pair)])

        if self.rtsp_transport is None:
            return capture()
        # OpenCV passes FFmpeg options only through this variable, read at each
        # open: set for this open alone, under a lock (so only opens that set
        # a transport wait for each other); FFmpeg keeps an option's last value
        with _OPTIONS_LOCK:
            saved = os.environ.get(_OPTIONS)
            option = f"rtsp_transport;{self.rtsp_transport}"
            os.environ[_OPTIONS] = option if not saved else f"{saved}|{option}"
            try:
                return capture()
            finally:
                if saved is None:
                    os.environ.pop(_OPTIONS, None)
                else:
                    os.environ[_OPTIONS] = saved

    def _allocate(self, bgr_shape):
        shape = bgr_shape[:2] if self.grey else bgr_shape
        try:
            self._buffers = [_fastmog.pinned_empty(shape, np.uint8)
                             for _ in range(self.depth + 2)]
            self.pinned = True
        except (_fastmog.CudaError, MemoryError) as e:
            self._buffers = [np.empty(shape, np.uint8) for _ in range(self.depth + 2)]
            self.pinned, self.pinned_reason = False, str(e).split(";")[0]
        for b in self._buffers:
            self._free.put(b)
        self.height, self.width = bgr_shape[:2]

    # ---- the reader thread ---------------------------------------------------------------

    def _run(self):
        try:
            self._read_all()
        except BaseException as e:          # handed to the consumer
            self._put(_End(e))
        else:
            self._put(_End())
        finally:
            self.cap.release()

    def _put(self, item):
        while not self._stopping.is_set():
            try:
                self._ready.put(item, timeout=_POLL)
                return True
            except queue.Full:
                pass
        return False

    def _take_free(self):
        while not self._stopping.is_set():
            try:
                return self._free.get(timeout=_POLL)
            except queue.Empty:
                pass
        return None

    def _read_all(self):
        frames, fresh, scratch = 0, True, None
        last_arrival = time.monotonic()
        while not self._stopping.is_set():
            ok, image = self.cap.read(image=scratch)
            if not ok:
                if self._stopping.is_set():
                    return
                self.events.append(StreamEvent(
                    "dropped", frames, f"no frame for {self.stall_timeout:g} s, or the "
                                       f"stream ended"))
                if not self._reconnect(frames, last_arrival):
                    return
                fresh = True
                continue
            arrival, scratch = time.monotonic(), image
            last_arrival = arrival
            item = self._item(image, frames, arrival, fresh)
            if item is None or not self._put(item):
                return
            fresh = False
            frames += 1

    def _item(self, image, index, arrival, fresh):
        """What the reader thread queues for one read: the frame copied into
        a free ring buffer, its timestamp and arrival (None: closed).
        fresh: the first read of a connection (whose timestamps start afresh)."""
        if not self._buffers:
            self._allocate(image.shape)
        if image.shape[:2] != (self.height, self.width):
            raise DecodeError(f"{self.source}: frame {index} is {image.shape[1]}x"
                              f"{image.shape[0]}, the first was {self.width}x{self.height}",
                              frame_index=index)
        buf = self._take_free()
        if buf is None:
            return None
        if self.grey:
            self.cv2.cvtColor(image, self.cv2.COLOR_BGR2GRAY, dst=buf)
        else:
            np.copyto(buf, image)            # the one copy, into a pinned buffer
        msec = self.cap.get(self.cv2.CAP_PROP_POS_MSEC)
        pts = msec / 1000.0 if msec >= 0 else None
        self._count_lost(pts, fresh)
        return buf, pts, arrival

    def _count_lost(self, pts, fresh):
        """Adds the frames the stream skipped within this connection, from
        the jump between this timestamp and the last (a new connection's
        timestamps start afresh)."""
        last, self._last_pts = (None if fresh else self._last_pts), pts
        if pts is not None and last is not None and self.fps:
            self.lost += max(0, round((pts - last) * self.fps) - 1)

    def _reconnect(self, frames, down):
        """Reconnects with backoff; False once closed, DecodeError out of
        attempts. down: when the last frame came (the stream was down since)."""
        attempt = 0
        self.cap.release()
        while self.max_reconnects is None or attempt < self.max_reconnects:
            wait = BACKOFF[min(attempt, len(BACKOFF) - 1)]
            attempt += 1
            if self._stopping.wait(wait):
                return False
            cap = self._connect()
            if cap.isOpened():
                self.cap = cap
                self.reconnects += 1
                seconds = time.monotonic() - down
                lost = max(0, round(seconds * self.fps) - 1) if self.fps else 0
                self.lost += lost
                self.events.append(StreamEvent("reconnected", frames, attempt=attempt,
                                               seconds=seconds, lost=lost))
                return True
            cap.release()
        raise DecodeError(f"{self.source}: the stream dropped after {frames} frames and "
                          f"{attempt} reconnects failed", frame_index=frames)

    # ---- the consumer ----------------------------------------------------------------------

    def frames(self):
        self._thread = threading.Thread(target=self._run, name=f"fastmog live {self.source}",
                                        daemon=True)
        self._thread.start()
        try:
            while True:
                try:
                    item = self._ready.get(timeout=_POLL)
                except queue.Empty:
                    if self._stopping.is_set():  # closed from another thread
                        return
                    continue                     # a short wait: Ctrl-C gets in between
                if isinstance(item, _End):
                    if item.error is not None:
                        raise item.error
                    return
                yield from self._frames_of(item)
        finally:
            # the caller stopped (or dropped the reader): the thread and its
            # connection end too
            self._stopping.set()

    def _frames_of(self, item):
        """The frames of one queued item: here the one host frame, its buffer
        handed back to the reader thread once `depth` newer ones were taken."""
        buf, pts, self.arrival = item
        self._held.append(buf)
        if len(self._held) > self.depth:
            self._free.put(self._held.popleft())
        yield None, None, buf, pts

    def close(self):
        """Stops the reader thread (it ends within its read timeout; it is a
        daemon, so it never holds the process)."""
        self._stopping.set()
        if self._thread is None:
            self.cap.release()
        else:
            self._thread.join(timeout=0.2)
