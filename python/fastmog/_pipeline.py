"""An overlapped host pipeline: host frames in, host masks out, in order.

For batch b the upload runs on one stream, MOG2 on a second and the download
on a third, so the upload of batch b+1, the kernel of batch b and the download
of batch b-1 overlap; a ring of `depth` slots (pinned host buffers, device
frames and masks, `batch` frames each) is reused, so the steady state
allocates nothing. Events order the three streams on the GPU; the host waits
only for the masks it is about to hand out, and for a ring slot before
refilling it. With batch > 1 the kernel takes a slot's frames in one pass
over the model (apply_batch); batch="auto" lets the first launches' timings
pick it (_auto_batch). With download=False the masks stay on the GPU: the
ring hands out its device masks once their kernel has run, and the download
stream is left idle.
"""
import numpy as np

from . import _fastmog
from ._auto_batch import AutoBatch


class _Slot:
    def __init__(self, shape, dtype, device, batch, download, timed):
        height = shape[0]
        self.frame = _fastmog.GpuMat((batch * height,) + tuple(shape[1:]), dtype, device=device)
        self.mask = _fastmog.GpuMat((batch * height, shape[1]), np.uint8, device=device)
        self.host_mask = (_fastmog.pinned_empty((batch, height, shape[1]), np.uint8)
                          if download else None)
        self.frames = [self.frame[k * height:(k + 1) * height] for k in range(batch)]
        self.masks = [self.mask[k * height:(k + 1) * height] for k in range(batch)]
        self.count = 0               # frames in this slot's current batch
        self.uploaded = _fastmog.Event(timing=False, device=device)
        self.applied = _fastmog.Event(timing=False, device=device)
        self.downloaded = _fastmog.Event(timing=False, device=device)
        self.busy = False            # events recorded and not yet waited for
        self.want = batch            # frames this batch takes before its launch
        # batch="auto": the three stages' start and end on their streams
        # (upload, kernel, download), when this batch is timed
        self.marks = ([_fastmog.Event(device=device) for _ in range(6)] if timed else None)
        self.timed = False

    def close(self):
        for m in self.frames + self.masks + [self.frame, self.mask]:
            m.close()
        for e in self.marks or ():
            e.close()


def pipeline(subtractor, frames, *, streams, depth=4, batch=1, learning_rate=-1.0, copy=False,
             timer=None, download=True):
    """Runs `subtractor` over an iterable of host frames (numpy arrays of one
    shape and dtype) and yields the host masks in order.

    streams: three fastmog.Stream objects (upload, compute, download) on the
    subtractor's device; fastmog creates none. Pinned frames are uploaded
    directly; pageable ones are first copied (by several threads) into pooled
    pinned memory.
    batch: frames per kernel launch (apply_batch: the model is read and
    written once per batch instead of once per frame, for the same masks).
    The first mask comes out once `batch` frames have gone in, so a larger
    batch trades latency (batch frames, plus the ring) for GPU time; a live
    camera wants 1. batch="auto" (recorded video) times the first launches
    and keeps the smallest K of 1, 2, 4 and 8 whose kernel takes under 0.9 of
    the copies' time (if none, the one whose kernel was fastest): a batch
    helps only where the kernel is the slowest stage.
    The yielded mask is a pinned ring buffer, valid until the next mask is
    taken; pass copy=True for arrays of your own. A pinned frame is read
    asynchronously: leave it unchanged until its mask has come back.

    download=False: nothing leaves the GPU; the yielded masks are the ring's
    device masks (GpuMat views, valid until the next is taken, their kernel
    done). Queue work on them on the compute stream, streams[1]: the ring
    rewrites a mask in that stream's order, after what was queued there.
    """
    for host, device in _stages(subtractor, frames, streams, depth, batch, learning_rate, copy,
                                timer, download):
        yield host if download else device


