"""The one frame loop: the frames of one source through one subtractor to
its masks, for the command line and every Dask worker alike.

A source's frames take one of three paths: NVDEC frames are applied where
they lie, on the GPU, one by one; host frames go through the overlapped
fastmog.pipeline when a GPU is used; otherwise through the host reference.
On the GPU paths a mask comes to the host only when something there reads
it (download=True): a consumer of device masks (on_device_mask: the motion
detector's GPU face) takes it where it lies.
"""
import dataclasses
import itertools
import time

import numpy as np

from .. import _fastmog, _pipeline, cpu
from .._auto_batch import AutoBatch
from . import _signals
from ._checks import PIPELINE_DEPTH


def subtractor(mog2_kwargs, device, on_gpu):
    """MOG2 with these parameters on GPU `device`, or the host reference."""
    if on_gpu:
        return _fastmog.BackgroundSubtractorMOG2(**mog2_kwargs, device=device)
    return cpu.BackgroundSubtractorMOG2(**mog2_kwargs)


def open_streams(device, on_gpu):
    """upload, compute, download (NVDEC decodes onto compute); none on the host."""
    return [_fastmog.Stream(device=device) for _ in range(3)] if on_gpu else []


@dataclasses.dataclass
class Processed:
    """What the loop did. last_frame, last_mask and background are the last
    frame's, kept when asked (the preview); auto_batch is batch="auto"'s
    choice, where the pipeline made one (host frames of a file on a GPU)."""

    frames: int = 0
    pixels: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    interrupt: KeyboardInterrupt | None = None    # what stopped it: Ctrl-C, SIGTERM, ...
    last_frame: np.ndarray | None = None
    last_mask: np.ndarray | None = None
    background: np.ndarray | None = None
    auto_batch: AutoBatch | None = None


def process(sub, source, writer, *, streams, learning_rate=-1.0, batch=1, timer=None,
            on_mask=None, on_device_mask=None, download=True, progress=None, keep_last=False,
            skip=0, segment=None, on_end=None):
    """Runs every frame of `source` (an opened _sources.Source) through `sub`
    and returns what was done (Processed). Each mask goes to
    on_device_mask(index, mask, stream) on the GPU paths, then to `writer`,
    then to on_mask(index, mask), then to progress.update(count). A mask may
    be a buffer that the next one reuses: copy it to keep it.

    download=False (GPU paths only): the masks stay on the GPU; `writer`
    must take none (NoMasks), on_mask gets None for the mask, and keep_last
    is refused. on_device_mask's mask is a GpuMat whose work is queued on
    `stream` (the compute stream): queue what reads it there.

    streams: [] for the host reference, else (upload, compute, download) on
    sub's device, NVDEC's frames queued on compute. batch: host frames per
    launch on the GPU, or "auto": measured (one frame for a live stream).
    Ctrl-C, SIGTERM or SIGHUP (_signals) end the loop early (`interrupted`),
    keeping what was written.

    skip: the source's first frames are read and left out (a resumed run's);
    on_mask's index counts the frames processed. segment: the overlapped
    pipeline, which runs ahead of the masks it hands out, runs `segment`
    frames at a time, so that after every segment's last mask the model has
    seen exactly the frames processed (a checkpoint's moment). on_end(done):
    called when the frames ended (not when interrupted), before the streams
    close, so it may still queue work on them.

    The closing order, whatever happens: the progress line, the writer, the
    source's decoder, then the streams (NVDEC and the pipeline work on them).
    """
    done = Processed()
    last = {}
    if batch == "auto" and streams and not source.on_device:
        # one choice over every segment; a live stream's mask comes at once
        batch = 1 if source.arrivals is not None else AutoBatch()
        done.auto_batch = batch if isinstance(batch, AutoBatch) else None
    writer.start(source.fps)
    started = time.perf_counter()
    try:
        try:
            if not download and (not streams or keep_last or writer.path is not None):
                raise ValueError("masks stay on the GPU only on a GPU path, with no mask "
                                 "writer and no kept last mask")
            for mask, device_mask in _masks(sub, source, streams, learning_rate, batch, timer,
                                            last, keep_last, skip, segment, download):
                with _signals.held():      # a mask written is a mask counted
                    if on_device_mask is not None:
                        on_device_mask(done.frames, device_mask, streams[1])
                    if mask is not None:
                        writer.write(mask)
                    if on_mask is not None:
                        on_mask(done.frames, mask)
                    done.frames += 1
                    done.pixels += device_mask.shape[0] * device_mask.shape[1] \
                        if mask is None else mask.size
                    last["mask"] = mask
                if progress is not None:
                    progress.update(done.frames)
        except KeyboardInterrupt as e:
            done.interrupted, done.interrupt = True, e
        finally:
            done.seconds = time.perf_counter() - started
            if progress is not None:
                progress.close()
            writer.close()
            source.close()
        if keep_last and "mask" in last:
            done.last_frame, done.last_mask = last["frame"], np.array(last["mask"])
            done.background = _background(sub, streams)
        if on_end is not None and not done.interrupted:
            on_end(done)
    finally:
        for s in streams:
            s.close()
    return done


