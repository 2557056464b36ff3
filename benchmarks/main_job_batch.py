"""The main job's default --batch against every K a user could choose, in one
run: `python -m fastmog --frames N --batch K` on the built-in 4K grey scene,
K = 1, 2, 4, 8, 16 and the default, in interleaved rounds (so a slow moment of
the machine costs every K alike), each round starting one K further on (the
first slot of a round ran about 2 % slower: no K keeps it), with the median
frames/s of each, and the duplex PCIe bound (a 4K grey upload and download at
once) measured in the same run.

    python benchmarks/main_job_batch.py [--frames 3000] [--rounds 3]
"""
import argparse
import re
import statistics
import subprocess
import sys

import fastmog
from run import duplex_ms

KS = ("default", 1, 2, 4, 8, 16)


def frames_per_s(frames, k):
    cmd = [sys.executable, "-m", "fastmog", "--frames", str(frames)]
    if k != "default":
        cmd += ["--batch", str(k)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    found = re.search(r"([0-9.]+) frames/s", out.stdout + out.stderr)
    if out.returncode != 0 or found is None:
        sys.exit(f"{' '.join(cmd)} failed (exit {out.returncode}): "
                 f"{(out.stdout + out.stderr).strip()[-300:]}")
    return float(found.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    frames_per_s(300, "default")            # a warm host and driver for the first K
    runs = {k: [] for k in KS}
    for r in range(args.rounds):
        for k in KS[r % len(KS):] + KS[:r % len(KS)]:
            runs[k].append(frames_per_s(args.frames, k))
    # the host reference has no bus to bound it
    bound = duplex_ms((2160, 3840)) if fastmog.cuda_available() else None
    best = max(statistics.median(v) for v in runs.values())
    print(f"main job, built-in 4K grey scene, {args.frames} frames, {args.rounds} rounds"
          + (f"; duplex PCIe bound {bound:.3f} ms a frame ({1e3 / bound:.0f} frames/s)"
             if bound else ""))
    print(f"{'--batch':>8}  {'median':>8}  {'of bound':>8}  runs (frames/s)")
    for k, v in runs.items():
        m = statistics.median(v)
        share = f"{m * bound / 1e3:8.2f}" if bound else f"{'':8}"
        print(f"{k!s:>8}  {m:8.0f}  {share}  {', '.join(f'{x:.0f}' for x in v)}"
              f"{'  (fastest)' if m == best else ''}")


if __name__ == "__main__":
    main()
