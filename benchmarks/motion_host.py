"""The host motion step beside OpenCV's, in one run on one machine: 4K masks
(fastmog's own MOG2 masks of a real scene tiled to 3840x2160, and noise),
fastmog.cpu.morphology against cv2.morphologyEx and
fastmog.cpu.connected_components against cv2.connectedComponentsWithStats,
each checked equal before it is timed; ms per frame, best of 5.

    python benchmarks/motion_host.py [DATA]     (DATA: the test data folder)
"""
import os
import sys
import time

import cv2
import numpy as np

import fastmog
import fastmog.cpu as cpu
from fastmog.testing import find_test_data, iter_frames

H, W = 2160, 3840
SHAPES = {"rect": cv2.MORPH_RECT, "ellipse": cv2.MORPH_ELLIPSE}


def best_ms(fn, repeat=5):
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times)


def real_mask(data):
    """A fastmog mask of CAVIAR2 (frame 120), tiled to 4K."""
    sub = cpu.BackgroundSubtractorMOG2()
    for k, frame in enumerate(iter_frames(data, "CAVIAR2", 120)):
        mask = sub.apply(frame)
    reps = (-(-H // mask.shape[0]), -(-W // mask.shape[1]))
    return np.ascontiguousarray(np.tile(mask, reps)[:H, :W])


def main():
    data = sys.argv[1] if len(sys.argv) > 1 else find_test_data()
    masks = {"noise 50 %": np.where(np.random.default_rng(0).random((H, W)) < 0.5, 255,
                                   0).astype(np.uint8)}
    if data is not None:
        masks["CAVIAR2 mask x4K"] = real_mask(data)
    print(f"fastmog {fastmog.__version__} host, OpenCV {cv2.__version__} with "
          f"{cv2.getNumThreads()} threads, {os.cpu_count()} cores, {W}x{H} uint8")
    print(f"{'mask':18s} {'operation':28s} {'fastmog ms':>10} {'OpenCV ms':>10} {'ratio':>6}")
    for name, mask in masks.items():
        for shape, size in (("rect", 3), ("ellipse", 5), ("rect", 31), ("ellipse", 31)):
            element = cv2.getStructuringElement(SHAPES[shape], (size, size))
            ours = cpu.morphology(mask, "open", size, shape=shape)
            assert np.array_equal(ours, cv2.morphologyEx(mask, cv2.MORPH_OPEN, element))
            a = best_ms(lambda: cpu.morphology(mask, "open", size, shape=shape, out=ours))
            b = best_ms(lambda: cv2.morphologyEx(mask, cv2.MORPH_OPEN, element))
            print(f"{name:18s} {f'open {shape} {size}x{size}':28s} {a:10.2f} {b:10.2f} "
                  f"{b / a:5.2f}x")
        binary = (mask == 255).astype(np.uint8)
        for connectivity in (8, 4):
            r = cpu.connected_components(mask, connectivity=connectivity)
            n, _, stats, _ = cv2.connectedComponentsWithStats(binary, connectivity=connectivity,
                                                              ltype=cv2.CV_32S)
            assert np.array_equal(r.stats, stats[1:])
            a = best_ms(lambda: cpu.connected_components(mask, connectivity=connectivity))
            b = best_ms(lambda: cv2.connectedComponentsWithStats(
                binary, connectivity=connectivity, ltype=cv2.CV_32S))
            print(f"{name:18s} {f'regions, {connectivity}-conn. ({r.count})':28s} {a:10.2f} "
                  f"{b:10.2f} {b / a:5.2f}x")


if __name__ == "__main__":
    main()
