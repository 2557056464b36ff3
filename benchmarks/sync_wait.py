"""What a call that waits for its own GPU work costs beyond that work, and
where: for a 4K BGR upload, MOG2 apply on a 4K BGR frame and a 4K mask
download (pinned host memory, one stream), the host's wall time per call
(queue + wait) waited for in several ways, beside CUPTI's duration of the
same work from a traced pass:

  fastmog sync mode     the call with Timer(sync=True), as cProfile sees it
  Stream.synchronize    the call without a timer, then s.synchronize()
  cudaStreamSynchronize CuPy's runtime call on the same stream
  flag from the GPU     cuStreamWriteValue32 of a counter into pinned memory
                        right after the work, the host polling that word

and the host cost of the driver calls a timer could add per call
(cuStreamWaitValue32, cuStreamWriteValue32, cudaEventRecord).

    python benchmarks/sync_wait.py [--iters 200]

Needs a GPU, CuPy, torch with CUPTI and fastmog built.
"""
import ctypes
import sys
import time

import numpy as np

import fastmog

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cupti_check import cupti_durations, mean, pct  # noqa: E402

H, W = 2160, 3840


def main():
    import cupy as cp

    iters = int(sys.argv[sys.argv.index("--iters") + 1]) if "--iters" in sys.argv else 200
    cuda = ctypes.CDLL("libcuda.so.1")
    write_value = cuda.cuStreamWriteValue32_v2
    write_value.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    wait_value = cuda.cuStreamWaitValue32_v2
    wait_value.argtypes = write_value.argtypes

    rng = np.random.default_rng(3)
    s = fastmog.Stream()
    host = fastmog.pinned_empty((H, W, 3), np.uint8)
    host[...] = rng.integers(0, 255, host.shape, dtype=np.uint8)
    out = fastmog.pinned_empty((H, W), np.uint8)
    frame = fastmog.GpuMat((H, W, 3), np.uint8)
    mask = fastmog.GpuMat((H, W), np.uint8)
    sub = fastmog.BackgroundSubtractorMOG2()
    flag_ptr = cp.cuda.runtime.hostAlloc(4, 0)     # pinned, mapped (UVA)
    flag = np.ctypeslib.as_array((ctypes.c_uint32 * 1).from_address(flag_ptr))
    flag[0] = 0
    counter = [0]

    ops = {
        "upload 4K BGR": (lambda t: frame.upload(host, stream=s, timer=t), "HtoD"),
        "apply 4K BGR": (lambda t: sub.apply(frame, stream=s, fgmask=mask, timer=t),
                         "mog2_apply_kernel"),
        "download 4K mask": (lambda t: mask.download(out, stream=s, blocking=False, timer=t),
                             "DtoH"),
        "download 4K mask, blocking": (lambda t: mask.download(out, stream=s, timer=t), "DtoH"),
    }

    def by_flag():
        counter[0] += 1
        rc = write_value(s.handle, flag_ptr, counter[0], 0)
        if rc != 0:
            raise RuntimeError(f"cuStreamWriteValue32: {rc}")
        while flag[0] != counter[0]:
            pass

    def cupy_sync():
        cp.cuda.runtime.streamSynchronize(s.handle)

    timers = {}

    def timer(sync):
        # one per op and mode, never reset: a reset destroys the timer's events
        # and clock anchor, which the next call would then make again
        return timers.setdefault((current[0], sync), fastmog.Timer(sync=sync, nvtx=False))

    current = [None]
    waits = {
        "Stream.synchronize": (lambda op: (op(None), s.synchronize())),
        "cudaStreamSynchronize": (lambda op: (op(None), cupy_sync())),
        "flag from the GPU": (lambda op: (op(None), by_flag())),
        "timer, Stream.synchronize": (lambda op: (op(timer(False)), s.synchronize())),
        "fastmog sync mode": (lambda op: op(timer(True))),
    }
    for op, _ in ops.values():
        for _ in range(20):
            op(None)
    s.synchronize()

    print(f"fastmog on {fastmog.device_properties()['name']}; {iters} calls each; "
          "host wall time per call (queue + wait), median and p90, us; "
          "its excess over CUPTI's mean duration")
    for label, (op, key) in ops.items():
        current[0] = label
        cupti = mean(cupti_durations(lambda: [(op(None), s.synchronize())
                                              for _ in range(iters)]).get(key, []))
        print(f"{label}: CUPTI {cupti:.2f} us")
        for name, wait in waits.items():
            times = []
            for _ in range(iters):
                t0 = time.perf_counter_ns()
                wait(op)
                times.append((time.perf_counter_ns() - t0) / 1e3)
            med = pct(times, 0.5)
            print(f"  {name:26s} {med:9.2f} {pct(times, 0.9):9.2f}   +{med - cupti:6.2f} "
                  f"({100 * (med - cupti) / cupti:+5.2f}%)")
        # the call alone, on a stream with nothing queued: the host's part
        for name, t in (("no timer", None), ("timer", timer(False))):
            times = []
            for _ in range(iters):
                s.synchronize()
                t0 = time.perf_counter_ns()
                op(t)
                times.append((time.perf_counter_ns() - t0) / 1e3)
            print(f"  the call alone, {name:9s} {pct(times, 0.5):9.2f} {pct(times, 0.9):9.2f}")
        s.synchronize()

    # host cost of the driver calls, on a stream with nothing queued
    s.synchronize()
    ev = fastmog.Event()
    calls = {
        "cuStreamWaitValue32 (met)": lambda: wait_value(s.handle, flag_ptr, 0, 0),
        "cuStreamWriteValue32": lambda: write_value(s.handle, flag_ptr, counter[0], 0),
        "Stream.record(event)": lambda: s.record(ev),
    }
    print("host cost per driver call (us, median of 1000, through ctypes or fastmog):")
    for name, call in calls.items():
        times = []
        for _ in range(1000):
            t0 = time.perf_counter_ns()
            call()
            times.append((time.perf_counter_ns() - t0) / 1e3)
        s.synchronize()
        print(f"  {name:28s} {pct(times, 0.5):6.2f}")
    cp.cuda.runtime.freeHost(flag_ptr)


if __name__ == "__main__":
    main()
