"""Host time per call of apply and apply_batch on 64x64 device frames, where
the GPU work is negligible: what a build adds on the host, for comparing two
builds in one run (PYTHONPATH=<other build>/python python benchmarks/apply_host_cost.py old)."""
import sys
import time

import numpy as np

import fastmog


def per_call_us(call, calls, stream):
    """Best and median of 5 timed loops of `calls` calls, in microseconds."""
    for _ in range(200):
        call()
    stream.synchronize()
    loops = []
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(calls):
            call()
        loops.append((time.perf_counter_ns() - start) / calls / 1e3)
        stream.synchronize()
    return min(loops), sorted(loops)[2]


def main():
    tag = sys.argv[1] if len(sys.argv) > 1 else "this"
    s = fastmog.Stream()
    frames = [fastmog.GpuMat.from_array(np.full((64, 64), 9 + i, np.uint8), stream=s)
              for i in range(16)]
    masks = [fastmog.GpuMat((64, 64)) for _ in range(16)]
    sub = fastmog.BackgroundSubtractorMOG2()
    rows = (("apply fgmask", 20000, lambda: sub.apply(frames[0], stream=s, fgmask=masks[0])),
            ("apply own mask", 20000, lambda: sub.apply(frames[0], stream=s)),
            ("apply_batch 1", 20000, lambda: sub.apply_batch(frames[:1], stream=s,
                                                             fgmasks=masks[:1])),
            ("apply_batch 16", 4000, lambda: sub.apply_batch(frames, stream=s, fgmasks=masks)))
    print(f"{fastmog.__file__} on {fastmog.device_properties()['name']}")
    for name, calls, call in rows:
        best, median = per_call_us(call, calls, s)
        print(f"{tag:5s} {name:15s} best {best:6.2f} us  median {median:6.2f} us")


if __name__ == "__main__":
    main()
