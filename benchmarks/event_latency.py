"""Where a timed call's GPU window differs from CUPTI's duration of the same
operation: for each operation (a tiny fill, MOG2 on a tiny and on a 4K
frame, nv12_to_bgr, device copies) and what ran right before it on the
stream (nothing, a 4K upload, a kernel), the events' raw window, how long
of it the GPU waited for the host to submit the work (lag), CUPTI's
duration, their difference, what fastmog's calibration takes off for that
transition and what is left after both. If the difference depends on the operation and not only on
the transition, a probe of one tiny kernel cannot stand for every kernel.

    python benchmarks/event_latency.py [--iters 100]

Needs a GPU, torch with CUPTI (torch.profiler) and fastmog built.
"""
import sys

import numpy as np

import fastmog
from fastmog.profiling import _probes

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cupti_check import cupti_trace  # noqa: E402

H, W = 2160, 3840
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def last_per_iteration(events, iters, per_iter):
    """CUPTI durations (us) of the last GPU activity of each iteration, where
    each iteration queued `per_iter` activities and synchronized."""
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATS]
    if len(gpu) != iters * per_iter:
        return None, len(gpu)
    return [float(gpu[i * per_iter + per_iter - 1]["dur"]) for i in range(iters)], len(gpu)


def main():
    iters = int(sys.argv[sys.argv.index("--iters") + 1]) if "--iters" in sys.argv else 100
    rng = np.random.default_rng(2)
    s = fastmog.Stream()
    host = fastmog.pinned_empty((H, W, 3), np.uint8)
    host[...] = rng.integers(0, 255, host.shape, dtype=np.uint8)
    frame = fastmog.GpuMat((H, W, 3), np.uint8)
    frame.upload(host, stream=s)
    grey = fastmog.GpuMat.from_array(np.ascontiguousarray(host[..., 0]), stream=s)
    tiny3 = fastmog.GpuMat((1, 1, 3), np.uint8)
    tiny_grey = fastmog.GpuMat.from_array(rng.integers(0, 255, (8, 8), dtype=np.uint8),
                                          stream=s)
    nv12 = fastmog.GpuMat.from_array(rng.integers(0, 255, (H * 3 // 2, W), dtype=np.uint8),
                                     stream=s)
    bgr = fastmog.GpuMat((H, W, 3), np.uint8)
    small_a, small_b = fastmog.GpuMat((1, 16), np.uint8), fastmog.GpuMat((1, 16), np.uint8)
    big_copy = fastmog.GpuMat((H, W, 3), np.uint8)
    subs = {k: fastmog.BackgroundSubtractorMOG2() for k in ("tiny", "grey", "bgr")}
    masks = {"tiny": fastmog.GpuMat((8, 8)), "grey": fastmog.GpuMat((H, W)),
             "bgr": fastmog.GpuMat((H, W))}

    ops = {
        "fill 1x1 (the probe)": ("kernel", lambda t: tiny3.fill((1, 2, 3), stream=s, timer=t)),
        "MOG2 8x8 grey": ("kernel", lambda t: subs["tiny"].apply(
            tiny_grey, stream=s, fgmask=masks["tiny"], timer=t)),
        "MOG2 4K grey": ("kernel", lambda t: subs["grey"].apply(
            grey, stream=s, fgmask=masks["grey"], timer=t)),
        "MOG2 4K BGR": ("kernel", lambda t: subs["bgr"].apply(
            frame, stream=s, fgmask=masks["bgr"], timer=t)),
        "nv12_to_bgr 4K": ("kernel", lambda t: fastmog.nv12_to_bgr(nv12, stream=s, out=bgr,
                                                                    timer=t)),
        "copy 16 B": ("DtoD", lambda t: small_a.copy_to(small_b, stream=s, timer=t)),
        "copy 4K BGR": ("DtoD", lambda t: frame.copy_to(big_copy, stream=s, timer=t)),
    }
    befores = {
        "idle": (0, lambda: None),
        "HtoD": (1, lambda: frame.upload(host, stream=s)),
        "kernel": (1, lambda: fastmog.nv12_to_bgr(nv12, stream=s, out=bgr)),
    }
    for _, op in ops.values():              # warm: models built, kernels loaded
        for _ in range(5):
            op(None)
    s.synchronize()
    bias = _probes.event_bias(s.device) or {}
    print(f"fastmog {fastmog.__file__} on {fastmog.device_properties()['name']}, "
          f"{iters} iterations each")
    print(f"{'operation':22s} {'before':7s} {'raw us':>9} {'lag us':>7} {'CUPTI us':>9} "
          f"{'raw-CUPTI':>10} {'calib.':>7} {'left':>7}")
    for name, (kind, op) in ops.items():
        for before, (pre_count, pre) in befores.items():
            t = fastmog._fastmog._Timer(nvtx=False)   # raw windows, no calibration

            def run():
                for _ in range(iters):
                    pre()
                    op(t)
                    s.synchronize()

            events = cupti_trace(run)
            records = [rec for rec in t._raw_records() if rec[11] is not None and rec[11] >= 0]
            windows = [rec[11] * 1e3 for rec in records]
            lag = sum(_probes.host_lag_ms(rec[12] / 1e9, rec[23] / 1e9)
                      for rec in records) * 1e3 / max(len(records), 1)
            theirs, seen = last_per_iteration(events, iters, pre_count + 1)
            if theirs is None or len(windows) != iters:
                print(f"{name:22s} {before:7s} unmatched: {len(windows)} windows, "
                      f"{seen} CUPTI activities for {iters}x{pre_count + 1}")
                continue
            raw = sum(windows) / iters
            cupti = sum(theirs) / iters
            cut = bias.get((before, kind), 0.0) * 1e3
            print(f"{name:22s} {before:7s} {raw:9.2f} {lag:7.2f} {cupti:9.2f} "
                  f"{raw - cupti:+10.2f} {cut:7.2f} {raw - lag - cut - cupti:+7.2f}")
    print("GPU event clock minus host clock over 2 s, three times (us): "
          + ", ".join(f"{clock_drift_us():+.1f}" for _ in range(3)))


def clock_drift_us(seconds=2.0):
    """The GPU's event clock against the host's over `seconds`: the analysis
    puts GPU times on the host's clock from one epoch per timer, so a drift
    would move a long profile's host lags."""
    import time
    s = fastmog.Stream()
    a, b = fastmog.Event(), fastmog.Event()
    s.synchronize()
    s.record(a)
    t0 = time.perf_counter_ns()
    time.sleep(seconds)
    s.record(b)
    t1 = time.perf_counter_ns()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 - (t1 - t0) / 1e3


if __name__ == "__main__":
    main()
