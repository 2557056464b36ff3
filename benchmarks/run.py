"""One table per run: fastmog (kernel, batched frames, many cameras, pipeline,
per-call cost, scaling, and the host reference) beside OpenCV's CPU MOG2 on
the same frames and machine, beside OpenCV's CUDA kernel as we measured it
(issue 25's table, on an H200), beside the physical ceilings measured in the
same run (device copy bandwidth, pinned and pageable PCIe), with ratios and
issue 25's targets.

    python benchmarks/run.py [--data DIR] [--write benchmarks/RESULTS.md]
        [--instructions benchmarks/kernel_instructions.json]

The instruction floor beside each single-frame kernel row is the time the
schedulers need to issue the kernel's instructions (Nsight Compute, written
by benchmarks/kernel_instructions.py in the same session on the same card:
the rows say when it is missing or from another card).

GPU times come from CUDA events; every model is warmed before timing, and
inputs rotate over many device-resident frames so caches do not flatter the
result. The kernel, batched and camera rows use issue 13's scene: the CDnet
traffic sequence (a real road) tiled to 4K, models warmed on 200 frames
(rotating over the clip's frames); noise frames keep every mode of every pixel
busy. The pipeline and scaling rows tile vtest.avi (pedestrians, OpenCV's
samples). Never zeros. Without a usable GPU the host rows (including the
floor's model counts) still run and each GPU section is one "not run: <reason>"
row; a section whose API this build lacks is one "not run" row too.

The floor (issue 13). A frame's update must at least move, per pixel:
the frame (C bytes), the mask (1), the mode count (read and written, 2),
every weight of the modes in use (read and written, 8 per mode), the mean and
variance of the modes the update VISITS (read, 4 (C + 1) per mode) and of the
modes it CHANGES (written, 4 (C + 1) per mode). The floor is those bytes over
the device copy bandwidth of the same run; "% of floor" is floor / measured
(issue 13's target "within 1.3x of the floor" is >= 77 %).
Modes visited are counted from the model, not guessed: fastmog.cpu (bit-exact
with the GPU kernel, default parameters: var_threshold_gen = 9) is warmed on
the same frames, then goes on through the frames the GPU times; before every
10th of them, per pixel, the first mode m < mode_count with dist2 <
var_threshold_gen * variance (dist2 = squared distance of the sample to the
mode's mean, summed over channels) gives m + 1 modes visited, and no fit gives
mode_count. Modes in use are the mode count before the frame. One changed
mode per pixel is counted (the fitted or the new one); the slots moved by the
reordering are not, nor what the shadow test reads for foreground pixels, so
the floor is a lower bound (a weak mode pruned before the fit ends the loop
early in the kernel but counts as visited here: rare, and by one mode).
The host model runs on the top 240 rows of the 4K frames: one tile period of
the CDnet scene, so exactly the 4K average, and a large sample for noise. Its
mode counts after warm-up are compared with the GPU model's.
The batched floor (apply_batch, K frames per pass over the model) moves frame
and mask every frame and the state of every mode in use (mode count, weight,
variance, means: read and written) once per K frames.
"""
import argparse
import datetime
import json
import os
import pathlib
import sys
import time

import cv2
import numpy as np

import fastmog
from fastmog.testing import find_test_data, iter_frames

HERE = pathlib.Path(__file__).resolve().parent


def gpu_ms(stream, fn, repeats):
    start, end = fastmog.Event(), fastmog.Event()
    start.record(stream=stream)
    for i in range(repeats):
        fn(i)
    end.record(stream=stream)
    end.synchronize()
    return start.elapsed_time(end) / repeats


def steady_ms(masks, skip):
    """ms per mask of an iterator of masks, from its `skip`-th mask to its end."""
    for i, _ in enumerate(masks):
        if i + 1 == skip:
            t0, count = time.perf_counter(), 0
        elif i >= skip:
            count += 1
    return (time.perf_counter() - t0) * 1e3 / count


