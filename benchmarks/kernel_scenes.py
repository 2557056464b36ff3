"""Issue 25's kernel rows alone, quick enough to compare builds in one device
call: ms per 4K frame of `apply` on the four scenes (the CDnet traffic
sequence tiled to 4K and seeded noise, grey and BGR, models warmed on 200
frames) and of `apply_batch` with K = 16 on the road scene, timed with CUDA
events as benchmarks/run.py times them.

    python benchmarks/kernel_scenes.py [--tag NAME] [--data DIR]
"""
import argparse

import numpy as np

import fastmog
from run import SCENES, WARM, find_test_data, gpu_ms, scene_frames, warm_and_time


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", default="this build")
    parser.add_argument("--data", default=None)
    args = parser.parse_args()
    data = args.data or find_test_data()
    row = []
    with fastmog.Stream() as stream:
        for colour, scene in SCENES:
            host = scene_frames(data, colour, scene)
            frames = [fastmog.GpuMat.from_array(f, stream=stream) for f in host]
            ms, _ = warm_and_time(stream, frames, host[0].shape)
            row.append(f"{colour} {scene} {ms:.3f}")
            if scene == "real":
                row.append(f"{colour} K=16 {batched_ms(stream, frames):.3f}")
            for f in frames:
                f.close()
    print(f"{args.tag}: " + ", ".join(row) + " (ms per 4K frame, "
          f"{fastmog.device_properties()['name']})")


if __name__ == "__main__":
    main()
