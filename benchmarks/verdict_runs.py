"""Three of issue 22's four runs on the GPU, each ending with the report's
verdict: pinned 4K frames through fastmog.pipeline (PCIe), device-resident
frames through apply_batch (kernels), and a Python loop that sleeps between
frames (the host). The NVDEC run needs the reader wired to Timer.gpu_span.

    python benchmarks/verdict_runs.py [--report]
"""
import sys
import time

import numpy as np

import fastmog


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


def main():
    full = "--report" in sys.argv
    for name, run in (("pinned pipeline", pinned_pipeline), ("device apply_batch",
                                                               device_apply_batch),
                      ("sleepy Python loop", sleepy_loop)):
        t = run()
        text = t.report()
        print(f"== {name}")
        print(text if full else text.splitlines()[-1])


if __name__ == "__main__":
    main()
