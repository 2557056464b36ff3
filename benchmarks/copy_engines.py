"""How long a device-to-device copy waits behind a kernel of another stream
that fills every SM: a MOG2 kernel on a 4K BGR frame is queued on one
stream and, once it runs, an NV12 4K frame's copy on another, made as
fastmog makes it (one flat copy where both sides are contiguous, a 2D copy
where a pitch differs), on a stream of default priority or of the device's
greatest (as the NVDEC sessions' streams are). CUPTI (torch.profiler) gives
each copy's wait: from the end of its API call to its start.

    python benchmarks/copy_engines.py [--iters 20]

Needs a GPU, torch with CUPTI and fastmog built.
"""
import sys
import time

import numpy as np

import fastmog

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cupti_check import cupti_trace  # noqa: E402

H, W = 2160, 3840


def main():
    iters = int(sys.argv[sys.argv.index("--iters") + 1]) if "--iters" in sys.argv else 20
    rng = np.random.default_rng(3)
    busy, other = fastmog.Stream(), fastmog.Stream()
    frame = fastmog.GpuMat.from_array(rng.integers(0, 255, (H, W, 3), dtype=np.uint8),
                                      stream=busy)
    mask = fastmog.GpuMat((H, W))
    sub = fastmog.BackgroundSubtractorMOG2()
    nv12 = fastmog.GpuMat.from_array(rng.integers(0, 255, (H * 3 // 2, W), dtype=np.uint8),
                                     stream=other)
    flat = fastmog.GpuMat((H * 3 // 2, W), np.uint8)
    wide = fastmog.GpuMat((H * 3 // 2, W + 256), np.uint8)
    pitched = wide[:, :W]                       # its pitch differs: a 2D copy
    urgent = fastmog.Stream(priority=fastmog.device_properties()["stream_priorities"][1])
    ways = {"flat (cudaMemcpyAsync)": (flat, other),
            "pitched (cudaMemcpy2DAsync)": (pitched, other),
            "flat, greatest priority": (flat, urgent)}
    for _ in range(3):
        sub.apply(frame, stream=busy, fgmask=mask)
        for dst, s in ways.values():
            nv12.copy_to(dst, stream=s)
    busy.synchronize()
    other.synchronize()
    print(f"fastmog {fastmog.__file__} on {fastmog.device_properties()['name']}")
    for label, (dst, s) in ways.items():
        def run():
            for _ in range(iters):
                sub.apply(frame, stream=busy, fgmask=mask)
                time.sleep(50e-6)               # the kernel is running by now
                nv12.copy_to(dst, stream=s)
                busy.synchronize()
                s.synchronize()

        events = cupti_trace(run)
        calls = {e["args"]["correlation"]: e for e in events
                 if e.get("cat") == "cuda_runtime" and "Memcpy" in e.get("name", "")
                 and "correlation" in e.get("args", {})}
        copies = [e for e in events if e.get("ph") == "X" and e.get("cat") == "gpu_memcpy"
                  and e.get("args", {}).get("correlation") in calls]
        kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"
                   and "mog2_apply_kernel" in e.get("name", "")]
        if len(copies) != iters or len(kernels) != iters:
            print(f"{label}: {len(kernels)} kernels and {len(copies)} copies for {iters}")
            continue
        waits = sorted(float(c["ts"]) - (float(calls[c["args"]["correlation"]]["ts"])
                                         + float(calls[c["args"]["correlation"]]["dur"]))
                       for c in copies)
        durs = sorted(float(c["dur"]) for c in copies)
        print(f"{label:28s} wait from the call to the copy: median {waits[iters // 2]:7.1f} us, "
              f"max {waits[-1]:7.1f} us; copy {durs[iters // 2]:.1f} us; kernel "
              f"{sorted(float(k['dur']) for k in kernels)[iters // 2]:.0f} us (medians)")


if __name__ == "__main__":
    main()
