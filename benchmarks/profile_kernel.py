"""A short, steady MOG2 workload for Nsight Compute: issue 25's scene (the
CDnet traffic sequence tiled to 4K) in grey or BGR, or seeded noise, a model
warmed on 200 frames, then 4 more applies (with --batch K, 200 frames in
launches of K frames, then 4 more such launches); or (--cameras) run.py's 64
cameras of 640x480, grey or BGR, 204 sets as one apply on their stacked
frame, then 204 as one apply_cameras call.

    ncu --clock-control none -k regex:mog2_apply_kernel --launch-skip 200 \\
        --launch-count 1 --set full \\
        python benchmarks/profile_kernel.py --colour bgr [--noise] [--data DIR]
    ncu ... --launch-skip 13 ... python benchmarks/profile_kernel.py --batch 16
        (the warm-up is ceil(200 / K) launches)
    ncu --clock-control none -k regex:mog2_cameras_kernel --launch-skip 200 \\
        --launch-count 1 --set full \\
        python benchmarks/profile_kernel.py --cameras [--colour bgr] [--data DIR]
"""
import argparse

import numpy as np

import fastmog
from kernel_scenes import cameras_ms
from run import WARM, find_test_data, scene_frames


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--colour", choices=("grey", "bgr"), default="grey")
    parser.add_argument("--noise", action="store_true")
    parser.add_argument("--data", default=None)
    parser.add_argument("--cameras", action="store_true")
    parser.add_argument("--batch", type=int, default=1, metavar="K")
    args = parser.parse_args()
    if not 1 <= args.batch <= 16:
        parser.error("--batch takes 1 to 16 frames a launch")
    if args.cameras and args.noise:
        parser.error("--cameras shows the road clip: no --noise")
    if args.cameras and args.batch != 1:
        parser.error("--cameras runs apply_cameras, one frame a camera: no --batch")
    data = args.data or find_test_data()
    if args.cameras:
        with fastmog.Stream() as s:
            print(f"64 {args.colour} cameras, ms a set (stacked, apply_cameras):",
                  cameras_ms(s, data, timed=4, colour=args.colour))
        return
    host = scene_frames(data, args.colour, "noise" if args.noise else "real")
    with fastmog.Stream() as s:
        frames = [fastmog.GpuMat.from_array(f, stream=s) for f in host]
        sub = fastmog.BackgroundSubtractorMOG2()
        k, n = args.batch, len(frames)
        masks = tuple(fastmog.GpuMat(frames[0].shape[:2], np.uint8) for _ in range(k))
        launches = [(a, min(a + k, WARM)) for a in range(0, WARM, k)]
        launches += [(WARM + j * k, WARM + (j + 1) * k) for j in range(4)]  # to profile
        for a, b in launches:
            chunk = tuple(frames[i % n] for i in range(a, b))
            if len(chunk) == 1:
                sub.apply(chunk[0], stream=s, fgmask=masks[0])
            else:
                sub.apply_batch(chunk, stream=s, fgmasks=masks[:len(chunk)])
        s.synchronize()
        print(args.colour, "noise" if args.noise else "road", "warm", WARM,
              "mean modes", sub.mode_counts().download(stream=s).mean())


if __name__ == "__main__":
    main()