def _masks(sub, source, streams, learning_rate, batch, timer, last, keep_last, skip,
           segment, download):
    """The source's masks as (host mask, device mask) pairs, on the path its
    frames take: the host mask is None when not downloaded, the device mask
    None on the host path. The frame last taken is kept in last["frame"]
    when asked."""

    def kept(frame):
        if keep_last:
            last["frame"] = frame
        return frame

    frames = iter(source)
    for _ in itertools.islice(frames, skip):
        pass
    if source.on_device:
        return _device_masks(sub, frames, streams[1], learning_rate, timer, last, keep_last,
                             download)
    if streams:
        host = (kept(f) for f in _host_frames(source, frames, batch))
        return _pipelined(sub, host, streams, batch, learning_rate, timer, segment, download)
    return ((sub.apply(kept(f), learning_rate, timer=timer), None) for f in frames)


def _pipelined(sub, frames, streams, batch, learning_rate, timer, segment, download):
    """fastmog.pipeline's (host, device) masks of the frames, in segments of
    `segment` frames when given (each drained before the next begins; an
    automatic batch is chosen once, over them all)."""
    def run(chunk):
        return _pipeline._stages(sub, chunk, streams, PIPELINE_DEPTH, batch, learning_rate,
                                 False, timer, download)

    if segment is None:
        yield from run(frames)
        return
    while True:
        chunk = itertools.islice(frames, segment)
        first = next(chunk, None)
        if first is None:
            return
        yield from run(itertools.chain([first], chunk))


def _host_frames(source, frames, batch):
    """Host frames for a pipeline of `batch` frames per launch (or an
    AutoBatch's). A reader's pinned ring buffer is passed as it is only while
    the ring outlasts the frames the pipeline keeps in flight (it uploads
    pinned frames asynchronously); otherwise copied. An automatic batch only
    grows while it measures, so each frame is judged by the largest K a
    launch may yet hold (a frame pulled now may land in the next, larger
    batch, and waits behind it)."""
    if source.reader is None:
        return frames
    depth = source.reader.depth
    if isinstance(batch, int):
        return frames if depth > PIPELINE_DEPTH * batch else (np.array(f) for f in frames)
    return (f if depth > PIPELINE_DEPTH * batch.ahead else np.array(f) for f in frames)


def _device_masks(sub, frames, stream, learning_rate, timer, last, keep_last, download):
    """NVDEC frames: already on the GPU, so no upload (grey: the luma plane as
    it is; colour: converted from NV12 on `stream`). A frame's planes are valid
    until the next is taken, and everything here is queued on `stream` before
    that. Yields (host mask, device mask); the host mask is None without
    download."""
    host_mask = None
    for f in frames:
        frame = f.as_input(stream)
        mask = sub.apply(frame, learning_rate, stream=stream, timer=timer)
        if download:
            if host_mask is None:
                host_mask = _fastmog.pinned_empty(mask.shape, np.uint8)
            mask.download(host_mask, stream=stream, timer=timer)
        if keep_last:
            last["frame"] = frame.download(stream=stream)
        yield host_mask, mask


def _background(sub, streams):
    """The model's background image, on the host."""
    if not streams:
        return sub.get_background_image()
    s = streams[0]
    return sub.get_background_image(stream=s).download(stream=s)