def _stages(subtractor, frames, streams, depth, batch, learning_rate, copy, timer, download):
    """The pipeline's masks as (host mask, device mask) pairs; the host mask
    is None without download. The main job's frame loop takes both."""
    try:
        up, compute, down = streams
    except (TypeError, ValueError):
        raise TypeError("streams= must be three fastmog.Stream objects "
                        "(upload, compute, download)") from None
    if depth < 2:
        raise ValueError("depth must be at least 2")
    # the main job passes its own AutoBatch, to keep one choice over segments
    auto = AutoBatch() if batch == "auto" else batch if isinstance(batch, AutoBatch) else None
    if auto is None and (not isinstance(batch, int) or isinstance(batch, bool) or batch < 1):
        raise ValueError("batch must be a whole number of frames, at least 1, or 'auto'")
    # Slots are made when first filled, and remade when an automatic batch
    # outgrows them: the ring's pinned masks cost as much as a few hundred
    # 4K frames' processing to allocate, so a K never used is never paid for.
    slots = [None] * depth
    pending = []                     # slots holding masks not yet handed out, in order
    filling = None                   # the slot taking frames now
    taken = 0                        # batches started
    try:
        for i, frame in enumerate(frames):
            frame = np.asarray(frame)
            if i == 0:
                shape, dtype = frame.shape, frame.dtype
            elif frame.shape != shape or frame.dtype != dtype:
                raise ValueError(f"frame {i} is {frame.shape} {frame.dtype}, the first was "
                                 f"{shape} {dtype}")
            if filling is None:
                at = taken % depth
                taken += 1
                while slots[at] is not None and slots[at].busy:
                    # the ring is full: hand out the oldest masks to free a slot
                    yield from _take(pending.pop(0), copy, timer, auto)
                want = batch if auto is None else auto.batch
                if slots[at] is None or len(slots[at].frames) < want:
                    if slots[at] is not None:
                        slots[at].close()   # released once the streams are past it (devmem)
                        slots[at] = None
                    slots[at] = _Slot(shape, dtype, subtractor.device, want, download,
                                      auto is not None)
                filling = slots[at]
                up.wait(filling.applied, timer=timer)      # the kernel no longer reads it
                filling.want = want
                filling.timed = auto is not None and auto.timing
                if filling.timed:
                    up.record(filling.marks[0])
            # A pageable frame is staged by upload itself: copied into pooled
            # pinned memory by several threads, then sent while the next
            # frame is read.
            filling.frames[filling.count].upload(frame, stream=up, timer=timer)
            filling.count += 1
            if filling.count == filling.want:
                _launch(subtractor, filling, up, compute, down, learning_rate, timer)
                pending.append(filling)
                filling = None
        if filling is not None and filling.count:
            _launch(subtractor, filling, up, compute, down, learning_rate, timer)
            pending.append(filling)
        while pending:
            yield from _take(pending.pop(0), copy, timer, auto)
    finally:
        for slot in slots:
            if slot is None:
                continue
            if slot.busy:
                slot.downloaded.synchronize()
            slot.close()


def _launch(subtractor, slot, up, compute, down, learning_rate, timer):
    """Queues MOG2 on the slot's frames and the download of their masks."""
    n = slot.count
    marks = slot.marks if slot.timed else None
    if marks:
        up.record(marks[1])
    up.record(slot.uploaded)
    compute.wait(slot.uploaded, timer=timer)
    compute.wait(slot.downloaded, timer=timer)     # the mask buffer is free
    if marks:
        compute.record(marks[2])
    if n == 1:
        subtractor.apply(slot.frames[0], learning_rate, stream=compute, fgmask=slot.masks[0],
                         timer=timer)
    else:
        subtractor.apply_batch(slot.frames[:n], learning_rate, stream=compute,
                               fgmasks=slot.masks[:n], timer=timer)
    if marks:
        compute.record(marks[3])
    compute.record(slot.applied)
    down.wait(slot.applied, timer=timer)
    if marks:
        down.record(marks[4])
    if slot.host_mask is None:
        pass                                        # the masks stay on the GPU
    elif n == len(slot.masks):
        slot.mask.download(slot.host_mask.reshape(-1, slot.host_mask.shape[2]), stream=down,
                           blocking=False, timer=timer)
    else:
        for k in range(n):
            slot.masks[k].download(slot.host_mask[k], stream=down, blocking=False, timer=timer)
    if marks:
        down.record(marks[5])
    down.record(slot.downloaded)
    slot.busy = True


def _take(slot, copy, timer, auto):
    """The slot's (host, device) masks, in order, once their download is
    done (without download: once their kernel has run). A timed batch's
    figures go to `auto` first: its events have all been reached."""
    (slot.applied if slot.host_mask is None else slot.downloaded).synchronize(timer=timer)
    n, slot.count = slot.count, 0
    slot.busy = False
    if slot.timed and n == slot.want:              # a partial last batch tells nothing
        m = slot.marks
        auto.add(n, m[2].elapsed_time(m[3]), m[0].elapsed_time(m[1]),
                 0.0 if slot.host_mask is None else m[4].elapsed_time(m[5]))
    slot.timed = False
    for k in range(n):
        if slot.host_mask is None:
            yield None, slot.masks[k]
        else:
            yield (np.array(slot.host_mask[k]) if copy else slot.host_mask[k]), slot.masks[k]
