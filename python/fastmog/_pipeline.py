"""An overlapped host pipeline: host frames in, host masks out, in order.

For batch b the upload runs on one stream, MOG2 on a second and the download
on a third, so the upload of batch b+1, the kernel of batch b and the download
of batch b-1 overlap; a ring of `depth` slots (pinned host buffers, device
frames and masks, `batch` frames each) is reused, so the steady state
allocates nothing. Events order the three streams on the GPU; the host waits
only for the masks it is about to hand out, and for a ring slot before
refilling it. With batch > 1 the kernel takes a slot's frames in one pass
over the model (apply_batch). With download=False the masks stay on the GPU:
the ring hands out its device masks once their kernel has run, and the
download stream is left idle.
"""
import numpy as np

from . import _fastmog


class _Slot:
    def __init__(self, shape, dtype, device, batch, download):
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

    def close(self):
        for m in self.frames + self.masks + [self.frame, self.mask]:
            m.close()


def pipeline(subtractor, frames, *, streams, depth=3, batch=1, learning_rate=-1.0, copy=False,
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
    batch trades latency (batch frames, plus the ring) for GPU time; recorded
    video wants 8 or more, a live camera 1.
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
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise ValueError("batch must be a whole number of frames, at least 1")
    slots = []
    pending = []                     # slots holding masks not yet handed out, in order
    filling = None                   # the slot taking frames now
    taken = 0                        # batches started
    try:
        for i, frame in enumerate(frames):
            frame = np.asarray(frame)
            if not slots:
                shape, dtype = frame.shape, frame.dtype
                slots = [_Slot(shape, dtype, subtractor.device, batch, download)
                         for _ in range(depth)]
            elif frame.shape != shape or frame.dtype != dtype:
                raise ValueError(f"frame {i} is {frame.shape} {frame.dtype}, the first was "
                                 f"{shape} {dtype}")
            if filling is None:
                filling = slots[taken % depth]
                taken += 1
                while filling.busy:
                    # the ring is full: hand out the oldest masks to free a slot
                    yield from _take(pending.pop(0), copy, timer)
                up.wait(filling.applied, timer=timer)      # the kernel no longer reads it
            # A pageable frame is staged by upload itself: copied into pooled
            # pinned memory by several threads, then sent while the next
            # frame is read.
            filling.frames[filling.count].upload(frame, stream=up, timer=timer)
            filling.count += 1
            if filling.count == batch:
                _launch(subtractor, filling, up, compute, down, learning_rate, timer)
                pending.append(filling)
                filling = None
        if filling is not None and filling.count:
            _launch(subtractor, filling, up, compute, down, learning_rate, timer)
            pending.append(filling)
        while pending:
            yield from _take(pending.pop(0), copy, timer)
    finally:
        for slot in slots:
            if slot.busy:
                slot.downloaded.synchronize()
            slot.close()


def _launch(subtractor, slot, up, compute, down, learning_rate, timer):
    """Queues MOG2 on the slot's frames and the download of their masks."""
    n = slot.count
    up.record(slot.uploaded)
    compute.wait(slot.uploaded, timer=timer)
    compute.wait(slot.downloaded, timer=timer)     # the mask buffer is free
    if n == 1:
        subtractor.apply(slot.frames[0], learning_rate, stream=compute, fgmask=slot.masks[0],
                         timer=timer)
    else:
        subtractor.apply_batch(slot.frames[:n], learning_rate, stream=compute,
                               fgmasks=slot.masks[:n], timer=timer)
    compute.record(slot.applied)
    down.wait(slot.applied, timer=timer)
    if slot.host_mask is None:
        pass                                        # the masks stay on the GPU
    elif n == len(slot.masks):
        slot.mask.download(slot.host_mask.reshape(-1, slot.host_mask.shape[2]), stream=down,
                           blocking=False, timer=timer)
    else:
        for k in range(n):
            slot.masks[k].download(slot.host_mask[k], stream=down, blocking=False, timer=timer)
    down.record(slot.downloaded)
    slot.busy = True


def _take(slot, copy, timer):
    """The slot's (host, device) masks, in order, once their download is
    done (without download: once their kernel has run)."""
    (slot.applied if slot.host_mask is None else slot.downloaded).synchronize(timer=timer)
    n, slot.count = slot.count, 0
    slot.busy = False
    for k in range(n):
        if slot.host_mask is None:
            yield None, slot.masks[k]
        else:
            yield (np.array(slot.host_mask[k]) if copy else slot.host_mask[k]), slot.masks[k]
