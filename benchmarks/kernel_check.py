"""A quick check of the MOG2 kernels on the GPU: apply, apply_batch and
apply_cameras against the host reference (mixed sizes, kinds, rates, known
foreground; the count of differing masks is printed), then, given the test
data folder, their times on 4K frames tiled from CDnet traffic (models warmed
on 200 frames, CUDA events) and the host cost per call. It is what measured
the figures in cuda/MOG2_NOTES.md; benchmarks/run.py is the full table.

    python benchmarks/kernel_check.py [DATA]
"""
import pathlib
import sys
import time

import cv2
import numpy as np

import fastmog
from fastmog import cpu
from fastmog.testing import iter_frames

rng = np.random.default_rng(7)
s = fastmog.Stream()

def dl(m):
    return m.download(stream=s)

def check_parity():
    bad = 0
    for shape, dt, kw in [((67, 45), np.uint8, {}), ((33, 70, 3), np.uint8, {}),
                          ((20, 37, 4), np.uint8, {"n_mixtures": 4}), ((25, 31, 3), np.float32, {}),
                          ((40, 50), np.uint8, {"detect_shadows": False}),
                          ((40, 50, 3), np.uint8, {"n_mixtures": 8, "var_threshold_gen": 4.0}),
                          # tall and narrow enough for BGR's prefetch_below to ask (cuda/mog2.cu)
                          ((1100, 37, 3), np.uint8, {})]:
        base = rng.integers(0, 255, shape)
        frames = [np.clip(base + rng.normal(0, 25 if k % 3 else 60, shape), 0, 255).astype(dt)
                  for k in range(48)]
        for lr in (-1, 0.02, 0, 1):
            g, c, b = (fastmog.BackgroundSubtractorMOG2(**kw), cpu.BackgroundSubtractorMOG2(**kw),
                       fastmog.BackgroundSubtractorMOG2(**kw))
            i = 0
            for K in (1, 5, 16, 1, 17, 8):
                chunk = frames[i:i + K]; i += K
                ref = c.apply_batch(np.stack(chunk), lr)
                got1 = [dl(g.apply(f, lr, stream=s)).copy() for f in chunk]
                gotb = [dl(m) for m in b.apply_batch(np.stack(chunk), lr, stream=s)]
                for k in range(K):
                    if not (got1[k] == ref[k]).all() or not (gotb[k] == ref[k]).all():
                        bad += 1
            s.synchronize()
            for sub in (g, b):
                if not (dl(sub.get_background_image(stream=s)) == c.get_background_image()).all():
                    bad += 1
                if not (dl(sub.mode_counts()) == c.mode_counts()).all():
                    bad += 1
    # cameras, mixed kinds
    shapes = [((48, 64), np.uint8), ((30, 41, 3), np.uint8), ((17, 23, 4), np.uint8),
              ((33, 35, 3), np.float32), ((100, 7), np.uint8)] * 14
    gs = [fastmog.BackgroundSubtractorMOG2() for _ in shapes]
    cs = [cpu.BackgroundSubtractorMOG2() for _ in shapes]
    for t in range(30):
        fr = [rng.integers(0, 255, sh).astype(dt) for sh, dt in shapes]
        kn = [None if k % 4 else (rng.random(sh[:2]) < .2).astype(np.uint8) for k, (sh, dt) in enumerate(shapes)]
        masks = fastmog.apply_cameras(gs, fr, stream=s, known_foreground=kn)
        ref = cpu.apply_cameras(cs, fr, known_foreground=kn)
        s.synchronize()
        bad += sum(int(not (dl(m) == r).all()) for m, r in zip(masks, ref))
    # uniform cameras; the tall ones are where BGR's prefetch_below asks
    for n, shape in ((70, (24, 40, 3)), (4, (900, 40, 3))):
        gs = [fastmog.BackgroundSubtractorMOG2() for _ in range(n)]
        cs = [cpu.BackgroundSubtractorMOG2() for _ in range(n)]
        for t in range(20):
            fr = [rng.integers(0, 255, shape).astype(np.uint8) for _ in gs]
            masks = fastmog.apply_cameras(gs, fr, stream=s)
            ref = cpu.apply_cameras(cs, fr)
            bad += sum(int(not (dl(m) == r).all()) for m, r in zip(masks, ref))
    print("parity mismatches:", bad, flush=True)

def gpu_ms(fn, n):
    a, b = fastmog.Event(), fastmog.Event()
    a.record(stream=s)
    for i in range(n):
        fn(i)
    b.record(stream=s); b.synchronize()
    return a.elapsed_time(b) / n

