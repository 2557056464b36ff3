"""One table per run: fastmog (kernel, pipeline, many cameras, per-call cost,
scaling, and the host reference) beside OpenCV's CPU MOG2 on the same frames
and machine, beside the physical ceilings measured in the same run (device
copy bandwidth, pinned and pageable PCIe), with ratios.

    python benchmarks/run.py [--data DIR] [--write benchmarks/RESULTS.md]

GPU times come from CUDA events; every model is warmed before timing, and
inputs rotate over many frames so caches do not flatter the result. Real
frames are vtest.avi (pedestrians, OpenCV's samples) tiled to the size;
noise frames keep every mode of every pixel busy. Never zeros.
Without a usable GPU the host rows still run and each GPU section is one
"not run: <reason>" row.
"""
import argparse
import datetime
import os
import pathlib
import sys
import time

import numpy as np

import fastmog

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from conftest import find_test_data  # noqa: E402
from mog2_cases import iter_frames  # noqa: E402

import cv2  # noqa: E402


def gpu_ms(stream, fn, repeats):
    start, end = fastmog.Event(), fastmog.Event()
    start.record(stream=stream)
    for i in range(repeats):
        fn(i)
    end.record(stream=stream)
    end.synchronize()
    return start.elapsed_time(end) / repeats


def host_ms(fn, repeats):
    t0 = time.perf_counter()
    for i in range(repeats):
        fn(i)
    return (time.perf_counter() - t0) * 1e3 / repeats


