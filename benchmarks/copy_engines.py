"""Which device-to-device copies run beside a kernel that fills every SM: a
MOG2 kernel on a 4K BGR frame is queued on one stream, then an NV12 4K
frame's copy on another, made as fastmog makes it (one flat copy where both
sides are contiguous, a 2D copy where a pitch differs). CUPTI
(torch.profiler) says when each copy began against the kernel's span: a
copy that waits for the kernel to end waits for the SMs.

    python benchmarks/copy_engines.py [--iters 20]

Needs a GPU, torch with CUPTI and fastmog built.
"""
import sys

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
    ways = {"flat (cudaMemcpyAsync)": flat, "pitched (cudaMemcpy2DAsync)": pitched}
    for _ in range(3):
        sub.apply(frame, stream=busy, fgmask=mask)
        for dst in ways.values():
            nv12.copy_to(dst, stream=other)
    busy.synchronize()
    other.synchronize()
    print(f"fastmog {fastmog.__file__} on {fastmog.device_properties()['name']}")
    for label, dst in ways.items():
        def run():
            for _ in range(iters):
                sub.apply(frame, stream=busy, fgmask=mask)
                nv12.copy_to(dst, stream=other)
                busy.synchronize()
                other.synchronize()

        events = [e for e in cupti_trace(run) if e.get("ph") == "X"]
        kernels = [e for e in events if e.get("cat") == "kernel"
                   and "mog2_apply_kernel" in e.get("name", "")]
        copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
        if len(kernels) != iters or len(copies) != iters:
            print(f"{label}: {len(kernels)} kernels and {len(copies)} copies for {iters}")
            continue
        beside, waits, durs = 0, [], []
        for k, c in zip(kernels, copies):
            k_end = float(k["ts"]) + float(k["dur"])
            started = float(c["ts"])
            durs.append(float(c["dur"]))
            if started < k_end - 1.0:
                beside += 1
            else:
                waits.append(started - float(k["ts"]))
        durs.sort()
        print(f"{label:28s} began while the kernel ran: {beside}/{iters}; copy "
              f"{durs[len(durs) // 2]:.1f} us (median, CUPTI); "
              + (f"the others began {min(waits):.0f}-{max(waits):.0f} us after the kernel "
                 f"began (kernel {float(kernels[0]['dur']):.0f} us)" if waits else ""))


if __name__ == "__main__":
    main()