def tiled(f, h, w):
    reps = (-(-h // f.shape[0]), -(-w // f.shape[1])) + (1,) * (f.ndim - 2)
    return np.ascontiguousarray(np.tile(f, reps)[:h, :w])

def timings(data):
    h, w = 2160, 3840
    raw = list(iter_frames(data, "traffic", 240))
    for colour in ("grey", "bgr"):
        fr = [tiled(cv2.cvtColor(f, cv2.COLOR_BGR2GRAY) if colour == "grey" else f, h, w) for f in raw]
        dev = [fastmog.GpuMat.from_array(f, stream=s) for f in fr[:48]]
        sub = fastmog.BackgroundSubtractorMOG2()
        for f in fr[:200]:
            sub.apply(f, stream=s)
        mask = fastmog.GpuMat((h, w))
        ms1 = gpu_ms(lambda i: sub.apply(dev[i % 48], stream=s, fgmask=mask), 48)
        modes = float(dl(sub.mode_counts()).mean())
        out = [f"{colour} real 4K ({modes:.2f} modes): apply {ms1:.3f} ms"]
        for K in (1, 2, 4, 8, 16):
            stacks = [dev[j:j + K] for j in range(0, 48 - K + 1, K)]
            ms = gpu_ms(lambda i: sub.apply_batch(stacks[i % len(stacks)], stream=s), 6) / K
            out.append(f"K={K} {ms:.3f}")
        print(", ".join(out), flush=True)
        for d in dev:
            d.close()
        shape = (h, w) if colour == "grey" else (h, w, 3)
        noise = [fastmog.GpuMat.from_array(rng.integers(0, 256, shape, dtype=np.uint8), stream=s) for _ in range(8)]
        sub = fastmog.BackgroundSubtractorMOG2()
        for i in range(40):
            sub.apply(noise[i % 8], stream=s, fgmask=mask)
        msn = gpu_ms(lambda i: sub.apply(noise[i % 8], stream=s, fgmask=mask), 24)
        print(f"{colour} noise 4K ({float(dl(sub.mode_counts()).mean()):.2f} modes): apply {msn:.3f} ms", flush=True)
        for d in noise:
            d.close()
    # copy bandwidth
    a = fastmog.GpuMat((2160 * 8, 3840 * 4)); b = fastmog.GpuMat((2160 * 8, 3840 * 4))
    ms = gpu_ms(lambda i: a.copy_to(b, stream=s), 20)
    print(f"copy {2 * 2160 * 8 * 3840 * 4 / ms / 1e9:.2f} TB/s", flush=True)
    # cameras
    big = [tiled(cv2.cvtColor(f, cv2.COLOR_BGR2GRAY), 8 * 480, 8 * 640) for f in raw[:24]]
    views = [[fastmog.GpuMat.from_array(np.ascontiguousarray(f[(k // 8) * 480:(k // 8 + 1) * 480, (k % 8) * 640:(k % 8 + 1) * 640]), stream=s) for k in range(64)] for f in big[:8]]
    subs = [fastmog.BackgroundSubtractorMOG2() for _ in range(64)]
    for i in range(24):
        fastmog.apply_cameras(subs, views[i % 8], stream=s)
    ms = gpu_ms(lambda i: fastmog.apply_cameras(subs, views[i % 8], stream=s), 40)
    def sep(i):
        for k in range(64):
            subs[k].apply(views[i % 8][k], stream=s)
    ms2 = gpu_ms(sep, 10)
    print(f"64 cams 640x480 grey: apply_cameras {ms:.3f} ms/set, separate {ms2:.3f}", flush=True)
    frame = fastmog.GpuMat.from_array(np.full((64, 64), 9, np.uint8), stream=s)
    sub = fastmog.BackgroundSubtractorMOG2()
    for _ in range(200):
        sub.apply(frame, stream=s)
    s.synchronize()
    t = time.perf_counter(); n = 20000
    for _ in range(n):
        sub.apply(frame, stream=s)
    us = (time.perf_counter() - t) / n * 1e6
    s.synchronize()
    fr16 = [frame] * 16
    def hb(K, n=4000):
        t = time.perf_counter()
        for _ in range(n):
            sub.apply_batch(fr16[:K], stream=s)
        r = (time.perf_counter() - t) / n * 1e6; s.synchronize(); return r
    b1, b16 = hb(1), hb(16)
    subs16 = [fastmog.BackgroundSubtractorMOG2() for _ in range(16)]
    def hc(N, n=4000):
        t = time.perf_counter()
        for _ in range(n):
            fastmog.apply_cameras(subs16[:N], fr16[:N], stream=s)
        r = (time.perf_counter() - t) / n * 1e6; s.synchronize(); return r
    c1, c16 = hc(1), hc(16)
    print(f"host: apply {us:.2f} us; batch K1 {b1:.2f} K16 {b16:.2f} -> {(b16-b1)/15:.2f}/frame; cameras N1 {c1:.2f} N16 {c16:.2f} -> {(c16-c1)/15:.2f}/cam", flush=True)

check_parity()
if len(sys.argv) > 1:
    timings(pathlib.Path(sys.argv[1]))
