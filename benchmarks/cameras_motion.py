"""Many cameras with motion results: 64 cameras of 640x480 grey (the built-in
scene rendered at that size, each camera a different phase of it), MOG2 and
the motion step (open 3x3, min_area 20) on the GPU, in camera-frames per
second:
  - one set at a time: apply_cameras, then update_cameras (the zoneless
    cameras labelled in one pass, read back in one copy);
  - 64 separate pipelines on one stream: each camera's apply, then its
    detector's update (its own labelling, its own copy and wait).
Both give the same frames: the first sets are checked equal (every zone's
regions and score) before anything is timed.

    python benchmarks/cameras_motion.py [--cameras 64] [--sets 40]

Needs a GPU and fastmog built.
"""
import argparse
import time

import numpy as np

import fastmog
from fastmog.scene import BuiltinScene

H, W = 480, 640


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cameras", type=int, default=64)
    p.add_argument("--sets", type=int, default=40)
    args = p.parse_args()
    n = args.cameras
    s = fastmog.Stream()
    period = 32
    frames = [fastmog.GpuMat.from_array(f, stream=s)
              for f in BuiltinScene(width=W, height=H, period=period).frames(period)]

    def camera_frames(t):
        return [frames[(t + 3 * k) % period] for k in range(n)]

    options = dict(morphology=("open", 3), min_area=20)

    def make():
        subs = [fastmog.BackgroundSubtractorMOG2() for _ in range(n)]
        dets = [fastmog.MotionDetector(**options) for _ in range(n)]
        return subs, dets

    batched, separate = make(), make()

    def set_batched(t):
        subs, dets = batched
        masks = fastmog.apply_cameras(subs, camera_frames(t), stream=s)
        return fastmog.update_cameras(dets, masks, stream=s)

    def set_separate(t):
        subs, dets = separate
        return [d.update(sub.apply(f, stream=s), stream=s)
                for sub, d, f in zip(subs, dets, camera_frames(t))]

    for t in range(8):                       # warm up; the two paths agree
        for a, b in zip(set_batched(t), set_separate(t)):
            assert a.fraction == b.fraction
            for za, zb in zip(a.zones, b.zones):
                assert za.score == zb.score
                np.testing.assert_array_equal(za.regions.stats, zb.regions.stats)
    regions = sum(z.regions.count for m in set_batched(8) for z in m.zones)
    print(f"{n} cameras of {W}x{H} grey, {fastmog.device_properties()['name']}; "
          f"{regions / n:.1f} regions per camera-frame")
    for name, run in (("apply_cameras + update_cameras", set_batched),
                      ("64 separate pipelines", set_separate),
                      ("apply_cameras + update_cameras", set_batched),
                      ("64 separate pipelines", set_separate)):
        s.synchronize()
        start = time.perf_counter()
        for t in range(args.sets):
            run(9 + t)
        s.synchronize()
        seconds = time.perf_counter() - start
        print(f"{name:32s} {n * args.sets / seconds:10.0f} camera-frames/s "
              f"({seconds / args.sets * 1e3:.2f} ms a set)")


if __name__ == "__main__":
    main()
