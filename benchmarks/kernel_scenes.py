"""Issue 25's kernel rows alone, quick enough to compare builds in one device
call: ms per 4K frame of `apply` on the four scenes (the CDnet traffic
sequence tiled to 4K and seeded noise, grey and BGR, models warmed on 200
frames) and of `apply_batch` with K = 16 on the road scene, timed with CUDA
events as benchmarks/run.py times them; with --cameras (or only them)
run.py's 64 cameras of 640x480 too, grey and BGR, as one apply on their
stacked frame and as one `apply_cameras` call, ms a set; --camera-kinds adds
`apply_cameras` on cameras of 8 modes, of grey and BGR at once, and of BGRA;
--modes 8 times the four scenes and the passes with models of 8 modes, whose
kernels are their own.

    python benchmarks/kernel_scenes.py [--tag NAME] [--data DIR] [--modes N]
                                       [--cameras | --only-cameras] [--camera-kinds]
"""
import argparse

import cv2
import numpy as np

import fastmog
from run import (CAM_H, CAM_W, CAMERA_SETS_TIMED, CAMERAS, SCENES, WARM, camera_views,
                 find_test_data, gpu_ms, scene_frames, timed_after_warm, warm_and_time)


def batched_ms(stream, frames, k=16, calls=8, modes=5):
    n = len(frames)
    sub = fastmog.BackgroundSubtractorMOG2(n_mixtures=modes)
    masks = tuple(fastmog.GpuMat(frames[0].shape[:2], np.uint8) for _ in range(k))
    for a in range(0, WARM, k):
        chunk = tuple(frames[i % n] for i in range(a, min(a + k, WARM)))
        sub.apply_batch(chunk, stream=stream, fgmasks=masks[:len(chunk)])
    batches = [tuple(frames[(WARM + j * k + i) % n] for i in range(k)) for j in range(calls)]
    ms = gpu_ms(stream, lambda j: sub.apply_batch(batches[j], stream=stream, fgmasks=masks),
                calls) / k
    sub.close()
    return ms


def cameras_ms(stream, data, timed=CAMERA_SETS_TIMED, colour="grey"):
    """ms a set of run.py's 64 cameras: one apply on the stacked frame, and
    one apply_cameras call on its 64 views, each warmed on WARM sets."""
    tall, views = camera_views(stream, data, colour)
    n = len(tall)
    one = fastmog.BackgroundSubtractorMOG2()
    mask = fastmog.GpuMat((CAMERAS * CAM_H, CAM_W))
    subs = [fastmog.BackgroundSubtractorMOG2() for _ in range(CAMERAS)]
    masks = tuple(fastmog.GpuMat((CAM_H, CAM_W)) for _ in range(CAMERAS))
    try:
        stacked, _ = timed_after_warm(
            stream, lambda i: one.apply(tall[i % n], stream=stream, fgmask=mask), timed)
        cameras, _ = timed_after_warm(
            stream, lambda i: fastmog.apply_cameras(subs, views[i % n], stream=stream,
                                                    fgmasks=masks), timed)
    finally:
        for x in [one, mask, *subs, *masks, *tall]:
            x.close()
    return stacked, cameras


def camera_kinds_ms(stream, data):
    """ms a set of one apply_cameras call on 64 cameras of the kinds
    cameras_ms leaves out: grey with 8 modes, grey and BGR alternating (a
    launch of several kinds), and BGRA; run.py's clip, warmed on WARM sets."""
    grey, grey_views = camera_views(stream, data)
    bgr, bgr_views = camera_views(stream, data, "bgr")
    mixed = [[g[k] if k % 2 == 0 else b[k] for k in range(CAMERAS)]
             for g, b in zip(grey_views, bgr_views)]
    bgra = [fastmog.GpuMat.from_array(cv2.cvtColor(f.download(stream=stream),
                                                   cv2.COLOR_BGR2BGRA), stream=stream)
            for f in bgr]
    bgra_views = [[f[k * CAM_H:(k + 1) * CAM_H] for k in range(CAMERAS)] for f in bgra]
    masks = tuple(fastmog.GpuMat((CAM_H, CAM_W)) for _ in range(CAMERAS))
    times = {}
    try:
        for name, sets, params in (("grey 8 modes", grey_views, {"n_mixtures": 8}),
                                   ("grey and BGR", mixed, {}), ("BGRA", bgra_views, {})):
            subs = [fastmog.BackgroundSubtractorMOG2(**params) for _ in range(CAMERAS)]
            times[name], _ = timed_after_warm(
                stream, lambda i, subs=subs, sets=sets: fastmog.apply_cameras(
                    subs, sets[i % len(sets)], stream=stream, fgmasks=masks),
                CAMERA_SETS_TIMED)
            for sub in subs:
                sub.close()
    finally:
        for x in [*masks, *grey, *bgr, *bgra]:
            x.close()
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", default="this build")
    parser.add_argument("--data", default=None)
    parser.add_argument("--modes", type=int, default=5, help="n_mixtures of the scenes' models")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--cameras", action="store_true", help="also time 64 cameras")
    which.add_argument("--only-cameras", action="store_true", help="time 64 cameras alone")
    parser.add_argument("--camera-kinds", action="store_true",
                        help="with the cameras, 8 modes, several kinds at once and BGRA")
    args = parser.parse_args()
    if args.camera_kinds and not (args.cameras or args.only_cameras):
        parser.error("--camera-kinds goes with --cameras or --only-cameras")
    data = args.data or find_test_data()
    row = []
    with fastmog.Stream() as stream:
        for colour, scene in [] if args.only_cameras else SCENES:
            host = scene_frames(data, colour, scene)
            frames = [fastmog.GpuMat.from_array(f, stream=stream) for f in host]
            ms, _ = warm_and_time(stream, frames, host[0].shape, modes=args.modes)
            row.append(f"{colour} {scene} {ms:.3f}")
            if scene == "real":
                row.append(f"{colour} K=16 {batched_ms(stream, frames, modes=args.modes):.3f}")
            for f in frames:
                f.close()
        if args.cameras or args.only_cameras:
            for colour in ("grey", "bgr"):
                tall_ms, cams_ms = cameras_ms(stream, data, colour=colour)
                row.append(f"64 {colour} cameras: stacked {tall_ms:.3f}, "
                           f"apply_cameras {cams_ms:.3f}")
            if args.camera_kinds:
                row += [f"64 cameras, {name}: apply_cameras {ms:.3f}"
                        for name, ms in camera_kinds_ms(stream, data).items()]
    modes = "" if args.modes == 5 else f", {args.modes} modes"
    units = [f"ms per 4K frame{modes}"] * (not args.only_cameras)
    units += ["cameras in ms a set"] * (args.cameras or args.only_cameras)
    print(f"{args.tag}: " + ", ".join(row) + f" ({', '.join(units)}, "
          f"{fastmog.device_properties()['name']})")


if __name__ == "__main__":
    main()
