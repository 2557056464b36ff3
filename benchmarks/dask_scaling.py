"""Scaling of the several-sources job: two 4K grey sources on a local Dask
cluster of one worker, then of two (one GPU each), frames per second in all.

    python benchmarks/dask_scaling.py [--frames 300] [--size 3840x2160]

The sources are the built-in scene written as BMP folders under
$TMPDIR/fastmog-scaling/ (not .testdata/, which the tests read as data) (BMP decodes with a copy, so reading frames bounds the run
as little as a file source can), made once and reused. Cluster start is not
timed; each run's masks are compared by digest with the other run's.
"""
import argparse
import pathlib
import tempfile
import time

import cv2

import fastmog
from fastmog.scene import BuiltinScene


def make_sources(n, w, h):
    folders = []
    for k, seed in enumerate((2024, 2025)):
        folder = pathlib.Path(tempfile.gettempdir()) / "fastmog-scaling" / f"scene{k}_{w}x{h}_{n}"
        if not (folder.is_dir() and len(list(folder.glob("*.bmp"))) == n):
            folder.mkdir(parents=True, exist_ok=True)
            scene = BuiltinScene(w, h, seed=seed, count=n)
            for i, frame in enumerate(scene.frames(n)):
                cv2.imwrite(str(folder / f"f{i:05d}.bmp"), frame)
        folders.append(folder)
    return folders


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frames", type=int, default=300)
    p.add_argument("--size", default="3840x2160")
    a = p.parse_args()
    w, h = (int(v) for v in a.size.split("x"))
    sources = make_sources(a.frames, w, h)
    policy = "spread" if fastmog.cuda_available() else "cpu"
    digests = None
    for workers in (1, 2):
        with fastmog.local_client(workers) as client:
            client.wait_for_workers(workers)
            started = time.perf_counter()
            results = fastmog.process_sources(sources, client=client, device_policy=policy)
            elapsed = time.perf_counter() - started
        assert all(r.status == "done" for r in results), [r.error for r in results]
        frames = sum(r.frames for r in results)
        where = ", ".join(f"{r.source.name}: {'host' if r.device is None else 'GPU %d' % r.device}"
                          f" {r.frames / r.seconds:.1f} frames/s" for r in results)
        print(f"{workers} worker(s): {frames} frames of {w}x{h} grey in {elapsed:.2f} s = "
              f"{frames / elapsed:.1f} frames/s in all ({where})")
        same = digests is None or digests == [r.digest for r in results]
        digests = [r.digest for r in results]
        print(f"  masks equal to the other run's: {same}")


if __name__ == "__main__":
    main()
