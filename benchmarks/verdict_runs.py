"""Issue 22's four runs on the GPU, each ending with the report's verdict:
pinned 4K frames through fastmog.pipeline (PCIe), device-resident frames
through apply_batch (kernels), a Python loop that sleeps between frames (the
host), and a video decoded by NVDEC sessions into MOG2 on the GPU (the
decoders; needs PyNvVideoCodec and a clip, skipped without them).

    python benchmarks/verdict_runs.py [--report] [--clip VIDEO] [--sessions N] [--png OUT.png]
"""
import sys
import time

import numpy as np

import fastmog
from fastmog.profiling import _view


def pinned_pipeline(n=96, batch=8):
    rng = np.random.default_rng(0)
    frames = [fastmog.pinned_empty((2160, 3840, 3), np.uint8) for _ in range(12)]
    for f in frames:
        f[...] = rng.integers(0, 255, f.shape, dtype=np.uint8)
    sub = fastmog.BackgroundSubtractorMOG2()
    streams = [fastmog.Stream() for _ in range(3)]
    for _ in fastmog.pipeline(sub, (frames[i % 12] for i in range(16)), streams=streams,
                              batch=batch):
        pass
    with fastmog.profile() as t:
        for _ in fastmog.pipeline(sub, (frames[i % 12] for i in range(n)), streams=streams,
                                  batch=batch):
            pass
    return t


def device_apply_batch(calls=30, batch=16):
    s = fastmog.Stream()
    rng = np.random.default_rng(0)
    frames = [fastmog.GpuMat.from_array(rng.integers(0, 255, (2160, 3840), dtype=np.uint8),
                                        stream=s) for _ in range(batch)]
    masks = [fastmog.GpuMat((2160, 3840), np.uint8) for _ in range(batch)]
    sub = fastmog.BackgroundSubtractorMOG2()
    sub.apply_batch(frames, stream=s, fgmasks=masks)
    s.synchronize()
    with fastmog.profile() as t:
        for _ in range(calls):
            sub.apply_batch(frames, stream=s, fgmasks=masks)
        s.synchronize()
    return t


def sleepy_loop(n=30, sleep=0.01):
    s = fastmog.Stream()
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 255, (480, 640, 3), dtype=np.uint8)
    sub = fastmog.BackgroundSubtractorMOG2()
    out = fastmog.pinned_empty((480, 640), np.uint8)
    sub.apply(frame, stream=s).download(out, stream=s)
    with fastmog.profile() as t:
        for _ in range(n):
            time.sleep(sleep)
            sub.apply(frame, stream=s).download(out, stream=s)
    return t


def nvdec_pipeline(clip, sessions):
    """Every frame of `clip` decoded by `sessions` NVDEC sessions, its luma
    through MOG2 and the mask downloaded, as the main job does."""
    stream = fastmog.Stream()
    sub = fastmog.BackgroundSubtractorMOG2()
    host = fastmog.pinned_empty(1, np.uint8)
    with fastmog.profile() as t:
        with fastmog.VideoReader(clip, stream=stream, decode="nvdec", grey=True,
                                 sessions=sessions) as reader:
            for frame in reader:
                mask = sub.apply(frame.as_input(stream), stream=stream)
                if host.shape != mask.shape:
                    host = fastmog.pinned_empty(mask.shape, np.uint8)
                mask.download(host, stream=stream)
    return t


def _option(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main():
    full = "--report" in sys.argv
    clip, sessions = _option("--clip", None), int(_option("--sessions", "7"))
    runs = [("pinned pipeline", pinned_pipeline), ("device apply_batch", device_apply_batch),
            ("sleepy Python loop", sleepy_loop)]
    if clip is not None:
        runs.append((f"NVDEC, {sessions} sessions: {clip}", lambda: nvdec_pipeline(clip, sessions)))
    for name, run in runs:
        t = run()
        png = _option("--png", None)
        if png is not None and name.startswith("NVDEC"):
            picture = _view.timeline_png(t.analysis())
            if picture is not None:
                with open(png, "wb") as f:
                    f.write(picture)
        text = t.report()
        print(f"== {name}")
        print(text if full else text.splitlines()[-1])


if __name__ == "__main__":
    main()
