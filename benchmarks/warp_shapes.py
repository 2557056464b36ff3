"""How often a whole warp of MOG2 pixels may take the short path, for warps
of 32 pixels in four shapes, counted on the host: the host reference
(fastmog.cpu) is warmed on 200 frames of a clip (the CDnet traffic clip has
101, so it loops), then for each frame after them a pixel fits_first where
its sample passes mode 0's two tests before the update (cuda/mog2.cu,
fits_first: the same floats), and a warp is uniform where all its pixels
do. A pass over several frames (apply_batch) runs the short path in uniform
warps only, the long one in the others, so the shape whose warps are
uniform most often issues the fewest instructions (cuda/MOG2_NOTES.md, v17).
The shares are printed for the frames of the K=16 pass that
`profile_kernel.py --batch 16` profiles and for every frame counted.

    python benchmarks/warp_shapes.py [--data DIR] [--colour grey|bgr] [--frames N]
"""
import argparse

import numpy as np

import fastmog.cpu
from fastmog.testing import convert, find_test_data, iter_frames

WARM, PASS = 200, 16
SHAPES = [(32, 1), (16, 2), (8, 4), (4, 8)]  # (across, down)


def fits_first(state, frame, sub):
    """Per pixel, whether the sample fits mode 0 and is background there, as
    the kernel's fits_first decides it (float32, channels summed from 0)."""
    x = np.asarray(frame, np.float32)
    x = x[None] if x.ndim == 2 else np.moveaxis(x, -1, 0)
    dist2 = np.zeros(x.shape[1:], np.float32)
    for c in range(x.shape[0]):
        d = state["mean"][0, c] - x[c]
        dist2 += d * d
    var = state["variance"][0]
    return ((state["mode_count"] > 0) & (np.float32(0) < np.float32(sub.background_ratio))
            & (dist2 < np.float32(sub.var_threshold) * var)
            & (dist2 < np.float32(sub.var_threshold_gen) * var))


def uniform_share(fits, across, down):
    """The share of warps of across x down pixels (whole ones only) whose
    every pixel fits_first."""
    h, w = fits.shape[0] // down * down, fits.shape[1] // across * across
    return float(fits[:h, :w].reshape(h // down, down, w // across, across)
                 .all(axis=(1, 3)).mean())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="test data directory (default: found as the tests find it)")
    parser.add_argument("--colour", choices=["grey", "bgr"], default="grey")
    parser.add_argument("--frames", type=int, default=200, help="frames counted after the warm-up")
    args = parser.parse_args()
    if args.frames < PASS:
        parser.error(f"--frames takes at least {PASS}")
    data = args.data or find_test_data()
    if data is None:
        parser.error("test data not found: pass --data or set FASTMOG_TEST_DATA")
    clip = [convert(f, args.colour, np.uint8) for f in iter_frames(data, "traffic", None)]
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    for i in range(WARM):
        sub.apply(clip[i % len(clip)])
    shares = []
    pixels = []
    for i in range(WARM, WARM + args.frames):
        frame = clip[i % len(clip)]
        fits = fits_first(sub._state(), frame, sub)
        pixels.append(fits.mean())
        shares.append([uniform_share(fits, a, d) for a, d in SHAPES])
        sub.apply(frame)
    shares = np.array(shares)
    print(f"traffic clip, {args.colour}, {clip[0].shape[1]}x{clip[0].shape[0]}, "
          f"models warmed on {WARM} frames")
    print(f"pixels that fit_first: {np.mean(pixels[:PASS]):.3f} in frames "
          f"{WARM}-{WARM + PASS - 1}, {np.mean(pixels):.3f} in frames "
          f"{WARM}-{WARM + args.frames - 1}")
    print(f"{'warp':>6}  {'uniform, frames %d-%d' % (WARM, WARM + PASS - 1):>24}  "
          f"{'frames %d-%d' % (WARM, WARM + args.frames - 1):>14}")
    for (a, d), first, every in zip(SHAPES, shares[:PASS].mean(0), shares.mean(0)):
        print(f"{a:>3}x{d:<2}  {first:24.3f}  {every:14.3f}")


if __name__ == "__main__":
    main()
