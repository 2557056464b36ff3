"""Pipelines on several GPUs of one machine: 4K grey host frames through
fastmog.pipeline, one thread per GPU, beside one GPU alone and the
ideal (N x one GPU), in one run.

    python benchmarks/multi_gpu.py [--frames 300] [--write FILE]
"""
import argparse
import datetime
import threading
import time

import numpy as np

import fastmog


def run_pipelines(devices, frames_per_gpu, pinned):
    """Frames per second over all `devices`, each fed by its own thread."""
    done = {}
    ready = threading.Barrier(len(devices) + 1)

    def work(device):
        streams = [fastmog.Stream(device=device) for _ in range(3)]
        sub = fastmog.BackgroundSubtractorMOG2(device=device)
        frames = pinned[device]
        for _ in fastmog.pipeline(sub, frames[:10], streams=streams):
            pass                                     # warm: model, ring, staging
        ready.wait()
        n = 0
        for _ in fastmog.pipeline(sub, (frames[i % len(frames)] for i in range(frames_per_gpu)),
                                  streams=streams):
            n += 1
        done[device] = n
        for s in streams:
            s.close()

    threads = [threading.Thread(target=work, args=(d,)) for d in devices]
    for t in threads:
        t.start()
    ready.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    return sum(done.values()) / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frames", type=int, default=300, help="frames per GPU (default 300)")
    p.add_argument("--write", help="also write the table as Markdown to this file")
    args = p.parse_args()
    n = fastmog.device_count()
    if n < 1:
        raise SystemExit("needs a GPU")
    rng = np.random.default_rng(1)
    base = rng.integers(0, 256, (2160, 3840), dtype=np.uint8)
    pinned = {}
    for d in range(n):
        pinned[d] = []
        for k in range(4):                           # moving content, never zeros
            f = fastmog.pinned_empty(base.shape, np.uint8)
            f[...] = np.roll(base, 64 * k, axis=1)
            pinned[d].append(f)
    rows = []
    one = run_pipelines([0], args.frames, pinned)
    rows.append(("1 GPU (device 0)", one, 1.0))
    for k in range(2, n + 1):
        fps = run_pipelines(list(range(k)), args.frames, pinned)
        rows.append((f"{k} GPUs, one pipeline thread each", fps, fps / (k * one)))
    props = fastmog.device_properties(0)
    head = (f"{n} x {props['name']}, {datetime.date.today()}, 4K grey pinned host frames -> "
            f"host masks, fastmog.pipeline (3 streams per GPU), {args.frames} frames per GPU")
    lines = [head, "", "| setup | frames/s | of N x one GPU |", "|---|---|---|"]
    lines += [f"| {name} | {fps:.0f} | {100 * frac:.0f} % |" for name, fps, frac in rows]
    text = "\n".join(lines)
    print(text)
    if args.write:
        with open(args.write, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
