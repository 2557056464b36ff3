"""An overlapped host pipeline: host frames in, host masks out, in order.

For frame i the upload runs on one stream, MOG2 on a second and the download
on a third, so the upload of frame i+1, the kernel of frame i and the download
of frame i-1 overlap; a ring of `depth` slots (pinned host buffers, device
frames and masks) is reused, so the steady state allocates nothing. Events
order the three streams on the GPU; the host waits only for the mask it is
about to hand out, and for a ring slot before refilling it.
"""
import numpy as np

from . import _fastmog


class _Slot:
    def __init__(self, shape, dtype, device):
        self.frame = _fastmog.GpuMat(shape, dtype, device=device)
        self.mask = _fastmog.GpuMat(shape[:2], np.uint8, device=device)
        self.host_mask = _fastmog.pinned_empty(shape[:2], np.uint8)
        self.uploaded = _fastmog.Event(timing=False, device=device)
        self.applied = _fastmog.Event(timing=False, device=device)
        self.downloaded = _fastmog.Event(timing=False, device=device)
        self.busy = False            # events recorded and not yet waited for

    def close(self):
        self.frame.close()
        self.mask.close()


def pipeline(subtractor, frames, *, streams, depth=3, learning_rate=-1.0, copy=False,
             timer=None):
    """Runs `subtractor` over an iterable of host frames (numpy arrays of one
    shape and dtype) and yields the host masks in order.

    streams: three fastmog.Stream objects (upload, compute, download) on the
    subtractor's device; fastmog creates none. Pinned frames are uploaded
    directly; pageable ones are first copied (by several threads) into pooled
    pinned memory.
    The yielded mask is a pinned ring buffer, valid until the next mask is
    taken; pass copy=True for arrays of your own. A pinned frame is read
    asynchronously: leave it unchanged until its mask has come back.
    """
    try:
        up, compute, down = streams
    except (TypeError, ValueError):
        raise TypeError("streams= must be three fastmog.Stream objects "
                        "(upload, compute, download)") from None
    if depth < 2:
        raise ValueError("depth must be at least 2")
    slots = []
    pending = []                     # slots holding a mask not yet handed out, in order
    try:
        for i, frame in enumerate(frames):
            frame = np.asarray(frame)
            if not slots:
                shape, dtype = frame.shape, frame.dtype
                slots = [_Slot(shape, dtype, subtractor.device) for _ in range(depth)]
            elif frame.shape != shape or frame.dtype != dtype:
                raise ValueError(f"frame {i} is {frame.shape} {frame.dtype}, the first was "
                                 f"{shape} {dtype}")
            slot = slots[i % depth]
            if slot.busy:
                # the ring is full: hand out the oldest mask to free its slot
                yield _take(pending.pop(0), copy, timer)
            # A pageable frame is staged by upload itself: copied into pooled
            # pinned memory by several threads, then sent while the next
            # frame is read.
            up.wait(slot.applied, timer=timer)             # the kernel no longer reads it
            slot.frame.upload(frame, stream=up, timer=timer)
            up.record(slot.uploaded)
            compute.wait(slot.uploaded, timer=timer)
            compute.wait(slot.downloaded, timer=timer)     # the mask buffer is free
            subtractor.apply(slot.frame, learning_rate, stream=compute, fgmask=slot.mask,
                             timer=timer)
            compute.record(slot.applied)
            down.wait(slot.applied, timer=timer)
            slot.mask.download(slot.host_mask, stream=down, blocking=False, timer=timer)
            down.record(slot.downloaded)
            slot.busy = True
            pending.append(slot)
        while pending:
            yield _take(pending.pop(0), copy, timer)
    finally:
        for slot in slots:
            if slot.busy:
                slot.downloaded.synchronize()
            slot.close()


def _take(slot, copy, timer):
    slot.downloaded.synchronize(timer=timer)
    slot.busy = False
    return np.array(slot.host_mask) if copy else slot.host_mask
