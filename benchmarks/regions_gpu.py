"""The motion step on the GPU beside OpenCV. First, the issue's pipelines on
the built-in 4K scene (grey and BGR; the model warmed on 64 frames), ms per
frame: MOG2 alone; MOG2 + the motion step on the GPU (fastmog.MotionDetector
with its defaults: the 3x3 opening of the mask made binary, made by the
labelling's first pass, and the regions); MOG2 on the GPU + the mask downloaded
+ OpenCV's morphologyEx and connectedComponentsWithStats on the host; and
OpenCV's CPU MOG2 + the same, end to end. Each GPU result is checked
against the host path's first. Then fastmog.connected_components beside
OpenCV's
connectedComponentsWithStats on the host, on 4K masks that are hard for GPU
labelling (noise with tens of thousands of regions, a frame all foreground,
one region that winds across the whole frame) and one that is not (blobs);
each result is checked equal to OpenCV's before it is timed. GPU: the call
on a device-resident mask, rows read back included; best of 10.

    python benchmarks/regions_gpu.py [--kernels]

--kernels adds each kernel's time from CUPTI (torch.profiler). Needs a GPU,
OpenCV and fastmog built.
"""
import os
import sys
import time

import cv2
import numpy as np

import fastmog
from fastmog.scene import BuiltinScene

H, W = 2160, 3840


