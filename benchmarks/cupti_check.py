"""fastmog's GPU times beside CUPTI's (torch.profiler) in the same run, for
upload, apply, apply_batch, download and nv12_to_bgr on 4K frames, and with
--clip the NVDEC decoder's output copy: a table fastmog | CUPTI |
difference, the tolerance being 2 % or 3 us, whichever is larger. Also what
an event pair costs by itself (on an idle and on a busy stream), where a
call's time goes on CUPTI's clock (fastmog's window, the runtime call, the
GPU activity), and cProfile in sync mode against CUPTI for calls of 100 us
or more.

    python benchmarks/cupti_check.py [--iters 200] [--clip VIDEO]

Needs a GPU, torch with CUPTI (torch.profiler) and fastmog built; --clip
needs PyNvVideoCodec and a video NVDEC decodes (H.264 or HEVC).
"""
import cProfile
import json
import os
import pstats
import sys
import tempfile

import numpy as np

import fastmog

H, W = 2160, 3840


def cupti_trace(run):
    """Runs `run()` under torch.profiler; the Chrome trace's events, by time."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.init()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    return sorted(trace["traceEvents"], key=lambda e: e.get("ts", 0))


def cupti_durations(run, trace=None):
    """Runs `run()` under torch.profiler; {category: [us]} of the GPU
    activities CUPTI saw, in order: "HtoD", "DtoH", "DtoD", "memset" and
    each kernel by a short name."""
    out = {}
    for e in trace if trace is not None else cupti_trace(run):
        cat, name = e.get("cat", ""), e.get("name", "")
        if e.get("ph") != "X":
            continue
        if cat == "gpu_memcpy":
            key = "HtoD" if "HtoD" in name else "DtoH" if "DtoH" in name else "DtoD"
        elif cat == "gpu_memset":
            key = "memset"
        elif cat == "kernel":
            key = next((k for k in ("mog2_apply_kernel", "mog2_cameras_kernel",
                                    "nv12_to_bgr_kernel", "fill_pattern_kernel") if k in name),
                       name[:40])
        else:
            continue
        out.setdefault(key, []).append(float(e["dur"]))
    return out


def output_copy_spans(events, frames):
    """The NVDEC output copies CUPTI saw, per frame, in us: a frame's copies
    (one when the surface's chroma lies right below its luma, else luma then
    chroma) on its session's stream, their durations summed (the copy's own
    GPU time, as fastmog's window should be). Only copies that fastmog's
    runtime calls made count (their correlation ids): PyNvVideoCodec's own
    copies go through the driver API. Also returns how many device-to-device
    copies there were in all and how many were kept."""
    ours = {e["args"]["correlation"] for e in events
            if e.get("cat") == "cuda_runtime" and "Memcpy" in e.get("name", "")
            and "correlation" in e.get("args", {})}
    copies = [e for e in events if e.get("ph") == "X" and e.get("cat") == "gpu_memcpy"
              and "DtoD" in e.get("name", "")]
    kept = [e for e in copies if e.get("args", {}).get("correlation") in ours] or copies
    per_frame = max(1, round(len(kept) / frames)) if frames else 1
    by_stream = {}                       # each session's copies, in their order
    for e in sorted(kept, key=lambda e: float(e["ts"])):
        by_stream.setdefault(e.get("args", {}).get("stream"), []).append(e)
    spans = [sum(float(e["dur"]) for e in own[at:at + per_frame])
             for own in by_stream.values() for at in range(0, len(own), per_frame)]
    return spans, len(copies), len(kept)


def print_copy_neighbours(events, frames=4):
    """For a few frames: each device-to-device copy and kernel CUPTI saw
    around fastmog's output copies, with its stream and whether fastmog's
    runtime call made it, so a window can be read against the engine's
    timeline (what ran just before on the same engine and stream)."""
    ours = {e["args"]["correlation"] for e in events
            if e.get("cat") == "cuda_runtime" and "Memcpy" in e.get("name", "")
            and "correlation" in e.get("args", {})}
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("gpu_memcpy", "kernel")]
    mine = [i for i, e in enumerate(gpu) if e.get("cat") == "gpu_memcpy"
            and e.get("args", {}).get("correlation") in ours]
    for i in mine[10:10 + frames]:
        print("  around one output copy (CUPTI: start us relative, duration us, stream, "
              "kind):")
        t0 = float(gpu[i]["ts"])
        for e in gpu[max(0, i - 4):i + 2]:
            mark = "fastmog" if e.get("args", {}).get("correlation") in ours else ""
            print(f"    {float(e['ts']) - t0:+9.2f} {float(e['dur']):8.2f} "
                  f"stream {e.get('args', {}).get('stream')} {e.get('name', '')[:40]} {mark}")


def print_worst_windows(label, records, activities, events, worst=3):
    """Matches fastmog's records with CUPTI's activities in order (one each,
    on one stream) and prints how their differences spread, and for the
    worst few what ran on other streams between the window's start (put on
    CUPTI's clock by the best-aligned pair) and the activity's own start."""
    ours = sorted((r for r in records if r.gpu_start is not None), key=lambda r: r.gpu_start)
    theirs = sorted(activities, key=lambda e: float(e["ts"]))
    if not ours or len(ours) != len(theirs):
        print(f"  {label}: {len(ours)} records and {len(theirs)} CUPTI activities: not matched")
        return
    raw = [(r.gpu_ms_raw if r.gpu_ms_raw is not None else r.gpu_ms) * 1e3 for r in ours]
    diffs = sorted((r.gpu_ms * 1e3 - float(e["dur"]), i)
                   for i, (r, e) in enumerate(zip(ours, theirs)))
    n = len(diffs)
    print(f"  {label}: fastmog - CUPTI per call, us: p10 {diffs[n // 10][0]:+.2f}, "
          f"median {diffs[n // 2][0]:+.2f}, p90 {diffs[n * 9 // 10][0]:+.2f}, "
          f"max {diffs[-1][0]:+.2f}")
    # CUPTI time = fastmog start (host clock, us) + offset; the smallest
    # offset belongs to a window that opened right as its activity began
    offset = min(float(e["ts"]) - r.gpu_start * 1e6 for r, e in zip(ours, theirs))
    others = [e for e in events if e.get("ph") == "X"
              and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    for d, i in diffs[-worst:]:
        e = theirs[i]
        opened = ours[i].gpu_start * 1e6 + offset
        busy = [o for o in others if o is not e and float(o["ts"]) < float(e["ts"])
                and float(o["ts"]) + float(o["dur"]) > opened]
        print(f"    {d:+8.2f} us (raw window {raw[i]:.2f}, CUPTI {float(e['dur']):.2f}); "
              f"window opened {float(e['ts']) - opened:.2f} us before it began, meanwhile: "
              + ", ".join(f"{o.get('name', '')[:28]} on stream {o.get('args', {}).get('stream')}"
                          f" ({float(o['dur']):.1f} us)" for o in busy[:4]))


def fastmog_us(timer, name, raw=False):
    """GPU times of the records called `name`: as the report gives them (the
    events' window less the measured event latency), or the raw window."""
    return [(r.gpu_ms_raw if raw and r.gpu_ms_raw is not None else r.gpu_ms) * 1e3
            for r in timer.records if r.name == name and r.gpu_ms is not None]


def mean(v):
    return sum(v) / len(v) if v else float("nan")


def event_pair_us(stream, busy_with=None, n=50):
    """Median time between two events recorded back to back on `stream`,
    after `busy_with()` (queued work keeping the stream busy) or on an idle
    stream."""
    times = []
    for _ in range(n):
        a, b = fastmog.Event(), fastmog.Event()
        if busy_with is not None:
            busy_with()
        else:
            stream.synchronize()
        stream.record(a)
        stream.record(b)
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return sorted(times)[n // 2]


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def print_call_path(label, timer, records, trace, api, gpu_match):
    """Where one kind of call's time goes, on CUPTI's clock: fastmog's raw
    window (W0..W1), the runtime API call CUPTI saw (A0..A1) and the GPU
    activity it made (G0..G1), matched in order. fastmog's host clock is put
    on CUPTI's by the median of A0 - submitted (copies are submitted right
    before their call) or A1 - submitted (kernels: right after the launch).
    Medians and p90 in us."""
    raw = timer._raw_records()
    calls = {e["args"]["correlation"]: e for e in trace
             if e.get("cat") == "cuda_runtime" and api in e.get("name", "")
             and "correlation" in e.get("args", {})}
    pairs = sorted(((calls[e["args"]["correlation"]], e) for e in trace
                    if e.get("ph") == "X" and gpu_match(e)
                    and e.get("args", {}).get("correlation") in calls),
                   key=lambda p: float(p[0]["ts"]))
    recs = sorted((r for r in records if r.submitted is not None), key=lambda r: r.submitted)
    if not recs or len(recs) != len(pairs):
        print(f"  {label}: {len(recs)} records, {len(pairs)} API calls with GPU work: not matched")
        return
    copy = "Memcpy" in api
    offset = pct([float(a["ts"]) + (0 if copy else float(a["dur"])) - r.submitted * 1e6
                  for r, (a, g) in zip(recs, pairs)], 0.5)
    cols = {"W0->A0": [], "A0->A1": [], "A1->G0": [], "G0->G1": [], "G1->W1": [],
            "W1-W0": [], "corr-CUPTI": []}
    for r, (a, g) in zip(recs, pairs):
        start_ns, ms = raw[r.index][12], raw[r.index][11]
        w0 = start_ns / 1e3 + offset
        w1 = w0 + ms * 1e3
        a0, a1 = float(a["ts"]), float(a["ts"]) + float(a["dur"])
        g0, g1 = float(g["ts"]), float(g["ts"]) + float(g["dur"])
        for k, v in (("W0->A0", a0 - w0), ("A0->A1", a1 - a0), ("A1->G0", g0 - a1),
                     ("G0->G1", g1 - g0), ("G1->W1", w1 - g1), ("W1-W0", w1 - w0),
                     ("corr-CUPTI", r.gpu_ms * 1e3 - (g1 - g0))):
            cols[k].append(v)
    print(f"  {label} ({len(recs)} calls), us, median/p90: "
          + ", ".join(f"{k} {pct(v, .5):+.2f}/{pct(v, .9):+.2f}" for k, v in cols.items()))


def print_sync_path(label, records, cprofile_us=None):
    """A sync-mode call's host time by fastmog's own record (host clock, us,
    medians): entry to submitted, submitted to the GPU's start, the GPU
    window, the GPU's end to return; and what cProfile counted beyond it."""
    rs = [r for r in records if r.submitted is not None and r.gpu_start is not None]
    if not rs:
        return
    cols = {"entry->submitted": [(r.submitted - r.host_start) * 1e6 for r in rs],
            "submitted->GPU": [(r.gpu_start - r.submitted) * 1e6 for r in rs],
            "GPU": [r.gpu_ms * 1e3 for r in rs],
            "GPU end->return": [(r.host_start + r.host_ms / 1e3 - r.gpu_end) * 1e6 for r in rs],
            "host": [r.host_ms * 1e3 for r in rs]}
    extra = "" if cprofile_us is None else \
        f"; cProfile - host {cprofile_us - mean(cols['host']):+.2f} (means)"
    print(f"    {label}: " + ", ".join(f"{k} {pct(v, .5):.2f}" for k, v in cols.items()) + extra)


def main():
    iters = int(sys.argv[sys.argv.index("--iters") + 1]) if "--iters" in sys.argv else 200
    rng = np.random.default_rng(1)
    s = fastmog.Stream()
    host = fastmog.pinned_empty((H, W, 3), np.uint8)
    host[...] = rng.integers(0, 255, host.shape, dtype=np.uint8)
    out = fastmog.pinned_empty((H, W), np.uint8)
    frame = fastmog.GpuMat((H, W, 3), np.uint8)
    sub = fastmog.BackgroundSubtractorMOG2()
    batch = [fastmog.GpuMat.from_array(host, stream=s) for _ in range(8)]
    masks = [fastmog.GpuMat((H, W), np.uint8) for _ in range(8)]
    sub_b = fastmog.BackgroundSubtractorMOG2()
    nv12 = fastmog.GpuMat.from_array(rng.integers(0, 255, (H * 3 // 2, W), dtype=np.uint8),
                                     stream=s)
    bgr = fastmog.GpuMat((H, W, 3), np.uint8)

    def loop(timer, n):
        for _ in range(n):
            frame.upload(host, stream=s, timer=timer)
            mask = sub.apply(frame, stream=s, timer=timer)
            mask.download(out, stream=s, timer=timer)

    def batches(timer, n):
        for _ in range(n):
            sub_b.apply_batch(batch, stream=s, fgmasks=masks, timer=timer)
        s.synchronize()

    def convert(timer, n):
        for _ in range(n):
            fastmog.nv12_to_bgr(nv12, stream=s, out=bgr, timer=timer)
        s.synchronize()

    # warm up: models built, pools filled, kernels loaded
    loop(None, 20)
    batches(None, 5)
    convert(None, 20)

    rows = []
    t = fastmog.Timer(nvtx=False)
    cupti = cupti_durations(lambda: loop(t, iters))
    for label, name, key in (("upload 4K BGR", "GpuMat.upload", "HtoD"),
                             ("apply 4K BGR", "BackgroundSubtractorMOG2.apply",
                              "mog2_apply_kernel"),
                             ("download 4K mask", "GpuMat.download", "DtoH")):
        rows.append((label, fastmog_us(t, name), fastmog_us(t, name, True), cupti.get(key, [])))
    t = fastmog.Timer(nvtx=False)
    cupti = cupti_durations(lambda: batches(t, max(iters // 4, 10)))
    rows.append(("apply_batch 8x4K", fastmog_us(t, "BackgroundSubtractorMOG2.apply_batch"),
                 fastmog_us(t, "BackgroundSubtractorMOG2.apply_batch", True),
                 cupti.get("mog2_apply_kernel", [])))
    t = fastmog.Timer(nvtx=False)
    cupti = cupti_durations(lambda: convert(t, iters))
    rows.append(("nv12_to_bgr 4K", fastmog_us(t, "nv12_to_bgr"), fastmog_us(t, "nv12_to_bgr", True),
                 cupti.get("nv12_to_bgr_kernel", [])))

    clip = sys.argv[sys.argv.index("--clip") + 1] if "--clip" in sys.argv else None
    if clip is not None:
        # two sessions: one session hands out the decoder's own frames (no
        # copy); with several, each copies its frames out on its own stream.
        # MOG2 runs on each grey frame, as in the main job: its kernel is
        # compared with CUPTI's in the same NVDEC pipeline.
        sub_v = fastmog.BackgroundSubtractorMOG2()

        def decode(timer, n):
            with fastmog.VideoReader(clip, stream=s, decode="nvdec", sessions=2, grey=True,
                                     timer=timer) as reader:
                for i, frame in enumerate(reader):
                    sub_v.apply(frame.as_input(s), stream=s, timer=timer)
                    s.synchronize()         # the frame is used before the next is taken
                    if i + 1 >= n:
                        break

        decode(None, 20)
        t = fastmog.Timer(nvtx=False)
        trace = cupti_trace(lambda: decode(t, iters))
        copies = [r for r in t.records if r.activity == "NVDEC output copy"
                  and r.gpu_ms is not None]
        spans, n_copies, n_kept = output_copy_spans(trace, len(copies))
        print(f"decoder output copies: {len(copies)} timed by fastmog; CUPTI saw {n_copies} "
              f"device-to-device copies, {n_kept} of them fastmog's runtime calls")
        print_copy_neighbours(trace)
        runtime = {e["args"]["correlation"] for e in trace
                   if e.get("cat") == "cuda_runtime" and "Memcpy" in e.get("name", "")
                   and "correlation" in e.get("args", {})}
        print_worst_windows("NVDEC output copy", copies,
                            [e for e in trace if e.get("ph") == "X"
                             and e.get("cat") == "gpu_memcpy"
                             and e.get("args", {}).get("correlation") in runtime], trace)
        ours = sorted(r.gpu_ms * 1e3 for r in copies)
        theirs = sorted(spans)
        if ours and theirs:
            print("  output copy medians: fastmog %.2f us, CUPTI %.2f us; fastmog p90 %.2f, "
                  "max %.2f" % (ours[len(ours) // 2], theirs[len(theirs) // 2],
                                ours[len(ours) * 9 // 10], ours[-1]))
        print_call_path("NVDEC output copy", t, copies, trace, "Memcpy",
                        lambda e: e.get("cat") == "gpu_memcpy")
        print_call_path("apply in the NVDEC run", t,
                        [r for r in t.records if r.name == "BackgroundSubtractorMOG2.apply"],
                        trace, "LaunchKernel",
                        lambda e: e.get("cat") == "kernel" and "mog2_apply" in e.get("name", ""))
        rows.append(("NVDEC output copy", [r.gpu_ms * 1e3 for r in copies],
                     [(r.gpu_ms_raw if r.gpu_ms_raw is not None else r.gpu_ms) * 1e3
                      for r in copies], spans))
        kernel_events = [e for e in trace if e.get("ph") == "X" and e.get("cat") == "kernel"
                         and "mog2_apply_kernel" in e.get("name", "")]
        kernels = [float(e["dur"]) for e in kernel_events]
        name = "BackgroundSubtractorMOG2.apply"
        print_worst_windows("apply in the NVDEC run",
                            [r for r in t.records if r.name == name and r.gpu_ms is not None],
                            kernel_events, trace)
        rows.append(("apply in NVDEC run", fastmog_us(t, name), fastmog_us(t, name, True),
                     kernels))

    idle = event_pair_us(s)
    busy = event_pair_us(s, lambda: sub_b.apply_batch(batch, stream=s, fgmasks=masks))
    print(f"fastmog {fastmog.__file__} on {fastmog.device_properties()['name']}")
    print(f"empty event pair: idle stream {idle:.2f} us, busy stream {busy:.2f} us")
    from fastmog.profiling import _probes as _profile_probes
    bias = _profile_probes.event_bias(s.device) or {}
    print("event latency taken off (us), by (operation before, operation): "
          + ", ".join(f"{b}->{k} {v * 1e3:.2f}" for (b, k), v in sorted(bias.items())))
    print(f"{'operation':18s} {'n':>11} {'fastmog us':>11} {'CUPTI us':>10} {'diff us':>9} "
          f"{'diff %':>7} {'raw us':>9} {'raw diff':>9}  within 2 % or 3 us")
    ok = True
    for name, ours, raw, theirs in rows:
        a, b, r = mean(ours), mean(theirs), mean(raw)
        diff = a - b
        tol = max(0.02 * b, 3.0)
        good = abs(diff) <= tol
        ok &= good
        print(f"{name:18s} {len(ours):5d}/{len(theirs):<5d} {a:10.2f} {b:10.2f} {diff:+9.2f} "
              f"{100 * diff / b:+6.2f}% {r:9.2f} {r - b:+9.2f}  {'yes' if good else 'NO'}")

    # cProfile in sync mode: each call returns when its work is done. The GPU
    # durations of the sync loop come from a pass under CUPTI; cProfile times
    # a pass of its own, untraced: CUPTI records every API call (each poll of
    # a stream too), and that host cost would be charged to the calls.
    ts = fastmog.Timer(sync=True, nvtx=False)
    trace = cupti_trace(lambda: loop(ts, iters))
    sync_cupti = cupti_durations(lambda: None, trace)
    print("sync mode under CUPTI, per call:")
    for method, api, match in (
            ("upload", "Memcpy", lambda e: "HtoD" in e.get("name", "")),
            ("apply", "LaunchKernel", lambda e: "mog2_apply" in e.get("name", "")),
            ("download", "Memcpy", lambda e: "DtoH" in e.get("name", ""))):
        print_call_path(method, ts, [r for r in ts.records if r.name.endswith("." + method)],
                        trace, api, lambda e, m=match: e.get("ph") == "X" and m(e)
                        and e.get("cat") in ("kernel", "gpu_memcpy"))
    t = fastmog.Timer(sync=True, nvtx=False)
    pr = cProfile.Profile()
    pr.enable()
    loop(t, iters)
    pr.disable()
    stats = pstats.Stats(pr)
    print("cProfile, sync mode, untraced pass (per call, us), CUPTI from a traced pass:")
    for method, key in (("upload", "HtoD"), ("apply", "mog2_apply_kernel"),
                        ("download", "DtoH")):
        hits = [(v[1], v[3]) for (file, line, fn), v in stats.stats.items()
                if fn.startswith(f"<method '{method}' of 'fastmog.")]
        if not hits:
            continue
        calls, cum = hits[0]
        per = cum / calls * 1e6
        c = mean(sync_cupti.get(key, []))
        print(f"  {method:9s} cProfile {per:9.2f}  CUPTI {c:9.2f}  {100 * (per - c) / c:+6.2f}%")
        print_sync_path(method, [r for r in t.records if r.name.endswith("." + method)], per)
    print("ALL WITHIN TOLERANCE" if ok else "SOME OUTSIDE TOLERANCE")


if __name__ == "__main__":
    main()