def host_ms(fn, repeats):
    t0 = time.perf_counter()
    for i in range(repeats):
        fn(i)
    return (time.perf_counter() - t0) * 1e3 / repeats


def tiled(frame, h, w):
    reps = (-(-h // frame.shape[0]), -(-w // frame.shape[1])) + (1,) * (frame.ndim - 2)
    return np.ascontiguousarray(np.tile(frame, reps)[:h, :w])


def real_frames(data, h, w, colour, count, sequence="vtest"):
    out = []
    for f in iter_frames(data, sequence, count):
        if colour == "grey":
            f = cv2.cvtColor(f, cv2.COLOR_BGR2GRAY)
        out.append(tiled(f, h, w))
    return out


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
    both = duplex_ms(shape)
    nbytes = pinned.nbytes
    t.add("ceiling", "4K grey frame up, pinned", f"{up:.3f} ms ({nbytes / up / 1e6:.1f} GB/s)")
    t.add("ceiling", "4K grey frame down, pinned", f"{down:.3f} ms ({nbytes / down / 1e6:.1f} GB/s)")
    t.add("ceiling", "4K grey frame up and one down at once, pinned", f"{both:.3f} ms a pair",
          "", "", f"{both / max(up, down):.2f}x the slower direction alone")
    t.add("ceiling", "4K grey frame up, pageable (host wall)",
          f"{up_pageable:.3f} ms ({nbytes / up_pageable / 1e6:.1f} GB/s)")
    t.add("ceiling", "4K grey frame down, pageable (host wall)",
          f"{down_pageable:.3f} ms ({nbytes / down_pageable / 1e6:.1f} GB/s)")
    dev.close()
    return copy_bw, both


def duplex_ms(shape, pairs=60, trials=3):
    """The duplex PCIe bound of a pipeline of `shape` frames: ms for one
    frame's upload and one mask's download (H x W) running at once on two
    streams (pinned memory, device buffers of their own), per pair, the best
    of `trials` runs of `pairs` (one run alone once read 0.194 ms where the
    same call's other measured 0.168: MAIN_JOB_RESULTS.md, v15). Both
    directions busy cost more than the slower one alone: the bus and the
    host's memory are shared."""
    ups, downs = fastmog.Stream(), fastmog.Stream()
    host = [fastmog.pinned_empty(shape), fastmog.pinned_empty(shape[:2])]
    dev = [fastmog.GpuMat(shape), fastmog.GpuMat(shape[:2])]
    host[0][...] = 77

    def pair(i):
        dev[0].upload(host[0], stream=ups)
        dev[1].download(host[1], stream=downs, blocking=False)

    pair(0)
    ups.synchronize(), downs.synchronize()
    best = float("inf")
    for _ in range(trials):
        t0 = time.perf_counter()
        for i in range(pairs):
            pair(i)
        ups.synchronize(), downs.synchronize()
        best = min(best, (time.perf_counter() - t0) * 1e3 / pairs)
    for x in dev + [ups, downs]:
        x.close()
    return best


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
    return ms, float(counts.mean())


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


# OpenCV's CUDA MOG2 kernel on the same 4K scenes, as we measured it side by
# side with fastmog on an H200 (issue 25's table; ms per frame); no OpenCV CUDA
# build runs here. 64 cameras: 64 calls of its kernel per set of 640x480 frames.
OPENCV_CUDA_QUOTED = {("grey", "real"): 0.310, ("bgr", "real"): 0.404,
                      ("grey", "noise"): 0.450, ("bgr", "noise"): 0.422}
OPENCV_CUDA_CAMERAS = 0.889
OPENCV_CUDA = "OpenCV CUDA kernel (ours, issue 25, H200)"
# issue 25's targets on the H200, ms per 4K frame (64 cameras: ms per set)
SINGLE_TARGET = {("grey", "real"): 0.155, ("bgr", "real"): 0.27,
                 ("grey", "noise"): 0.35, ("bgr", "noise"): 0.35}
BATCH16_TARGET = {"grey": 0.078, "bgr": 0.135}
CAMERAS_TARGET = 0.30
PINNED_TARGET, PAGEABLE_TARGET = 1 / 0.9, 1.3     # times the duplex PCIe bound
SCENES = [(colour, scene) for colour in ("grey", "bgr") for scene in ("real", "noise")]
SCENE_H, SCENE_W = 2160, 3840
WARM = 200          # frames every model learns before timing (issue 13's reference)
TIMED = 100         # 4K frames timed per scene, continuing the rotation
FLOOR_ROWS = 240    # the CDnet traffic frame's height: the 4K frame tiles it exactly


def scene_frames(data, colour, scene, rows=SCENE_H, width=SCENE_W):
    """The frames of one of issue 13's 4K scenes, or their top `rows` rows:
    every frame of the CDnet traffic clip tiled, or 12 noise frames (seeded per
    frame, so a crop is the crop of the full frame)."""
    if scene == "real":
        return real_frames(data, rows, width, colour, None, "traffic")
    shape = (SCENE_H, width) + ((3,) if colour == "bgr" else ())
    return [np.ascontiguousarray(np.random.default_rng(1000 + i).integers(
        0, 256, shape, dtype=np.uint8)[:rows]) for i in range(12)]


def visited_modes(state, frame, var_threshold_gen=9.0):
    """Per pixel, how many modes the next update of `frame` reads the mean and
    variance of: m + 1 for the first mode m < mode_count with dist2 <
    var_threshold_gen * variance, else mode_count. float32 in the kernel's
    order (diff = mean - x, dist2 summed over channels from 0), so the fit test
    decides as the kernel does. `state` is fastmog.cpu's _state()."""
    mean, variance, counts = state["mean"], state["variance"], state["mode_count"]
    x = np.asarray(frame, np.float32)
    x = x[None] if x.ndim == 2 else np.moveaxis(x, -1, 0)  # (C, H, W)
    dist2 = np.zeros(variance.shape, np.float32)
    for c in range(x.shape[0]):
        diff = mean[:, c] - x[c]
        dist2 += diff * diff
    fits = dist2 < np.float32(var_threshold_gen) * variance
    fits &= np.arange(variance.shape[0])[:, None, None] < counts
    return np.where(fits.any(axis=0), fits.argmax(axis=0) + 1, counts).astype(np.int64)


def floor_bytes_per_pixel(channels, modes, visited, changed=1.0):
    """Issue 13's floor (module docstring), uint8 frames; modes and visited are
    means per pixel: frame + mask + mode count read and written + weights of
    the modes in use read and written + mean and variance of the visited modes
    read + of the changed modes written."""
    return channels + 1 + 2 + 2 * 4 * modes + 4 * (1 + channels) * (visited + changed)


def batched_bytes_per_pixel(channels, modes, k):
    """Per frame, K frames per pass: frame and mask every frame; mode count and
    the whole state of the modes in use read and written once per pass."""
    return channels + 1 + (2 + 2 * 4 * (2 + channels) * modes) / k


def model_floor(frames, warm=WARM, span=TIMED, every=10):
    """Warms fastmog.cpu on frames[i % n] for i < warm, then goes on through
    the `span` frames the GPU times, counting before every `every`-th of them
    the modes in use and the modes its update visits. Returns the means over
    pixels and sampled frames, the floor's bytes per pixel and the mode counts
    right after the warm-up."""
    n = len(frames)
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    for i in range(warm):
        sub.apply(frames[i % n])
    warm_counts = sub.mode_counts()
    modes, visited = [], []
    for j in range(span):
        frame = frames[(warm + j) % n]
        if j % every == 0:
            state = sub._state()
            modes.append(float(state["mode_count"].mean()))
            visited.append(float(visited_modes(state, frame, sub.var_threshold_gen).mean()))
        sub.apply(frame)
    modes, visited = float(np.mean(modes)), float(np.mean(visited))
    channels = 1 if frames[0].ndim == 2 else frames[0].shape[2]
    return {"modes": modes, "visited": visited, "warm_counts": warm_counts,
            "bytes": floor_bytes_per_pixel(channels, modes, visited)}


def measure_floors(data, t):
    """The floor's per-pixel bytes of each 4K scene, from the host model on
    the top FLOOR_ROWS rows (needs no GPU)."""
    floors = {}
    for colour, scene in SCENES:
        floors[(colour, scene)] = f = model_floor(scene_frames(data, colour, scene, FLOOR_ROWS))
        t.add("floor", f"4K {colour} {scene}: modes in use, visited (fastmog.cpu, "
              f"{FLOOR_ROWS} rows)", f"{f['modes']:.2f} in use, {f['visited']:.2f} visited",
              "", f"{f['bytes']:.1f} B/pixel", "moves by the reordering not counted: lower bound")
    return floors


def ms_of(bytes_per_pixel, pixels, copy_bw):
    return pixels * bytes_per_pixel / (copy_bw * 1e12) * 1e3


def warm_and_time(stream, frames, shape, warm=WARM, repeats=TIMED, modes=5):
    """A new model of `modes` modes learns device frames[i % n] for i < warm;
    then `repeats` further frames, continuing the rotation, are timed with
    events. Returns (ms per frame, mode counts right after the warm-up)."""
    n = len(frames)
    sub = fastmog.BackgroundSubtractorMOG2(n_mixtures=modes)
    mask = fastmog.GpuMat(shape[:2], np.uint8)
    for i in range(warm):
        sub.apply(frames[i % n], stream=stream, fgmask=mask)
    counts = sub.mode_counts().download(stream=stream)
    ms = gpu_ms(stream, lambda i: sub.apply(frames[(warm + i) % n], stream=stream, fgmask=mask),
                repeats)
    sub.close()
    mask.close()
    return ms, counts


def issue_floor(instructions, colour, scene):
    """The instruction floor's cell for a kernel row: from
    kernel_instructions.py's JSON (None: not measured)."""
    if instructions is None:
        return "issue floor not measured (kernel_instructions.py)"
    r = instructions["scenes"].get(f"{colour} {scene}")
    if r is None:
        return "issue floor not measured for this scene"
    here = fastmog.device_properties(0)["name"]
    other = "" if instructions["device"] == here else f", measured on {instructions['device']}"
    return (f"{r['issue_floor_ms']:.3f} ms issue floor ({r['thread_instructions_per_pixel']:.0f} "
            f"instructions/pixel, {r['warp_instructions_per_32_pixels']:.0f} per warp of 32 at "
            f"{r['clock_ghz']:.2f} GHz{other})")


def measure_kernels(stream, data, floors, copy_bw, t, instructions=None):
    """Issue 25's single-frame rows. Returns {(colour, scene): ms} and the
    device frames of the real scenes (for the batched rows; the caller closes)."""
    kernel_ms, device_real = {}, {}
    pixels = SCENE_H * SCENE_W
    for colour, scene in SCENES:
        host = scene_frames(data, colour, scene)
        frames = [fastmog.GpuMat.from_array(f, stream=stream) for f in host]
        ms, counts = warm_and_time(stream, frames, host[0].shape)
        kernel_ms[(colour, scene)] = ms
        f = floors[(colour, scene)]
        channels = 1 if colour == "grey" else 3
        floor = ms_of(f["bytes"], pixels, copy_bw)
        all_state = ms_of(model_bytes_per_pixel(channels, float(counts.mean())), pixels, copy_bw)
        cv = OPENCV_CUDA_QUOTED[(colour, scene)]
        differ = int(np.count_nonzero(counts[:FLOOR_ROWS] != f["warm_counts"]))
        target = SINGLE_TARGET[(colour, scene)]
        t.add("kernel", f"4K {colour} {scene} ({f['modes']:.2f} modes, {f['visited']:.2f} visited)",
              f"{ms:.3f} ms/frame", f"{cv:.3f} ms {OPENCV_CUDA}",
              f"{floor:.3f} ms floor (visited modes); "
              f"{issue_floor(instructions, colour, scene)}",
              f"{100 * floor / ms:.0f} % of the bytes floor, {cv / ms:.2f}x OpenCV CUDA "
              f"(target <= {target} ms: {cv / target:.2f}x)")
        t.add("kernel", f"4K {colour} {scene}, every mode in use read and written",
              f"{ms:.3f} ms/frame", "", f"{all_state:.3f} ms (all-state bytes)",
              f"{100 * all_state / ms:.0f} %; GPU vs host model mode counts after warm-up: "
              f"{differ} of {counts[:FLOOR_ROWS].size} pixels differ")
        if scene == "real":
            device_real[colour] = (host, frames)
        else:
            for g in frames:
                g.close()
    for colour in ("grey", "bgr"):
        host, _ = device_real[colour]
        ms = kernel_ms[(colour, "real")]
        cpu = opencv_cpu_ms(host)
        t.add("peer", f"4K {colour} real: OpenCV {cv2.__version__} CPU MOG2 "
              f"({os.cpu_count()} cores)", f"{ms:.3f} ms/frame", f"{cpu:.2f} ms/frame", "",
              f"{cpu / ms:.0f}x faster")
    return kernel_ms, device_real


def measure_batched(stream, device_real, copy_bw, t, ks=(1, 2, 4, 8, 16), frames_timed=128):
    """apply_batch on the 4K real scenes: ms per frame for K frames per call,
    against the batched floor and OpenCV's CUDA kernel per frame."""
    if not hasattr(fastmog.BackgroundSubtractorMOG2, "apply_batch"):
        t.add("batched", "apply_batch rows",
              "not run: BackgroundSubtractorMOG2.apply_batch is missing from this build")
        return
    pixels = SCENE_H * SCENE_W
    for colour, (host, frames) in device_real.items():
        n, channels = len(frames), 1 if colour == "grey" else 3
        cv = OPENCV_CUDA_QUOTED[(colour, "real")]
        for k in ks:
            sub = fastmog.BackgroundSubtractorMOG2()
            masks = tuple(fastmog.GpuMat((SCENE_H, SCENE_W), np.uint8) for _ in range(k))
            warm = [frames[i % n] for i in range(WARM)]
            for a in range(0, WARM, k):  # the same 200 frames; the last pass may be shorter
                chunk = tuple(warm[a:a + k])
                sub.apply_batch(chunk, stream=stream, fgmasks=masks[:len(chunk)])
            modes = float(sub.mode_counts().download(stream=stream).mean())
            calls = max(frames_timed // k, 4)
            batches = [tuple(frames[(WARM + j * k + i) % n] for i in range(k)) for j in range(calls)]
            ms = gpu_ms(stream, lambda j: sub.apply_batch(batches[j], stream=stream,
                                                           fgmasks=masks), calls) / k
            floor = ms_of(batched_bytes_per_pixel(channels, modes, k), pixels, copy_bw)
            target = (f" (target <= {BATCH16_TARGET[colour]} ms: "
                      f"{cv / BATCH16_TARGET[colour]:.1f}x)" if k == 16 else "")
            t.add("batched", f"4K {colour} real, apply_batch K={k} ({modes:.2f} modes)",
                  f"{ms:.3f} ms/frame", f"{cv:.3f} ms {OPENCV_CUDA}",
                  f"{floor:.3f} ms floor (state once per {k})",
                  f"{100 * floor / ms:.0f} % of floor, {cv / ms:.2f}x OpenCV CUDA{target}")
            sub.close()
            for m in masks:
                m.close()


def measure_pipeline(data, pcie_ms, t, n=400):
    """Host frames in, host masks out: fastmog.pipeline with pinned and with
    pageable frames (ordinary numpy arrays, as decoders hand out), and the
    naive one-stream loop, against the duplex PCIe bound (an upload and a
    download at once, measured: duplex_ms). The pipeline is timed in its
    steady state: from its 40th mask on, its slots allocated and filled."""
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
        return steady_ms(fastmog.pipeline(sub, (frames[i % 40] for i in range(40 + n)),
                                          streams=streams), 40)

    ms = pipeline_ms(pinned)
    t.add("pipeline", "4K grey, pinned host frames -> host masks", f"{ms:.3f} ms/frame",
          "", bound, f"{ms / pcie_ms:.2f}x the bound, {pcie_ms / ms:.2f} of its rate "
          f"(target >= {1 / PINNED_TARGET:.1f})")
    ms = pipeline_ms(pageable)
    t.add("pipeline", "4K grey, pageable host frames -> host masks", f"{ms:.3f} ms/frame",
          "", bound, f"{ms / pcie_ms:.2f}x the bound (target <= {PAGEABLE_TARGET}x)")

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


CAMERAS, CAM_H, CAM_W = 64, 480, 640
CAMERA_STEP = 7  # camera k shows the clip 7k frames on: 101 frames, so no two cameras agree
CAMERA_SETS_TIMED = 40


def camera_sets(data, native=False, colour="grey"):
    """Per time step, the 64 cameras' frames ("grey" or "bgr") stacked into
    one tall frame: camera k shows the CDnet traffic clip CAMERA_STEP * k
    frames on, tiled to 640x480 as the 4K frame is. native: the clip's 320x240
    frames stacked instead, whose per-pixel models are exactly those of the
    tiles."""
    if colour not in ("grey", "bgr"):
        raise ValueError(f"colour must be 'grey' or 'bgr', not {colour!r}")
    clip = [f if colour == "bgr" else cv2.cvtColor(f, cv2.COLOR_BGR2GRAY)
            for f in iter_frames(data, "traffic")]
    n = len(clip)
    size = (lambda f: f) if native else (lambda f: tiled(f, CAM_H, CAM_W))
    return [np.concatenate([size(clip[(i + CAMERA_STEP * k) % n]) for k in range(CAMERAS)])
            for i in range(n)]


def measure_camera_floor(data, t):
    f = model_floor(camera_sets(data, native=True), span=CAMERA_SETS_TIMED)
    t.add("floor", f"{CAMERAS} x {CAM_W}x{CAM_H} grey cameras: modes in use, visited "
          "(fastmog.cpu, clip frames)", f"{f['modes']:.2f} in use, {f['visited']:.2f} visited",
          "", f"{f['bytes']:.1f} B/pixel", "moves by the reordering not counted: lower bound")
    return f


def camera_views(stream, data, colour="grey"):
    """The camera sets on the device: each stacked frame, and per set the 64
    cameras' views of it."""
    tall = [fastmog.GpuMat.from_array(s, stream=stream)
            for s in camera_sets(data, colour=colour)]
    return tall, [[f[k * CAM_H:(k + 1) * CAM_H] for k in range(CAMERAS)] for f in tall]


def timed_after_warm(stream, call, repeats, after_warm=None):
    """call(i) for WARM sets, then for `repeats` more, timed: (GPU ms, wall
    ms) a call. after_warm runs between the two."""
    for i in range(WARM):
        call(i)
    if after_warm is not None:
        after_warm()
    stream.synchronize()
    t0 = time.perf_counter()
    ms = gpu_ms(stream, lambda i: call(WARM + i), repeats)
    return ms, (time.perf_counter() - t0) * 1e3 / repeats


def camera_counts_differ(counts, native_counts):
    """Pixels where a tall 640x480-camera mode-count map disagrees with the
    host model of the 320x240 clip frames (the top-left tile of each camera)."""
    tiles = np.asarray(counts).reshape(CAMERAS, CAM_H, CAM_W)[:, :native_counts.shape[0] // CAMERAS,
                                                             :native_counts.shape[1]]
    return int(np.count_nonzero(tiles.reshape(native_counts.shape) != native_counts))


def measure_cameras(stream, data, floor_model, copy_bw, single_fraction, t):
    """64 cameras at 640x480 grey: one apply on the stacked tall frame, 64
    separate apply calls on views of it, one apply_cameras call. Each against
    the floor, and its fraction relative to the 4K grey real model's
    (issue 13: apply_cameras >= 80 %). Times are the slower of GPU and wall."""
    tall, views = camera_views(stream, data)
    n = len(tall)
    floor = ms_of(floor_model["bytes"], CAMERAS * CAM_H * CAM_W, copy_bw)

    def row(item, ms, wall, note=""):
        fraction = floor / max(ms, wall)
        t.add("cameras", f"{CAMERAS} x {CAM_W}x{CAM_H} grey, {item}",
              f"{ms:.3f} ms/set (wall {wall:.3f})", "", f"{floor:.3f} ms floor (visited modes)",
              f"{100 * fraction:.0f} % of floor, {100 * fraction / single_fraction:.0f} % of the "
              f"4K model's fraction{note}")

    one = fastmog.BackgroundSubtractorMOG2()
    mask = fastmog.GpuMat((CAMERAS * CAM_H, CAM_W))
    counts = []
    ms, wall = timed_after_warm(stream,
                                lambda i: one.apply(tall[i % n], stream=stream, fgmask=mask),
                                CAMERA_SETS_TIMED,
                                lambda: counts.append(one.mode_counts().download(stream=stream)))
    differ = camera_counts_differ(counts[-1], floor_model["warm_counts"])
    row("one apply on the stacked tall frame", ms, wall,
        f"; mode counts after warm-up vs host: {differ} pixels differ")
    one.close()
    mask.close()

    subs = [fastmog.BackgroundSubtractorMOG2() for _ in range(CAMERAS)]
    masks = [fastmog.GpuMat((CAM_H, CAM_W)) for _ in range(CAMERAS)]

    def separate(i):
        for k in range(CAMERAS):
            subs[k].apply(views[i % n][k], stream=stream, fgmask=masks[k])

    ms, wall = timed_after_warm(stream, separate, 20)
    row(f"{CAMERAS} separate apply calls", ms, wall)
    for s in subs:
        s.close()

    if not hasattr(fastmog, "apply_cameras"):
        t.add("cameras", "apply_cameras row", "not run: fastmog.apply_cameras is missing from "
              "this build")
    else:
        subs = [fastmog.BackgroundSubtractorMOG2() for _ in range(CAMERAS)]
        out = tuple(masks)
        ms, wall = timed_after_warm(
            stream, lambda i: fastmog.apply_cameras(subs, views[i % n], stream=stream,
                                                    fgmasks=out), CAMERA_SETS_TIMED,
            lambda: counts.append(np.concatenate(
                [s.mode_counts().download(stream=stream) for s in subs])))
        differ = camera_counts_differ(counts[-1], floor_model["warm_counts"])
        row("one apply_cameras call", ms, wall, f"; {OPENCV_CUDA_CAMERAS:.3f} ms/set for 64 "
            f"calls of {OPENCV_CUDA}: {OPENCV_CUDA_CAMERAS / ms:.2f}x (target <= "
            f"{CAMERAS_TARGET} ms: {OPENCV_CUDA_CAMERAS / CAMERAS_TARGET:.1f}x); mode counts "
            f"after warm-up vs host: {differ} pixels differ")
        for s in subs:
            s.close()
    for m in masks:
        m.close()
    for f in tall:
        f.close()


def host_us(fn, repeats, stream):
    for i in range(100):
        fn(i)
    stream.synchronize()
    us = host_ms(fn, repeats) * 1e3
    stream.synchronize()
    return us


def measure_overhead(stream, t):
    """Host time per call on 64x64 device frames (the GPU work is negligible):
    apply, and what apply_batch and apply_cameras add per frame beyond the
    first, (t(16) - t(1)) / 15, masks given as the issue's apply(frame,
    stream=s, fgmask=m) gives its mask."""
    shape = (64, 64)
    frames = tuple(fastmog.GpuMat.from_array(np.full(shape, 9 + 3 * i, np.uint8), stream=stream)
                   for i in range(16))
    masks = tuple(fastmog.GpuMat(shape) for _ in range(16))
    sub = fastmog.BackgroundSubtractorMOG2()
    us = host_us(lambda i: sub.apply(frames[0], stream=stream, fgmask=masks[0]), 20000, stream)
    t.add("per call", "apply host time, 64x64 device-resident frame, fgmask given",
          f"{us:.2f} us/call", "", "4 us target", "")

    def extra(item, missing, call):
        if missing:
            t.add("per call", f"{item} host time", f"not run: {missing}")
            return
        one = host_us(lambda i: call(1), 10000, stream)
        many = host_us(lambda i: call(16), 4000, stream)
        t.add("per call", f"{item} host time, 64x64 device frames, 1 and 16 per call",
              f"{one:.2f} / {many:.2f} us/call", "", "1 us per frame beyond the first (target)",
              f"{(many - one) / 15:.2f} us per frame beyond the first")

    batch_sub = fastmog.BackgroundSubtractorMOG2()
    extra("apply_batch", None if hasattr(batch_sub, "apply_batch")
          else "BackgroundSubtractorMOG2.apply_batch is missing from this build",
          lambda k: batch_sub.apply_batch(frames[:k], stream=stream, fgmasks=masks[:k]))
    subs = tuple(fastmog.BackgroundSubtractorMOG2() for _ in range(16))
    extra("apply_cameras", None if hasattr(fastmog, "apply_cameras")
          else "fastmog.apply_cameras is missing from this build",
          lambda k: fastmog.apply_cameras(subs[:k], frames[:k], stream=stream, fgmasks=masks[:k]))
    for obj in (sub, batch_sub) + subs + frames + masks:
        obj.close()


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
    parser.add_argument("--instructions", type=pathlib.Path,
                        default=HERE / "kernel_instructions.json")
    args = parser.parse_args()
    instructions = (json.loads(args.instructions.read_text()) if args.instructions.is_file()
                    else None)
    data = args.data or find_test_data(HERE.parent)
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
    t = Table()
    floors = measure_floors(data, t)  # host only: the model counts behind the floors
    camera_floor = measure_camera_floor(data, t)
    if no_gpu is None:
        with fastmog.Stream() as stream:
            copy_bw, pcie_ms = measure_ceilings(stream, t)
            kernel_ms, device_real = measure_kernels(stream, data, floors, copy_bw, t,
                                                     instructions)
            measure_batched(stream, device_real, copy_bw, t)
            for _, frames in device_real.values():
                for f in frames:
                    f.close()
            del device_real
            single_fraction = ms_of(floors[("grey", "real")]["bytes"], SCENE_H * SCENE_W,
                                    copy_bw) / kernel_ms[("grey", "real")]
            measure_cameras(stream, data, camera_floor, copy_bw, single_fraction, t)
            measure_pipeline(data, pcie_ms, t)
            measure_overhead(stream, t)
            measure_scaling(stream, data, t)
    else:
        for section in ("ceiling", "kernel", "peer", "batched", "cameras", "pipeline",
                        "per call", "scaling"):
            t.add(section, "GPU rows", f"not run: {no_gpu}")
    measure_host_reference(data, t)
    made = ("" if instructions is None else "`python benchmarks/kernel_instructions.py "
            "--write benchmarks/kernel_instructions.json`, then ")
    text = f"# fastmog benchmark results\n\n{header}\n\n" \
           f"Command: {made}`python benchmarks/run.py`\n\n{t.markdown()}\n"
    print()
    print(text)
    if args.write:
        args.write.write_text(text)


if __name__ == "__main__":
    main()