def serpentine():
    """Rows of foreground every third row, joined at alternate ends: one
    region as long as a third of the frame's pixels."""
    m = np.zeros((H, W), np.uint8)
    m[::3, :] = 255
    for y in range(0, H - 3, 3):
        m[y + 1:y + 3, W - 1 if (y // 3) % 2 == 0 else 0] = 255
    return m


def best_ms(run, n):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return 1e3 * min(times)


def pipelines(s, threads):
    element = cv2.getStructuringElement(cv2.MORPH_RECT, (3, 3))
    print(f"pipelines on the built-in 4K scene, ms per frame (best of 3 passes of 32 frames; "
          f"OpenCV {threads} threads):")
    print(f"{'frames':7s} {'MOG2':>8s} {'+ motion GPU':>13s} {'+ download + OpenCV':>20s} "
          f"{'OpenCV CPU end to end':>22s}")
    for colour in (False, True):
        scene = BuiltinScene(colour=colour, period=32)
        frames = list(scene.frames(32))
        device = [fastmog.GpuMat.from_array(f, stream=s) for f in frames]
        sub = fastmog.BackgroundSubtractorMOG2()
        mask = fastmog.GpuMat((H, W), np.uint8)
        host_mask = fastmog.pinned_empty((H, W), np.uint8)
        for f in device + device:
            sub.apply(f, stream=s, fgmask=mask)
        s.synchronize()

        def mog2_only():
            for f in device:
                sub.apply(f, stream=s, fgmask=mask)
            s.synchronize()

        detector = fastmog.MotionDetector()

        def motion_gpu():
            for f in device:
                sub.apply(f, stream=s, fgmask=mask)
                detector.update(mask, stream=s)

        def motion_host():
            for f in device:
                sub.apply(f, stream=s, fgmask=mask)
                mask.download(host_mask, stream=s)
                binary = np.where(host_mask == 255, np.uint8(255), np.uint8(0))
                clean = cv2.morphologyEx(binary, cv2.MORPH_OPEN, element)
                cv2.connectedComponentsWithStats(clean, connectivity=8, ltype=cv2.CV_32S)

        # the GPU's motion step equals the host path's on this scene's masks
        sub.apply(device[0], stream=s, fgmask=mask)
        got = fastmog.MotionDetector().update(mask, stream=s).zones[0].regions
        binary = np.where(mask.download(stream=s) == 255, np.uint8(255), np.uint8(0))
        _, _, stats, centroids = cv2.connectedComponentsWithStats(
            cv2.morphologyEx(binary, cv2.MORPH_OPEN, element), connectivity=8,
            ltype=cv2.CV_32S)
        if not (np.array_equal(got.stats, stats[1:])
                and np.array_equal(got.centroids, centroids[1:])):
            raise SystemExit("the GPU motion step differs from OpenCV's on the scene")

        cv_sub = cv2.createBackgroundSubtractorMOG2()
        for f in frames[:8]:
            cv_sub.apply(f)

        def opencv_cpu():
            for f in frames[:8]:
                m = cv_sub.apply(f)
                binary = np.where(m == 255, np.uint8(255), np.uint8(0))
                clean = cv2.morphologyEx(binary, cv2.MORPH_OPEN, element)
                cv2.connectedComponentsWithStats(clean, connectivity=8, ltype=cv2.CV_32S)

        row = [best_ms(run, 3) / 32 for run in (mog2_only, motion_gpu, motion_host)]
        row.append(best_ms(opencv_cpu, 1) / 8)
        print(f"{'BGR' if colour else 'grey':7s} {row[0]:8.3f} {row[1]:13.3f} {row[2]:20.3f} "
              f"{row[3]:22.3f}")
        if "--kernels" in sys.argv:
            # the issue's measure: the motion step's kernels against MOG2's
            spent = kernel_spent(motion_gpu, len(device))
            mog2 = sum(v for k, v in spent.items() if "mog2" in k)
            step = sum(v for k, v in spent.items() if "mog2" not in k)
            print(f"    per frame, CUPTI: MOG2 kernel {mog2:.1f} us, motion step "
                  f"{step:.1f} us ({100 * step / mog2:.0f} % of MOG2): {format_spent(spent)}")


def main():
    threads = os.cpu_count() or 1
    cv2.setNumThreads(threads)
    s = fastmog.Stream()
    pipelines(s, threads)
    rng = np.random.default_rng(5)
    seeds = np.where(rng.random((H, W)) < 0.0005, 255, 0).astype(np.uint8)
    masks = {"noise 40 %": np.where(rng.random((H, W)) < 0.4, 255, 0).astype(np.uint8),
             "blobs": cv2.dilate(seeds, np.ones((25, 25), np.uint8)),
             "all foreground": np.full((H, W), 255, np.uint8),
             "serpentine": serpentine()}
    print(f"fastmog {fastmog.__version__} on {fastmog.device_properties()['name']}, "
          f"OpenCV {cv2.__version__} with {threads} threads; 4K masks, ms")
    print(f"{'mask':15s} {'conn.':>5s} {'regions':>8s} {'fastmog GPU':>12s} "
          f"{'OpenCV CPU':>11s} {'ratio':>7s}")
    for name, m in masks.items():
        dev = fastmog.GpuMat.from_array(m, stream=s)
        for conn in (8, 4):
            got = fastmog.connected_components(dev, stream=s, connectivity=conn)
            n, _, stats, centroids = cv2.connectedComponentsWithStats(
                m, connectivity=conn, ltype=cv2.CV_32S)
            if not (np.array_equal(got.stats, stats[1:])
                    and np.array_equal(got.centroids, centroids[1:])):
                raise SystemExit(f"{name}, {conn}-connectivity: not OpenCV's regions")

            def gpu():
                fastmog.connected_components(dev, stream=s, connectivity=conn)

            def host():
                cv2.connectedComponentsWithStats(m, connectivity=conn, ltype=cv2.CV_32S)

            s.synchronize()
            g, c = best_ms(gpu, 10), best_ms(host, 3)
            print(f"{name:15s} {conn:5d} {got.count:8d} {g:12.3f} {c:11.2f} {c / g:6.1f}x")
            if "--kernels" in sys.argv:
                print("    " + kernel_times(lambda: [gpu() for _ in range(5)], 5))


def kernel_times(run, calls):
    """Each kernel's mean time per call (us) from CUPTI, in launch order."""
    return format_spent(kernel_spent(run, calls))


def kernel_spent(run, calls):
    """{kernel or copy: mean us per call} from CUPTI, in launch order."""
    sys.path.insert(0, os.path.dirname(__file__))
    from cupti_check import cupti_trace

    spent = {}
    for e in cupti_trace(run):
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            name = e.get("name", "").replace("(anonymous namespace)::", "")
            key = name.replace("void ", "").split("(")[0].split("<")[0]
            spent[key] = spent.get(key, 0.0) + float(e["dur"]) / calls
    return spent


def format_spent(spent):
    return ", ".join(f"{k.replace('_kernel', '')} {v:.1f}" for k, v in spent.items())


if __name__ == "__main__":
    main()
