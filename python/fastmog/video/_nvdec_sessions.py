"""One video decoded by several NVDEC sessions at once, a closed GOP each,
and handed out in order: NVIDIA's decoder runs one session on one engine, so
this is how a single file uses more of a GPU's NVDEC engines.

The demuxer thread copies each packet out of the demuxer and cuts the stream
at IDR pictures (after one, no frame refers to an earlier one); GOP g goes to
session g mod N. Each session thread decodes its GOPs in order on a stream of
its own and copies every frame into a slot of its own (one NV12 GpuMat), then
records `ready`. The reader's consumer takes GOP 0 from session 0, GOP 1 from
session 1, and so on; the caller's stream waits on the GPU for `ready`, and a
slot goes back to its session with `done` recorded on the caller's stream, so
a session overwrites it only after the caller's work on it. No host waits on
the GPU.

Bounds, and why nothing deadlocks: a session may hold two GOPs of frames (its
longest, twice, plus the decoder's reorder depth), so it decodes its next GOP
while the consumer has not yet taken the last one; with one GOP it would sit
idle most of the time and N sessions would decode at about twice the rate of
one. The demuxer stays less than 3N GOPs ahead of the consumer, so the next
GOP of the session the consumer waits on (which pushes that GOP's last
reordered frames out of the decoder) is always dispatched; while the
consumer waits on a session, that session holds frames of the awaited GOP
and of at most one later one.

Open GOPs (HEVC CRA pictures whose leading pictures refer to the previous
GOP) are not cut: such a stream decodes as one segment, in one session.
"""
import ctypes
import queue
import threading
import time

import numpy as np

from .. import _fastmog
from .._device_pointer import DevicePointer
from ._errors import DecodeError, truncated
from ._nvdec import NvdecDecoder

_END = object()                      # a session has flushed its decoder
_REORDER = 8                         # slots beyond a GOP's length: frames the decoder holds back
_AHEAD = 2                           # GOPs a session may hold: it decodes one while one waits
_POLL = 0.05                         # seconds between checks for close() while waiting


def _first_picture_is_idr(data, codec):
    """Whether an Annex-B packet's first picture NAL unit is an IDR picture
    (None when the packet has no start code: not Annex-B, do not cut)."""
    at = data.find(b"\0\0\1")
    if at < 0:
        return None
    while at >= 0 and at + 3 < len(data):
        header = data[at + 3]
        if codec.lower() == "hevc":
            kind = (header >> 1) & 0x3F
            if kind < 32:                    # VCL: 19, 20 are IDR_W_RADL, IDR_N_LP
                return kind in (19, 20)
        else:
            kind = header & 0x1F
            if 1 <= kind <= 5:               # VCL: 5 is an IDR slice
                return kind == 5
        at = data.find(b"\0\0\1", at + 3)
    return False


class _Gop:
    """A closed GOP: its packets (Annex-B bytes and pts) in decode order, and
    the index of its first frame in the video."""

    __slots__ = ("number", "first", "packets", "pts")

    def __init__(self, number, first):
        self.number, self.first, self.packets, self.pts = number, first, [], set()


