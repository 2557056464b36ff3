"""The bytes one MOG2 update moves per pixel under three layouts of the GPU
model, predicted on the host: the host reference (fastmog.cpu) is warmed on
200 frames of a clip (the CDnet traffic clip has 101, so it loops), then for
the updates of one more loop every pixel's loads and stores are derived from
its state before and after, as the one-frame kernel makes them (cuda/mog2.cu):
every weight slot read, slot 0 always, the other slots in use when the sample
misses slot 0; each weight in use written, each slot whose floats changed
written (the kernel stores a slot its update touched: the same but for the
rare update that leaves every bit as it was, which the script counts too).
Accesses that only some lanes of a warp make are counted in the 32-byte
sectors they fetch; where every lane reads, sectors and bytes agree. The
layouts (5 modes, C channels):

  rows         v12: each field of each slot a row of 32 lanes, so a lane that
               reads slot k fetches one sector per field for its 4 bytes
  own slots    slot 0 in rows, each lane's slots 1-4 together
               (4 x (1 + C) floats a lane)
  interleaved  v13: slot by slot, each lane's variance and means together
               (1 + C floats a lane: 4 grey or 2 BGR lanes to a sector)

What it leaves out: the shadow test's walk, L2 hits between neighbouring
warps, and the cost in L1 of a warp's accesses that span many lines.

    python benchmarks/sector_bytes.py [--data DIR]
"""
import argparse

import cv2
import numpy as np

import fastmog.cpu
from fastmog.testing import find_test_data, iter_frames

MODES, SECTOR, WARM = 5, 32, 200


def sector_bytes(touched, lanes_per_sector):
    """Bytes per pixel of fetching a sector for every group of
    `lanes_per_sector` consecutive pixels of which any is touched."""
    flat = touched.reshape(-1)
    flat = flat[: flat.size // lanes_per_sector * lanes_per_sector]
    return flat.reshape(-1, lanes_per_sector).any(axis=1).sum() * SECTOR / touched.size


def one_update(before, after, frame, channels):
    """Bytes per pixel of one update under each layout, the share of pixels
    that miss slot 0, and the shares of the weights in use and of the slots 0
    that a sample fitted (both stored) that the update left bit for bit."""
    counts, counts_after = before["mode_count"].astype(int), after["mode_count"].astype(int)
    x = np.asarray(frame, np.float32)
    x = x[None] if x.ndim == 2 else np.moveaxis(x, -1, 0)
    dist2 = sum((before["mean"][:, c] - x[c]) ** 2 for c in range(channels))
    fits_first = (counts > 0) & (dist2[0] < 9.0 * before["variance"][0])
    read = [(~fits_first) & (k < counts) for k in range(MODES)]

    def same(name, k):
        a, b = before[name][k].view(np.uint32), after[name][k].view(np.uint32)
        return a == b if a.ndim == 2 else np.all(a == b, axis=0)

    in_use = [k < counts_after for k in range(MODES)]
    written = [~(same("variance", k) & same("mean", k) & (k < counts)) & in_use[k]
               for k in range(MODES)]
    slot = 4 * (1 + channels)  # bytes of one slot's variance and means
    common = (4 * MODES + slot + channels + 2  # weights, slot 0, frame, mask, count
              + sum(sector_bytes(in_use[k], 8) for k in range(MODES)))
    rows = common + sum((sector_bytes(read[k], 8) if k else 0) + sector_bytes(written[k], 8)
                        for k in range(MODES)) * (1 + channels)
    own = common + sector_bytes(written[0], 8) * (1 + channels)
    for touched in (read, written):
        for s in range(-(-(MODES - 1) * slot // SECTOR)):
            in_sector = [k for k in range(1, MODES) if (k - 1) * slot // SECTOR == s]
            own += np.any([touched[k] for k in in_sector], axis=0).mean() * SECTOR
    interleaved = common + sum((sector_bytes(read[k], SECTOR // slot) if k else 0)
                               + sector_bytes(written[k], SECTOR // slot)
                               for k in range(MODES))
    weights_kept = sum((same("weight", k) & in_use[k]).sum() for k in range(MODES)) \
        / sum(u.sum() for u in in_use)
    slot0_kept = (same("variance", 0) & same("mean", 0) & fits_first).sum() / fits_first.sum()
    return rows, own, interleaved, 1 - fits_first.mean(), weights_kept, slot0_kept


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None)
    args = parser.parse_args()
    data = args.data or find_test_data()
    clip = list(iter_frames(data, "traffic", None))
    print(f"bytes per pixel of one update, mean of the {len(clip)} updates after {WARM}")
    print("              rows   own  inter-  misses  unchanged: weights  slot 0")
    print("             (v12) slots  leaved  slot 0           in use  fitted")
    for colour in ("grey", "bgr"):
        channels = 1 if colour == "grey" else 3
        shape = clip[0].shape[:2] + ((3,) if colour == "bgr" else ())
        scenes = {
            "real": [cv2.cvtColor(f, cv2.COLOR_BGR2GRAY) if colour == "grey" else f
                     for f in clip],
            "noise": [np.random.default_rng(1000 + i).integers(0, 256, shape, dtype=np.uint8)
                      for i in range(12)],
        }
        for scene, frames in scenes.items():
            sub = fastmog.cpu.createBackgroundSubtractorMOG2()
            for i in range(WARM):
                sub.apply(frames[i % len(frames)])
            figures = []
            for i in range(WARM, WARM + len(clip)):
                before = {k: v.copy() for k, v in sub._state().items()}
                frame = frames[i % len(frames)]
                sub.apply(frame)
                figures.append(one_update(before, sub._state(), frame, channels))
            rows, own, inter, misses, weights, slot0 = np.mean(figures, axis=0)
            print(f"  {colour:4} {scene:5} {rows:5.1f} {own:5.1f} {inter:6.1f} {misses:6.0%}"
                  f" {weights:17.1%} {slot0:7.1%}")


if __name__ == "__main__":
    main()