def tiled(frame, h, w):
    reps = (-(-h // frame.shape[0]), -(-w // frame.shape[1])) + (1,) * (frame.ndim - 2)
    return np.ascontiguousarray(np.tile(frame, reps)[:h, :w])


def real_frames(data, h, w, colour, count):
    out = []
    for f in iter_frames(data, "vtest", count):
        if colour == "grey":
            f = cv2.cvtColor(f, cv2.COLOR_BGR2GRAY)
        out.append(tiled(f, h, w))
    return out


def noise_frames(rng, shape, count):
    return [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(count)]


class Table:
    def __init__(self):
        self.rows = []

    def add(self, section, item, fastmog_value, peer="", ceiling="", ratio=""):
        self.rows.append((section, item, fastmog_value, peer, ceiling, ratio))
        print(f"  {section:10} {item:44} {fastmog_value:>22} {peer:>24} {ceiling:>22} {ratio}",
              flush=True)

    def markdown(self):
        lines = ["| section | measure | fastmog | peer | ceiling | ratio |",
                 "|---|---|---|---|---|---|"]
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        return "\n".join(lines)


def measure_ceilings(stream, t):
    a = fastmog.GpuMat((16384, 16384), np.float32)  # 1 GiB, far beyond L2
    b = fastmog.GpuMat((16384, 16384), np.float32)
    a.fill(1.0, stream=stream)
    a.copy_to(b, stream=stream)
    ms = gpu_ms(stream, lambda i: a.copy_to(b, stream=stream), 10)
    copy_bw = 2 * a.nbytes / ms / 1e9  # TB/s, bytes read + written
    t.add("ceiling", "device-to-device copy (read+write)", f"{copy_bw:.2f} TB/s")
    a.close(), b.close()

    shape = (2160, 3840)
    pinned = fastmog.pinned_empty(shape)
    pinned[...] = 77
    pageable = np.full(shape, 77, np.uint8)
    dev = fastmog.GpuMat(shape)
    dev.upload(pinned, stream=stream)
    up = gpu_ms(stream, lambda i: dev.upload(pinned, stream=stream), 30)
    down = gpu_ms(stream, lambda i: dev.download(pinned, stream=stream, blocking=False), 30)

    def pageable_up(i):
        dev.upload(pageable, stream=stream)
        stream.synchronize()

    up_pageable = host_ms(pageable_up, 20)
    down_pageable = host_ms(lambda i: dev.download(pageable, stream=stream), 20)
    nbytes = pinned.nbytes
    t.add("ceiling", "4K grey frame up, pinned", f"{up:.3f} ms ({nbytes / up / 1e6:.1f} GB/s)")
    t.add("ceiling", "4K grey frame down, pinned", f"{down:.3f} ms ({nbytes / down / 1e6:.1f} GB/s)")
    t.add("ceiling", "4K grey frame up, pageable (host wall)",
          f"{up_pageable:.3f} ms ({nbytes / up_pageable / 1e6:.1f} GB/s)")
    t.add("ceiling", "4K grey frame down, pageable (host wall)",
          f"{down_pageable:.3f} ms ({nbytes / down_pageable / 1e6:.1f} GB/s)")
    dev.close()
    return copy_bw, max(up, down)


def kernel_run(stream, frames_host, repeats=60, n_mixtures=5):
    """Warms a model over the frames, then times `repeats` applies rotating
    over them. Returns (ms per frame, mean modes in use)."""
    frames = [fastmog.GpuMat.from_array(f, stream=stream) for f in frames_host]
    sub = fastmog.BackgroundSubtractorMOG2(n_mixtures=n_mixtures)
    mask = fastmog.GpuMat(frames_host[0].shape[:2], np.uint8)
    for _ in range(2):
        for f in frames:
            sub.apply(f, stream=stream, fgmask=mask)
    ms = gpu_ms(stream, lambda i: sub.apply(frames[i % len(frames)], stream=stream, fgmask=mask),
                repeats)
    counts = sub.mode_counts().download(stream=stream)
    for f in frames:
        f.close()
    kernel_run.last_counts = counts
    return ms, float(counts.mean())


def sector_bytes_per_pixel(mode_counts, channels):
    """Bytes per pixel when the model's state moves in 32-byte DRAM sectors
    (8 floats of 8 neighbouring pixels): a sector of mode k is read and written
    if any of its 8 pixels uses mode k. This, not the mean, is the minimum
    for a pixel-parallel structure-of-arrays layout."""
    counts = mode_counts.reshape(-1)
    groups = counts[: counts.size // 8 * 8].reshape(-1, 8).max(axis=1)
    sectors = sum(int(np.count_nonzero(groups > k)) for k in range(8))
    state = 2 * 32 * (2 + channels) * sectors / counts.size
    return channels + 1 + 2 + state


def model_bytes_per_pixel(channels, modes):
    # frame read + mask write + mode count read and write + the state of the
    # modes in use (weight, variance, channel means: floats) read and written
    return channels + 1 + 2 + 2 * 4 * (2 + channels) * modes


def opencv_cpu_ms(frames, repeats=12):
    sub = cv2.createBackgroundSubtractorMOG2()
    for f in frames[:5]:
        sub.apply(f)
    return host_ms(lambda i: sub.apply(frames[(5 + i) % len(frames)]), repeats)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def measure_host_reference(data, t, warm=50, timed=150):
    """fastmog.cpu against OpenCV's CPU MOG2, both with their default threads,
    on the same consecutive vtest.avi frames at their native 768x576: each
    model learns from `warm` frames, then `timed` further frames are timed.
    The masks of the timed frames are compared afterwards, outside the timing."""
    bgr = list(iter_frames(data, "vtest", warm + timed))
    for colour in ("bgr", "grey"):
        frames = bgr if colour == "bgr" else [cv2.cvtColor(f, cv2.COLOR_BGR2GRAY) for f in bgr]
        ours = fastmog.cpu.BackgroundSubtractorMOG2()
        ref = cv2.createBackgroundSubtractorMOG2()
        ours_masks = [np.empty(frames[0].shape[:2], np.uint8) for _ in range(timed)]
        ref_masks = []
        for f in frames[:warm]:
            ours.apply(f)
            ref.apply(f)
        ms = host_ms(lambda i: ours.apply(frames[warm + i], fgmask=ours_masks[i]), timed)
        cv_ms = host_ms(lambda i: ref_masks.append(ref.apply(frames[warm + i])), timed)
        differ = sum(int(np.count_nonzero(a != b)) for a, b in zip(ours_masks, ref_masks))
        h, w = frames[0].shape[:2]
        t.add("host", f"{w}x{h} {colour} vtest: fastmog.cpu vs OpenCV {cv2.__version__} CPU MOG2",
              f"{ms:.2f} ms/frame", f"{cv_ms:.2f} ms/frame",
              f"{os.cpu_count()} cores, default threads",
              f"{cv_ms / ms:.2f}x OpenCV's speed, {differ} mask pixels differ")


def measure_kernels(stream, data, rng, copy_bw, t):
    h, w = 2160, 3840
    kernel_ms = {}
    for colour, channels in (("grey", 1), ("bgr", 3)):
        for scene in ("real", "noise"):
            shape = (h, w) if channels == 1 else (h, w, channels)
            frames = real_frames(data, h, w, colour, 40) if scene == "real" \
                else noise_frames(rng, shape, 12)
            ms, modes = kernel_run(stream, frames)
            kernel_ms[(colour, scene)] = (ms, frames)
            floor = h * w * model_bytes_per_pixel(channels, modes) / (copy_bw * 1e12) * 1e3
            sector_floor = h * w * sector_bytes_per_pixel(kernel_run.last_counts, channels) \
                / (copy_bw * 1e12) * 1e3
            t.add("kernel", f"4K {colour} {scene} ({modes:.2f} modes/pixel)", f"{ms:.3f} ms/frame",
                  "", f"{floor:.3f} ms floor (mean modes)", f"{100 * floor / ms:.0f} % of roofline")
            t.add("kernel", f"4K {colour} {scene}, sector-granular floor", f"{ms:.3f} ms/frame",
                  "", f"{sector_floor:.3f} ms floor (32 B sectors)",
                  f"{100 * sector_floor / ms:.0f} % of roofline")
    for colour in ("grey", "bgr"):
        ms, frames = kernel_ms[(colour, "real")]
        cpu = opencv_cpu_ms(frames)
        t.add("peer", f"4K {colour} real: OpenCV {cv2.__version__} CPU MOG2 "
              f"({os.cpu_count()} cores)", f"{ms:.3f} ms/frame", f"{cpu:.2f} ms/frame", "",
              f"{cpu / ms:.0f}x faster")
    ref = {("grey", "real"): 0.155, ("bgr", "real"): 0.208, ("grey", "noise"): 0.444}
    for key, ref_ms in ref.items():
        ms = kernel_ms[key][0]
        t.add("peer", f"4K {key[0]} {key[1]}: OpenCV CUDA MOG2 kernel (H200, quoted)",
              f"{ms:.3f} ms/frame", f"{ref_ms:.3f} ms/frame", "", f"{ref_ms / ms:.2f}x")
    return kernel_ms


def measure_pipeline(data, pcie_ms, t, n=400):
    """Host frames in, host masks out: fastmog.pipeline with pinned and with
    pageable frames (ordinary numpy arrays, as decoders hand out), and the
    naive one-stream loop, against the duplex PCIe bound (upload of one frame
    overlapped with the download of another: the slower of the two)."""
    pageable = real_frames(data, 2160, 3840, "grey", 40)  # 40 distinct frames, rotated
    pinned = []
    for f in pageable:
        p = fastmog.pinned_like(f)
        p[...] = f
        pinned.append(p)
    streams = [fastmog.Stream() for _ in range(3)]
    bound = f"{pcie_ms:.3f} ms (duplex PCIe)"

    def pipeline_ms(frames):
        sub = fastmog.BackgroundSubtractorMOG2()
        for _ in fastmog.pipeline(sub, (frames[i % 40] for i in range(40)), streams=streams):
            pass
        t0 = time.perf_counter()
        for _ in fastmog.pipeline(sub, (frames[i % 40] for i in range(n)), streams=streams):
            pass
        return (time.perf_counter() - t0) * 1e3 / n

    ms = pipeline_ms(pinned)
    t.add("pipeline", "4K grey, pinned host frames -> host masks", f"{ms:.3f} ms/frame",
          "", bound, f"{ms / pcie_ms:.2f}x the bound")
    ms = pipeline_ms(pageable)
    t.add("pipeline", "4K grey, pageable host frames -> host masks", f"{ms:.3f} ms/frame",
          "", bound, f"{ms / pcie_ms:.2f}x the bound (target <= 1.5x)")

    s = streams[0]
    naive = fastmog.BackgroundSubtractorMOG2()
    out = fastmog.pinned_empty((2160, 3840))

    def naive_pinned(i):
        naive.apply(pinned[i % 40], stream=s).download(out, stream=s)

    for i in range(40):
        naive_pinned(i)
    ms = host_ms(naive_pinned, 200)
    t.add("pipeline", "pinned frames, naive loop (one stream, sync per frame)",
          f"{ms:.3f} ms/frame", "", bound, f"{ms / pcie_ms:.2f}x the bound")

    naive = fastmog.BackgroundSubtractorMOG2()

    def naive_pageable(i):
        # what a user writes first: numpy frame in, new numpy mask out
        naive.apply(pageable[i % 40], stream=s).download(stream=s)

    for i in range(40):
        naive_pageable(i)
    ms = host_ms(naive_pageable, 200)
    old = 1.53  # ms/frame on the H200 before pageable staging was threaded (issue 11)
    t.add("pipeline", "pageable frames, naive loop apply(frame).download()",
          f"{ms:.3f} ms/frame", f"{old:.2f} ms/frame (before, H200)", bound,
          f"{ms / pcie_ms:.2f}x the bound, {old / ms:.2f}x faster than before (target >= 2x)")
    for x in streams:
        x.close()


def measure_batch(stream, data, copy_bw, t, cameras=64, h=480, w=640):
    big = real_frames(data, 8 * h, 8 * w, "grey", 24)
    sets = [np.ascontiguousarray(f.reshape(8, h, 8, w).transpose(0, 2, 1, 3).reshape(cameras * h, w))
            for f in big]
    tall = [fastmog.GpuMat.from_array(s, stream=stream) for s in sets]
    one = fastmog.BackgroundSubtractorMOG2()
    mask = fastmog.GpuMat((cameras * h, w))
    for _ in range(2):
        for f in tall:
            one.apply(f, stream=stream, fgmask=mask)
    stream.synchronize()
    t0 = time.perf_counter()
    ms = gpu_ms(stream, lambda i: one.apply(tall[i % len(tall)], stream=stream, fgmask=mask), 40)
    wall_one = (time.perf_counter() - t0) * 1e3 / 40
    modes = float(one.mode_counts().download(stream=stream).mean())
    floor = cameras * h * w * model_bytes_per_pixel(1, modes) / (copy_bw * 1e12) * 1e3
    t.add("cameras", f"{cameras} x {w}x{h} grey, one apply on the stacked frame",
          f"{ms:.3f} ms/set (wall {wall_one:.3f})", "", f"{floor:.3f} ms floor",
          f"{100 * floor / ms:.0f} % of roofline")

    views = [[f[k * h:(k + 1) * h, :] for k in range(cameras)] for f in tall]
    subs = [fastmog.BackgroundSubtractorMOG2() for _ in range(cameras)]
    masks = [fastmog.GpuMat((h, w)) for _ in range(cameras)]

    def separate(i):
        for k in range(cameras):
            subs[k].apply(views[i % len(views)][k], stream=stream, fgmask=masks[k])

    for i in range(4):
        separate(i)
    stream.synchronize()
    t0 = time.perf_counter()
    ms_sep = gpu_ms(stream, separate, 20)
    wall_sep = (time.perf_counter() - t0) * 1e3 / 20
    t.add("cameras", f"{cameras} x {w}x{h} grey, {cameras} separate apply calls",
          f"{ms_sep:.3f} ms/set (wall {wall_sep:.3f})", "", f"{floor:.3f} ms floor",
          f"{100 * floor / max(ms_sep, wall_sep):.0f} % of roofline")


def measure_overhead(stream, t):
    frame = fastmog.GpuMat.from_array(np.full((64, 64), 9, np.uint8), stream=stream)
    sub = fastmog.BackgroundSubtractorMOG2()
    for _ in range(100):
        sub.apply(frame, stream=stream)
    stream.synchronize()
    us = host_ms(lambda i: sub.apply(frame, stream=stream), 20000) * 1e3
    stream.synchronize()
    t.add("per call", "apply host time, 64x64 device-resident frame", f"{us:.2f} us/call", "",
          "5 us target", "")


def measure_scaling(stream, data, t):
    for w, h in ((320, 240), (640, 480), (1280, 720), (1920, 1080), (3840, 2160), (7680, 4320)):
        frames = real_frames(data, h, w, "grey", 16)
        ms, modes = kernel_run(stream, frames, repeats=40)
        t.add("scaling", f"{w}x{h} grey real ({modes:.2f} modes)", f"{w * h / ms / 1e3:.0f} MP/s",
              "", "", f"{ms:.3f} ms/frame")


def gpu_unusable_reason():
    """None where a CUDA GPU can be used, else why not."""
    if fastmog.cuda_available():
        return None
    status, text = fastmog._fastmog._cuda_status()
    return f"no usable CUDA GPU: {status} ({text})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=pathlib.Path, default=None)
    parser.add_argument("--write", type=pathlib.Path, default=None)
    args = parser.parse_args()
    data = args.data or find_test_data()
    if data is None:
        sys.exit("test data not found: pass --data DIR (the folder holding opencv_samples_video)")
    no_gpu = gpu_unusable_reason()
    if no_gpu is None:
        props = fastmog.device_properties(0)
        runtime, driver = fastmog._fastmog._versions()
        device = (f"{props['name']}, driver CUDA {driver // 1000}.{driver % 1000 // 10}, "
                  f"runtime {runtime // 1000}.{runtime % 1000 // 10}")
    else:
        device = no_gpu
    header = (f"{device}, {cpu_model()} ({os.cpu_count()} CPU cores), "
              f"OpenCV {cv2.__version__}, {datetime.date.today().isoformat()}")
    print(header)
    rng = np.random.default_rng(7)
    t = Table()
    if no_gpu is None:
        with fastmog.Stream() as stream:
            copy_bw, pcie_ms = measure_ceilings(stream, t)
            measure_kernels(stream, data, rng, copy_bw, t)
            measure_pipeline(data, pcie_ms, t)
            measure_batch(stream, data, copy_bw, t)
            measure_overhead(stream, t)
            measure_scaling(stream, data, t)
    else:
        for section in ("ceiling", "kernel", "peer", "pipeline", "cameras", "per call",
                        "scaling"):
            t.add(section, "GPU rows", f"not run: {no_gpu}")
    measure_host_reference(data, t)
    text = f"# fastmog benchmark results\n\n{header}\n\n" \
           f"Command: `python benchmarks/run.py`\n\n{t.markdown()}\n"
    print()
    print(text)
    if args.write:
        args.write.write_text(text)


if __name__ == "__main__":
    main()