class _Slot:
    """One frame's NV12 copy: `y` and `uv` are views of one GpuMat."""

    def __init__(self, height, width, device):
        self.frame = _fastmog.GpuMat((height * 3 // 2, width), np.uint8, device=device)
        self.y, self.uv = self.frame[:height], self.frame[height:]
        self.ready = _fastmog.Event(timing=False, device=device)
        self.done = _fastmog.Event(timing=False, device=device)
        self.used = False                    # `done` has been recorded

    def close(self):
        for m in (self.y, self.uv, self.frame):
            m.close()


def _address(plane, width):
    """(device address, row pitch in bytes) of a decoded plane."""
    cai = plane.__cuda_array_interface__
    strides = cai.get("strides")
    return cai["data"][0], int(strides[0]) if strides else width


class _Session(threading.Thread):
    """One NVDEC session: decodes its GOPs in order into its own slots."""

    def __init__(self, reader, number):
        super().__init__(name=f"fastmog NVDEC session {number}", daemon=True)
        self.reader, self.number = reader, number
        self.jobs = queue.Queue()            # _Gop, then None at the end
        self.out = queue.Queue()             # (slot, pts), an exception, then _END
        self.free = queue.Queue()            # slots the consumer gave back
        self.slots, self.limit = [], _REORDER
        # The session's stream runs ahead of the consumer's: the decoder's
        # output copy queued behind a MOG2 grid that fills the SMs would
        # otherwise wait for all of that grid's blocks to be dispatched, and
        # the decoder's surface with it
        greatest = _fastmog.device_properties(reader.device)["stream_priorities"][1]
        self.stream = _fastmog.Stream(device=reader.device, priority=greatest)

    def _slot(self):
        while True:
            try:
                return self.free.get(timeout=0 if len(self.slots) < self.limit else _POLL)
            except queue.Empty:
                if self.reader.stopping.is_set():
                    raise _Stopped from None
                if len(self.slots) < self.limit:
                    slot = _Slot(self.reader.height, self.reader.width, self.reader.device)
                    self.slots.append(slot)
                    return slot

    def _emit(self, frame):
        r, s = self.reader, self.stream
        slot = self._slot()
        if slot.used:
            s.wait(slot.done)                # the caller's work on the old frame comes first
        shape = (r.height * 3 // 2, r.width, 1)
        planes = frame.cuda()
        (luma, luma_pitch), (chroma, chroma_pitch) = (_address(p, r.width) for p in planes)
        if chroma == luma + luma_pitch * r.height and chroma_pitch == luma_pitch:
            # the usual surface, chroma right below luma: one copy of both
            parts = [(luma, luma_pitch, r.height * 3 // 2, planes, slot.frame)]
        else:
            parts = [(luma, luma_pitch, r.height, planes[0], slot.y),
                     (chroma, chroma_pitch, r.height // 2, planes[1], slot.uv)]
        sources = [(_fastmog.asgpumat(DevicePointer(address, (rows, r.width), pitch=pitch,
                                                    owner=owner, readonly=True), stream=s), dst)
                   for address, pitch, rows, owner, dst in parts]
        # the output copy on the session's stream is the decoder's GPU work on the
        # timeline; its events are recorded beside the copies in one C call, so
        # the time this thread waits for the GIL is not in the copy's GPU window
        if r.timer is not None:
            r.timer.gpu_copies("VideoReader.decode", "NVDEC output copy", s, sources, shape,
                               session=self.number)
        else:
            for src, dst in sources:
                src.copy_to(dst, stream=s)
        for src, _ in sources:
            src.close()
        slot.ready.record(stream=s)
        self.out.put((slot, frame.getPTS()))

    def run(self):
        r = self.reader
        decoder = None
        try:
            decoder = r.probe.new_decoder(self.stream)
            index = 0
            while True:
                gop = self.jobs.get()
                if gop is None:
                    break
                self.limit = max(self.limit, _AHEAD * len(gop.packets) + _REORDER)
                index = gop.first
                for data, pts in gop.packets:
                    packet = r.nvc.PacketData()
                    packet.bsl_data, packet.bsl, packet.pts = data.ctypes.data, data.size, pts
                    for frame in self._decode(decoder, packet, index):
                        self._emit(frame)
                        index += 1
            for frame in self._decode(decoder, r.nvc.PacketData(), index):
                self._emit(frame)
            self.out.put(_END)
        except _Stopped:
            pass
        except BaseException as e:           # handed to the consumer, in frame order
            self.out.put(e)
        finally:
            decoder = None

    def _decode(self, decoder, packet, index):
        r = self.reader
        if r.stopping.is_set():
            raise _Stopped
        start = time.perf_counter_ns()       # the Timer's clock
        try:
            return decoder.Decode(packet)
        except Exception as e:
            raise DecodeError(f"{r.source}: NVDEC failed near frame {index} ({r.codec} "
                              f"{r.width}x{r.height}): {e}", frame_index=index) from None
        finally:
            if r.timer is not None:
                r.timer._decoder_call("VideoReader.decode", start, time.perf_counter_ns() - start,
                                      (r.height * 3 // 2, r.width, 1), "NVDEC", self.number)

    def close(self):
        self.join()
        self.stream.synchronize()
        for slot in self.slots:
            slot.close()
        self.stream.close()


class _Stopped(Exception):
    """close() was called: a thread leaves at once."""


class ParallelNvdecDecoder:
    """The reader's NVDEC backend with `sessions` sessions over one video."""

    name = "nvdec"

    def __init__(self, source, stream, device, open_timeout, sessions, timer=None):
        self.timer = timer                   # each session records its decodes and copies here
        self.probe = NvdecDecoder(source, stream, device, open_timeout, decoder=False)
        p = self.probe
        self.nvc, self.source, self.device, self.stream = p.nvc, source, device, stream
        self.width, self.height, self.codec = p.width, p.height, p.codec
        self.declared, self.fps = p.declared, p.fps
        self.engines, self.time_base = p.engines, p.time_base
        self.sessions = sessions
        self.gops = []                       # the GOPs dispatched so far, by number
        self.cut = threading.Condition()     # guards gops, demux_done, consumer_gop
        self.demux_done, self.demux_error, self.consumer_gop = False, None, 0
        self.stopping = threading.Event()
        self.workers = [_Session(self, k) for k in range(sessions)]
        self.demuxer = threading.Thread(target=self._demux, name="fastmog demuxer", daemon=True)
        self.started, self.closed = False, False

    # ---- the demuxer thread ------------------------------------------------------

    def _dispatch(self, gop):
        with self.cut:
            while gop.number >= self.consumer_gop + (_AHEAD + 1) * self.sessions:
                if self.stopping.is_set():
                    raise _Stopped
                self.cut.wait(_POLL)
            self.gops.append(gop)
            self.cut.notify_all()
        self.workers[gop.number % self.sessions].jobs.put(gop)

    def _demux(self):
        gop, frames = None, 0
        try:
            for packet in self.probe.demuxer:
                if self.stopping.is_set():
                    raise _Stopped
                if not packet.bsl:
                    continue
                raw = ctypes.string_at(packet.bsl_data, packet.bsl)
                if gop is None or _first_picture_is_idr(raw[:65536], self.codec):
                    if gop is not None:
                        self._dispatch(gop)
                    gop = _Gop(len(self.gops), frames)
                gop.packets.append((np.frombuffer(raw, np.uint8), packet.pts))
                gop.pts.add(packet.pts)
                frames += 1
            if gop is not None:
                self._dispatch(gop)
        except _Stopped:
            return
        except Exception as e:
            self.demux_error = DecodeError(f"{self.source}: demuxing failed at frame {frames}: "
                                           f"{e}", frame_index=frames)
        finally:
            for w in self.workers:
                w.jobs.put(None)
            with self.cut:
                self.demux_done = True
                self.cut.notify_all()

    # ---- the consumer --------------------------------------------------------------

    def _next_gop(self, number):
        with self.cut:
            while number >= len(self.gops) and not self.demux_done:
                self.cut.wait(_POLL)
            return self.gops[number] if number < len(self.gops) else None

    def _take(self, worker, index):
        while True:
            try:
                item = worker.out.get(timeout=_POLL)
                break
            except queue.Empty:
                if not worker.is_alive() and worker.out.empty():
                    item = _END
                    break
        if item is _END:
            raise self._broken(index, "its session ran out of frames")
        if isinstance(item, DecodeError):
            raise self._broken(index, str(item).split(": ", 1)[-1]) from None
        if isinstance(item, BaseException):
            raise item
        return item

    def _broken(self, index, why):
        # The index is the consumer's: every frame before it was handed out.
        return DecodeError(f"{self.source}: frame {index} could not be decoded ({why}): the "
                           f"stream is truncated or corrupt", frame_index=index)

    def frames(self):
        if not self.started:
            self.started = True
            for w in self.workers:
                w.start()
            self.demuxer.start()
        index, previous, gop_number = 0, None, 0
        while (gop := self._next_gop(gop_number)) is not None:
            worker = self.workers[gop_number % self.sessions]
            for _ in gop.packets:
                slot, pts = self._take(worker, index)
                if pts not in gop.pts:
                    raise self._broken(index, "NVDEC dropped frames of its GOP")
                if previous is not None:
                    self._give_back(previous)
                # timed with the reader's Timer (the main job passes one, with no
                # profile() block): the wait names the decode it is behind, so a
                # later download's wait is charged along the chain to the decoder
                self.stream.wait(slot.ready, timer=self.timer)
                previous = (worker, slot)
                yield slot.y, slot.uv, None, self._time(pts)
                index += 1
            gop_number += 1
            with self.cut:
                self.consumer_gop = gop_number
                self.cut.notify_all()
        if self.demux_error is not None:
            raise self.demux_error
        if index < self.declared:
            raise truncated(self.source, index, self.declared)

    def _give_back(self, taken):
        worker, slot = taken
        slot.done.record(stream=self.stream)
        slot.used = True
        worker.free.put(slot)

    def _time(self, pts):
        return pts * self.time_base if self.time_base is not None else None

    def close(self):
        if self.closed:
            return
        self.closed = True
        self.stopping.set()
        with self.cut:
            self.cut.notify_all()
        if self.started:
            self.demuxer.join()
        for w in self.workers:
            w.jobs.put(None)
            if self.started:
                w.close()
            else:
                w.stream.close()
        self.probe.close()
