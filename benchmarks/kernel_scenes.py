"""Issue 25's kernel rows alone, quick enough to compare builds in one device
call: ms per 4K frame of `apply` on the four scenes (the CDnet traffic
sequence tiled to 4K and seeded noise, grey and BGR, models warmed on 200
frames) and of `apply_batch` with K = 16 on the road scene, timed with CUDA
events as benchmarks/run.py times them; with --cameras (or only them)
run.py's 64 cameras of 640x480 too, grey and BGR, as one apply on their
stacked frame and as one `apply_cameras` call, ms a set.

    python benchmarks/kernel_scenes.py [--tag NAME] [--data DIR] [--cameras | --only-cameras]
"""
import argparse

import numpy as np

import fastmog
from run import (CAM_H, CAM_W, CAMERA_SETS_TIMED, CAMERAS, SCENES, WARM, camera_views,
                 find_test_data, gpu_ms, scene_frames, timed_after_warm, warm_and_time)


def batched_ms(stream, frames, k=16, calls=8):
    n = len(frames)
    sub = fastmog.BackgroundSubtractorMOG2()
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", default="this build")
    parser.add_argument("--data", default=None)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--cameras", action="store_true", help="also time 64 cameras")
    which.add_argument("--only-cameras", action="store_true", help="time 64 cameras alone")
    args = parser.parse_args()
    data = args.data or find_test_data()
    row = []
    with fastmog.Stream() as stream:
        for colour, scene in [] if args.only_cameras else SCENES:
            host = scene_frames(data, colour, scene)
            frames = [fastmog.GpuMat.from_array(f, stream=stream) for f in host]
            ms, _ = warm_and_time(stream, frames, host[0].shape)
            row.append(f"{colour} {scene} {ms:.3f}")
            if scene == "real":
                row.append(f"{colour} K=16 {batched_ms(stream, frames):.3f}")
            for f in frames:
                f.close()
        if args.cameras or args.only_cameras:
            for colour in ("grey", "bgr"):
                tall_ms, cams_ms = cameras_ms(stream, data, colour=colour)
                row.append(f"64 {colour} cameras: stacked {tall_ms:.3f}, "
                           f"apply_cameras {cams_ms:.3f}")
    units = ["ms per 4K frame"] * (not args.only_cameras)
    units += ["cameras in ms a set"] * (args.cameras or args.only_cameras)
    print(f"{args.tag}: " + ", ".join(row) + f" ({', '.join(units)}, "
          f"{fastmog.device_properties()['name']})")


if __name__ == "__main__":
    main()
