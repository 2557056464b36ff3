"""One table per run: compressed 4K video to MOG2 masks, NVDEC straight into
fastmog beside NVDEC decoding alone (the ceiling), host decoding into
fastmog, host decoding into OpenCV's CPU MOG2, and several decoders in
parallel (several cameras), with ratios and issue 11's targets.

    python benchmarks/video.py [--clips DIR] [--write benchmarks/VIDEO.md]

The clips come from `python benchmarks/make_clips.py` (.testdata/clips, or
$FASTMOG_CLIPS). They are short (24 frames, one GOP), so each is played
`--loop` times over into a temporary file (remuxed, not re-encoded: one GOP
per repetition), and every measurement loops over that with a new reader per
pass until it has run `--seconds` of steady time. Opening a reader (and, for NVDEC, the first frame it decodes while
opening) is timed apart: "frames/s" is the steady rate of a long video, "with
re-open" the rate of this loop. Rows that cannot run here (no GPU, no
PyNvVideoCodec) are named with the reason; the host-only rows still run.
"""
import argparse
import ctypes
import dataclasses
import datetime
import json
import os
import pathlib
import sys
import tempfile
import threading
import time
import traceback

import numpy as np

import fastmog

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_CLIPS = ("traffic4k_h264.mp4", "traffic4k_hevc.mkv")
GROUPS = ("nvdec", "raw", "bgr", "host", "opencv", "parallel", "sessions")
TARGET_CEILING, TARGET_HOST = 0.9, 5.0       # issue 11: NVDEC->fastmog vs decode alone, vs host


# ---- frames of a clip, over and over ------------------------------------------------


class Feed:
    """Frames of one clip read again and again, a new reader per pass, until
    the steady time (wall minus opening) reaches `seconds` at the end of a
    pass, the wall reaches twice that, or `max_frames` were given.

    Opening is timed apart in `open_s`; `predecoded` counts the frames a
    reader decoded while opening (NVDEC decodes the first one to check the
    stream), which `steady_frames` leaves out. With a `stream`, each pass
    ends by waiting for the stream, inside the steady time, so no GPU work
    hides behind the next opening, and the reader is closed only then (its
    decoder owns buffers that queued work reads). Without one (host
    readers), the last readers are kept open: a pipeline may still be
    uploading from their pinned rings."""

    keep = 2

    def __init__(self, path, *, seconds, max_frames=None, stream=None, **reader_args):
        self.path, self.seconds, self.max_frames = str(path), seconds, max_frames
        self.stream, self.reader_args = stream, reader_args
        self.frames = self.predecoded = self.opens = 0
        self.open_s = 0.0
        self.pass_frames = set()             # frames per whole pass, to check the clip
        self._held = []

    def _open(self):
        """(owner, frame iterator, whether a frame was decoded while opening)."""
        reader = fastmog.VideoReader(self.path, stream=self.stream, **self.reader_args)
        return reader, iter(reader), getattr(reader, "_pending", None) is not None

    @staticmethod
    def _close(owner):
        owner.close()

    @property
    def steady_frames(self):
        return self.frames - self.predecoded

    def __iter__(self):
        start = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            owner, frames, predecoded = self._open()
            self.open_s += time.perf_counter() - t0
            self.opens += 1
            self.predecoded += predecoded
            self._held.append(owner)
            n = 0
            for frame in frames:
                n += 1
                self.frames += 1
                yield frame
                if self.max_frames and self.frames >= self.max_frames:
                    return
            self.pass_frames.add(n)
            if self.stream is not None:
                self.stream.synchronize()
            while len(self._held) > (0 if self.stream is not None else self.keep):
                self._close(self._held.pop(0))
            wall = time.perf_counter() - start
            if wall - self.open_s >= self.seconds or wall >= 2 * self.seconds:
                return

    def close(self):
        """Waits for the stream (if any) and closes every reader still held."""
        if self.stream is not None:
            self.stream.synchronize()
        while self._held:
            self._close(self._held.pop(0))


class RawFeed(Feed):
    """PyNvVideoCodec's own demux-and-decode loop, no fastmog in it: frames
    are counted, not looked at (with device memory, Decode has already
    queued each frame's copy out of NVDEC's surface). Opening includes
    decoding up to the first frame, as VideoReader does, so the two compare."""

    def __init__(self, path, nvc, *, stream, **kwargs):
        super().__init__(path, stream=stream, **kwargs)
        self.nvc = nvc

    def _frames(self, demuxer, decoder):
        last_size = 0
        for packet in demuxer:
            last_size = int(packet.bsl)
            yield from decoder.Decode(packet)
        if last_size:                        # no empty packet at the end: flush
            yield from decoder.Decode(self.nvc.PacketData())

    def _open(self):
        nvc = self.nvc
        demuxer = nvc.CreateDemuxer(filename=self.path)
        decoder = nvc.CreateDecoder(gpuid=self.stream.device, codec=demuxer.GetNvCodecId(),
                                    cudacontext=0, cudastream=self.stream.handle,
                                    usedevicememory=True)
        owner = _RawSession(demuxer, decoder, self._frames(demuxer, decoder))
        first = next(owner.frames)
        return owner, _chain(first, owner.frames), True


class _RawSession:
    def __init__(self, demuxer, decoder, frames):
        self.demuxer, self.decoder, self.frames = demuxer, decoder, frames

    def close(self):
        # as VideoReader does: the decoder (which owns the frame buffers) first
        self.frames.close()
        self.frames = None
        self.decoder = None
        self.demuxer = None


def _chain(first, rest):
    yield first
    yield from rest


@dataclasses.dataclass
class Measure:
    frames: int
    steady_frames: int
    wall_s: float
    open_s: float
    opens: int
    note: str = ""

    @property
    def fps(self):
        steady = self.wall_s - self.open_s
        return self.steady_frames / steady if steady > 0 else float("nan")

    @property
    def fps_with_open(self):
        return self.frames / self.wall_s

    @property
    def open_ms(self):
        return 1e3 * self.open_s / max(self.opens, 1)


def run_feed(make_feed, consume, *, warmup, seconds, max_frames=None, expected_frames=None):
    """Warms up on one short pass, then times `consume(feed)` (which ends
    with everything it queued done) over a feed of `seconds` (or
    `max_frames`). make_feed(seconds=, max_frames=) gives a new Feed."""
    feed = make_feed(seconds=0.0, max_frames=warmup)
    try:
        consume(feed)
    finally:
        feed.close()
    feed = make_feed(seconds=seconds, max_frames=max_frames)
    t0 = time.perf_counter()
    try:
        consume(feed)
        wall = time.perf_counter() - t0
    finally:
        feed.close()
    m = measure_of(feed, wall, expected_frames)
    steady = wall - feed.open_s
    if not max_frames and steady < 0.95 * seconds:
        # opening took over half the wall: the steady part is shorter than asked
        m.note = "; ".join(x for x in (m.note, f"steady part {steady:.1f} s") if x)
    return m


def measure_of(feed, wall, expected_frames):
    note = ""
    if expected_frames and feed.pass_frames - {expected_frames}:
        note = (f"passes gave {sorted(feed.pass_frames)} frames, clips.json says "
                f"{expected_frames}")
    return Measure(feed.frames, feed.steady_frames, wall, feed.open_s, feed.opens, note)


# ---- what each row does with the frames ---------------------------------------------


def consume_nothing(stream=None):
    def consume(feed):
        for _ in feed:
            pass
        if stream is not None:
            stream.synchronize()
    return consume


def consume_nvdec(sub, stream, *, colour, to_host, height, width):
    """NVDEC frames into MOG2 on `stream`: grey is the luma plane viewed (no
    copy), colour goes through fastmog.nv12_to_bgr into one reused BGR
    image. to_host: each mask is downloaded into a ring of pinned buffers
    without blocking; a slot is reused only after its previous download
    finished, as a consumer reading the masks would need."""
    bgr = fastmog.GpuMat((height, width, 3), np.uint8) if colour else None
    ring, events, recorded = [], [], []
    if to_host:
        ring = [fastmog.pinned_empty((height, width), np.uint8) for _ in range(4)]
        events = [fastmog.Event(timing=False) for _ in ring]
        recorded = [False] * len(ring)

    def consume(feed):
        for i, frame in enumerate(feed):
            image = frame.as_input(stream, out=bgr) if colour else frame.as_input(stream)
            mask = sub.apply(image, stream=stream)
            if to_host:
                k = i % len(ring)
                if recorded[k]:
                    events[k].synchronize()
                mask.download(out=ring[k], stream=stream, blocking=False)
                stream.record(events[k])
                recorded[k] = True
        stream.synchronize()
    return consume


def consume_pipeline(sub, streams):
    """Host frames (pinned ring of the host reader) through fastmog.pipeline:
    upload, MOG2 and download overlapped on three streams, masks to host."""
    def consume(feed):
        for _ in fastmog.pipeline(sub, (frame.host for frame in feed), streams=streams):
            pass
    return consume


def consume_opencv(sub):
    def consume(feed):
        for frame in feed:
            sub.apply(frame.host)
    return consume


# ---- NVML: how busy NVDEC is while a row runs ----------------------------------------


class Nvml:
    """NVML through ctypes (it ships with the driver): driver version and the
    decoder utilization of the device. Everything is None where it is missing."""

    def __init__(self, pci_bus_id):
        self.lib, self.handle = None, None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return
            handle = ctypes.c_void_p()
            if lib.nvmlDeviceGetHandleByPciBusId_v2(pci_bus_id.encode(), ctypes.byref(handle)):
                if lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(0), ctypes.byref(handle)):
                    return
            self.lib, self.handle = lib, handle
        except (OSError, AttributeError):
            pass

    def driver_version(self):
        if self.lib is None:
            return None
        buf = ctypes.create_string_buffer(96)
        if self.lib.nvmlSystemGetDriverVersion(buf, ctypes.c_uint(len(buf))) != 0:
            return None
        return buf.value.decode(errors="replace")

    def decoder_utilization(self):
        if self.lib is None:
            return None
        util, period = ctypes.c_uint(), ctypes.c_uint()
        if self.lib.nvmlDeviceGetDecoderUtilization(self.handle, ctypes.byref(util),
                                                    ctypes.byref(period)) != 0:
            return None
        return util.value


class DecoderLoad:
    """Polls NVML's decoder utilization every 0.1 s while a row runs; `mean`
    is the average of the samples (None without NVML)."""

    def __init__(self, nvml):
        self.nvml, self.samples = nvml, []
        self._stop = threading.Event()
        self._thread = None

    def _poll(self):
        while not self._stop.wait(0.1):
            value = self.nvml.decoder_utilization()
            if value is not None:
                self.samples.append(value)

    def __enter__(self):
        if self.nvml is not None and self.nvml.lib is not None:
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return False

    @property
    def mean(self):
        # the first sample may still cover the time before the row started
        samples = self.samples[1:] or self.samples
        return sum(samples) / len(samples) if samples else None


# ---- several decoders at once -------------------------------------------------------


def run_parallel(path, n, *, work, seconds, warmup, height, width):
    """`n` threads, each with its own stream, VideoReader(nvdec, grey) and
    (work="fastmog") subtractor, over the same clip, started together after
    each warmed up. The steady total is the sum of each thread's steady rate;
    "with re-open" is all frames over the common wall time."""
    barrier = threading.Barrier(n + 1)
    results, errors = [None] * n, []

    def worker(i):
        try:
            with fastmog.Stream() as stream:
                if work == "fastmog":
                    sub = fastmog.BackgroundSubtractorMOG2()
                    consume = consume_nvdec(sub, stream, colour=False, to_host=False,
                                            height=height, width=width)
                else:
                    consume = consume_nothing(stream)
                feed = Feed(path, stream=stream, seconds=0.0, max_frames=warmup,
                            decode="nvdec", grey=True)
                try:
                    consume(feed)
                finally:
                    feed.close()
                barrier.wait()
                feed = Feed(path, stream=stream, seconds=seconds, decode="nvdec", grey=True)
                t0 = time.perf_counter()
                try:
                    consume(feed)
                    t1 = time.perf_counter()
                finally:
                    feed.close()
                results[i] = (measure_of(feed, t1 - t0, None), t0, t1)
        except threading.BrokenBarrierError:
            pass                              # another thread failed first
        except BaseException as e:            # handed to the main thread
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(i,), name=f"camera {i}") for i in range(n)]
    for t in threads:
        t.start()
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    measures = [r[0] for r in results]
    wall = max(r[2] for r in results) - min(r[1] for r in results)
    total = sum(m.fps for m in measures)
    slowest = min(m.fps for m in measures)
    m = Measure(sum(x.frames for x in measures), sum(x.steady_frames for x in measures), wall,
                0.0, sum(x.opens for x in measures),
                f"per decoder {slowest:.0f}-{max(x.fps for x in measures):.0f} frames/s")
    return m, total


# ---- the table ----------------------------------------------------------------------


@dataclasses.dataclass
class Row:
    clip: str
    key: str
    label: str
    colour: str                  # "grey" or "bgr": which host path it is compared with
    measure: Measure | None = None
    fps: float | None = None     # steady frames/s (parallel rows: the sum over decoders)
    util: float | None = None
    target: bool = False
    note: str = ""
    sessions: int = 1            # NVDEC sessions over the one file: its ceiling has as many


def fmt_ratio(a, b):
    if a is None or b is None or not b or a != a or b != b:
        return ""
    return f"{a / b:.2f}x"


class Table:
    HEAD = ("clip", "path", "frames/s", "ms/frame", "with re-open", "vs NVDEC decode",
            "vs host decode", "targets", "NVDEC util", "note")

    def __init__(self):
        self.rows = []

    def cells(self):
        ceilings, hosts = {}, {}
        for r in self.rows:
            if r.key.startswith("nvdec_reader") and r.fps:
                ceilings[(r.clip, r.sessions)] = r.fps
            if r.key.startswith("host_fastmog") and r.fps:
                hosts[(r.clip, r.colour)] = r.fps
        out = []
        for r in self.rows:
            if r.fps is None:
                out.append((r.clip, r.label, "", "", "", "", "", "", "", r.note))
                continue
            ceiling, host = ceilings.get((r.clip, r.sessions)), hosts.get((r.clip, r.colour))
            targets = ""
            if r.target:
                checks = []
                if ceiling:
                    ok = r.fps >= TARGET_CEILING * ceiling
                    checks.append(f">={TARGET_CEILING}x decode: {'met' if ok else 'MISSED'}")
                if host:
                    ok = r.fps >= TARGET_HOST * host
                    checks.append(f">={TARGET_HOST:g}x host: {'met' if ok else 'MISSED'}")
                targets = "; ".join(checks)
            m = r.measure
            util = "" if r.util is None else f"{r.util:.0f} %"
            out.append((r.clip, r.label, f"{r.fps:.1f}", f"{1e3 / r.fps:.3f}",
                        f"{m.fps_with_open:.1f} (open {m.open_ms:.0f} ms)" if m.open_s
                        else f"{m.fps_with_open:.1f}",
                        fmt_ratio(r.fps, ceiling), fmt_ratio(r.fps, host), targets, util,
                        "; ".join(x for x in (r.note, m.note) if x)))
        return out

    def text(self):
        cells = [self.HEAD] + self.cells()
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.HEAD))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def markdown(self):
        lines = ["| " + " | ".join(self.HEAD) + " |", "|" + "---|" * len(self.HEAD)]
        lines += ["| " + " | ".join(row) + " |" for row in self.cells()]
        return "\n".join(lines)


# ---- the run ------------------------------------------------------------------------


def nvdec_status():
    """(PyNvVideoCodec module or None, why NVDEC rows cannot run or None)."""
    if not fastmog.cuda_available():
        return None, "no usable GPU: " + " ".join(fastmog._fastmog._cuda_status())
    try:
        import PyNvVideoCodec as nvc
    except Exception as e:                    # missing, or no driver/libnvcuvid
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        return None, f"PyNvVideoCodec is not usable ({why}): pip install 'fastmog[nvdec]'"
    return nvc, None


def decoder_engines(nvc, path, device):
    try:
        dmx = nvc.CreateDemuxer(filename=str(path))
        caps = nvc.GetDecoderCaps(gpuid=device, codec=dmx.GetNvCodecId(),
                                  chromaformat=dmx.ChromaFormat(), bitdepth=dmx.BitDepth())
        return caps.get("num_decoder_engines")
    except Exception:
        return None


class Bench:
    def __init__(self, args, table, nvc, nvml, cv2):
        self.args, self.t, self.nvc, self.nvml, self.cv2 = args, table, nvc, nvml, cv2

    def row(self, clip, key, label, colour, fn, *, target=False, nvdec=False, sessions=1):
        """Runs one measurement; a failure becomes the row's note (and a
        traceback on stderr), so the other rows still run."""
        row = Row(clip, key, label, colour, target=target, sessions=sessions)
        try:
            with DecoderLoad(self.nvml if nvdec else None) as load:
                result = fn()
            if isinstance(result, tuple):
                row.measure, row.fps = result
            else:
                row.measure, row.fps = result, result.fps
            row.util = load.mean
            print(f"  {clip:22} {label:58} {row.fps:9.1f} frames/s", file=sys.stderr, flush=True)
        except Exception as e:
            traceback.print_exc(file=sys.stderr)
            row.note = f"failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            print(f"  {clip:22} {label:58} {row.note}", file=sys.stderr, flush=True)
        self.t.rows.append(row)
        return row

    def sessions(self, name, path, stream, colours, timing, h, w):
        for k in self.args.sessions:
            def alone(k=k):
                return run_feed(lambda **kw: Feed(path, stream=stream, decode="nvdec", grey=True,
                                                  sessions=k, **kw),
                                consume_nothing(stream), **timing)
            self.row(name, f"nvdec_reader_s{k}",
                     f"NVDEC decode alone, {k} sessions (VideoReader, ceiling)", "grey", alone,
                     nvdec=True, sessions=k)
            last = k == max(self.args.sessions)
            for colour in colours if last else ["grey"]:
                for to_host in (False, True) if last else (False,):
                    def one(k=k, is_bgr=colour == "bgr", to_host=to_host):
                        sub = fastmog.BackgroundSubtractorMOG2()
                        consume = consume_nvdec(sub, stream, colour=is_bgr, to_host=to_host,
                                                height=h, width=w)
                        return run_feed(lambda **kw: Feed(path, stream=stream, decode="nvdec",
                                                          grey=not is_bgr, sessions=k, **kw),
                                        consume, **timing)
                    via = " -> nv12_to_bgr" if colour == "bgr" else " (luma)"
                    where = "host masks (pinned ring)" if to_host else "masks on GPU"
                    self.row(name, f"nvdec_fastmog_{colour}_{'host' if to_host else 'gpu'}_s{k}",
                             f"NVDEC{via}, {k} sessions -> fastmog {colour}, {where}", colour,
                             one, target=True, nvdec=True, sessions=k)

    def skip(self, clip, label, why):
        self.t.rows.append(Row(clip, "skipped", label, "grey", note=f"not run: {why}"))

    def clip(self, name, path, info, nvdec_why, gpu_why):
        a, groups = self.args, self.args.groups
        h, w, n = info["height"], info["width"], info["frames"]
        timing = dict(warmup=a.warmup, seconds=a.seconds, expected_frames=n)
        colours = ["grey"] + (["bgr"] if "bgr" in groups else [])

        # 1. NVDEC alone: the ceiling, through VideoReader and PyNvVideoCodec's own loop
        if nvdec_why:
            self.skip(name, "NVDEC rows (decode alone, into fastmog, parallel)",
                      "no NVDEC (see above)")
        else:
            stream = fastmog.Stream()

            def nvdec_feed(**kw):
                return Feed(path, stream=stream, decode="nvdec", grey=True, **kw)

            if "nvdec" in groups:
                self.row(name, "nvdec_reader", "NVDEC decode alone (VideoReader, ceiling)", "grey",
                         lambda: run_feed(nvdec_feed, consume_nothing(stream), **timing),
                         nvdec=True)
            if "raw" in groups:
                self.row(name, "nvdec_raw", "NVDEC decode alone (PyNvVideoCodec loop)", "grey",
                         lambda: run_feed(lambda **kw: RawFeed(path, self.nvc, stream=stream, **kw),
                                          consume_nothing(stream), **timing), nvdec=True)

            # 2-3. NVDEC -> fastmog, masks kept on the GPU or brought to host memory
            if "nvdec" in groups:
                for colour in colours:
                    is_bgr = colour == "bgr"
                    for to_host in (False, True):
                        def one(is_bgr=is_bgr, to_host=to_host):
                            sub = fastmog.BackgroundSubtractorMOG2()
                            consume = consume_nvdec(sub, stream, colour=is_bgr, to_host=to_host,
                                                    height=h, width=w)
                            return run_feed(lambda **kw: Feed(path, stream=stream, decode="nvdec",
                                                              grey=not is_bgr, **kw),
                                            consume, **timing)
                        via = " -> nv12_to_bgr" if is_bgr else " (luma)"
                        where = "host masks (pinned ring)" if to_host else "masks on GPU"
                        self.row(name, f"nvdec_fastmog_{colour}_{'host' if to_host else 'gpu'}",
                                 f"NVDEC{via} -> fastmog {colour}, {where}", colour, one,
                                 target=True, nvdec=True)

            # 2b. several NVDEC sessions over the one file, a closed GOP each
            if "sessions" in groups:
                self.sessions(name, path, stream, colours, timing, h, w)
            stream.close()

        # 4. host decode (OpenCV/FFmpeg into a pinned ring) alone, and into fastmog.pipeline
        if "host" in groups:
            for colour in colours:
                def host_feed(colour=colour, **kw):
                    return Feed(path, decode="cpu", grey=colour == "grey", depth=6, **kw)
                self.row(name, f"host_decode_{colour}", f"host decode alone ({colour})", colour,
                         lambda host_feed=host_feed: run_feed(host_feed, consume_nothing(),
                                                              **timing))
                if gpu_why:
                    self.skip(name, f"host decode -> fastmog {colour} (pipeline)", "no GPU")
                    continue

                def one(host_feed=host_feed):
                    streams = [fastmog.Stream() for _ in range(3)]
                    try:
                        return run_feed(host_feed, consume_pipeline(
                            fastmog.BackgroundSubtractorMOG2(), streams), **timing)
                    finally:
                        for s in streams:
                            s.close()
                self.row(name, f"host_fastmog_{colour}",
                         f"host decode -> fastmog {colour} (pipeline, 3 streams, host masks)",
                         colour, one)

        # 5. host decode -> OpenCV's CPU MOG2 (frames limited: it is slow at 4K)
        if "opencv" in groups:
            for colour in colours:
                def one(colour=colour):
                    sub = self.cv2.createBackgroundSubtractorMOG2()
                    return run_feed(
                        lambda **kw: Feed(path, decode="cpu", grey=colour == "grey", depth=6, **kw),
                        consume_opencv(sub), max_frames=a.cpu_frames, **timing)
                self.row(name, f"opencv_{colour}",
                         f"host decode -> OpenCV CPU MOG2 {colour} (<= {a.cpu_frames} frames)",
                         colour, one)

        # 6. several decoders in parallel, each with its own stream and subtractor
        if "parallel" in groups and not nvdec_why:
            for k in a.parallel:
                self.row(name, f"parallel_{k}",
                         f"{k} x NVDEC -> fastmog grey ({k} thread{'s' * (k > 1)}, own streams)",
                         "grey",
                         lambda k=k: run_parallel(path, k, work="fastmog", seconds=a.seconds,
                                                  warmup=a.warmup, height=h, width=w),
                         nvdec=True)
            k = max(a.parallel)
            self.row(name, f"parallel_decode_{k}",
                     f"{k} x NVDEC decode alone ({k} thread{'s' * (k > 1)})",
                     "grey", lambda: run_parallel(path, k, work="decode", seconds=a.seconds,
                                                  warmup=a.warmup, height=h, width=w),
                     nvdec=True)
        fastmog.empty_cache()


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--clips", type=pathlib.Path,
                   default=pathlib.Path(os.environ.get("FASTMOG_CLIPS",
                                                       ROOT / ".testdata" / "clips")),
                   help="folder holding clips.json and the clips (default .testdata/clips "
                        "or $FASTMOG_CLIPS)")
    p.add_argument("--names", type=lambda s: [x for x in s.split(",") if x],
                   default=list(DEFAULT_CLIPS),
                   help=f"clips to measure, comma-separated (default: {','.join(DEFAULT_CLIPS)})")
    p.add_argument("--seconds", type=float, default=2.0,
                   help="steady time each measurement runs at least (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=8,
                   help="frames of the warm-up pass before each measurement (default: %(default)s)")
    p.add_argument("--cpu-frames", type=int, default=96,
                   help="at most this many frames through OpenCV's CPU MOG2 (default: %(default)s)")
    p.add_argument("--parallel", type=lambda s: sorted({int(x) for x in s.split(",") if x}),
                   default=[1, 2, 4, 7],
                   help="decoders run in parallel, comma-separated (default: 1,2,4,7)")
    p.add_argument("--sessions", type=lambda s: sorted({int(x) for x in s.split(",") if x}),
                   default=[2, 4, 7],
                   help="NVDEC sessions over one file, comma-separated (default: 2,4,7)")
    p.add_argument("--loop", type=int, default=10,
                   help="measure each clip played this many times over, remuxed without "
                        "re-encoding into a temporary file (an IDR picture where each "
                        "repetition starts); 1: the clip itself (default: %(default)s)")
    p.add_argument("--groups", type=lambda s: set(x for x in s.split(",") if x),
                   default=set(GROUPS),
                   help=f"rows to run, comma-separated, from {','.join(GROUPS)} (default: all)")
    p.add_argument("--write", type=pathlib.Path, default=None,
                   help="also write the table as Markdown to this file")
    args = p.parse_args(argv)
    if args.seconds <= 0 or args.warmup < 1 or args.cpu_frames < 1:
        p.error("--seconds, --warmup and --cpu-frames must be positive")
    if not args.sessions or min(args.sessions) < 1 or args.loop < 1:
        p.error("--sessions takes positive counts, e.g. 2,4,7; --loop a positive count")
    if not args.parallel or min(args.parallel) < 1:
        p.error("--parallel takes positive counts, e.g. 1,2,4,7")
    if args.groups - set(GROUPS):
        p.error(f"unknown --groups {','.join(sorted(args.groups - set(GROUPS)))}: "
                f"choose from {','.join(GROUPS)}")
    return args


def fail(message):
    print(f"video.py: {message}", file=sys.stderr)
    sys.exit(2)


def load_clips(args):
    manifest_path = args.clips / "clips.json"
    if not manifest_path.is_file():
        fail(f"no clips in {args.clips}: run python benchmarks/make_clips.py "
                 f"(or pass --clips DIR)")
    manifest = json.loads(manifest_path.read_text())
    clips = []
    for name in args.names:
        if name not in manifest or not (args.clips / name).is_file():
            fail(f"{name} is not in {args.clips} (clips.json lists "
                     f"{', '.join(manifest)})")
        clips.append((name, args.clips / name, manifest[name]))
    return clips


def write_elementary_stream(nvc, path, out, times):
    """The clip's packets as PyNvVideoCodec's demuxer hands them to NVDEC
    (Annex-B, parameter sets in band), written `times` times over into a raw
    elementary stream: a long clip without PyAV. Returns the frame count."""
    packets = [ctypes.string_at(p.bsl_data, p.bsl)
               for p in nvc.CreateDemuxer(filename=str(path)) if p.bsl]
    with open(out, "wb") as f:
        for _ in range(times):
            f.writelines(packets)
    return len(packets) * times


def looped(clips, times, folder, nvc):
    """Each clip played `times` times over: remuxed into Matroska
    (make_clips.loop_clip) where PyAV is installed, else as a raw elementary
    stream through PyNvVideoCodec's demuxer; or the clips themselves, with
    the reason, when neither can."""
    if times == 1:
        return clips, None
    try:
        import av  # noqa: F401
        from make_clips import loop_clip      # a sibling script: its folder is sys.path[0]
    except ImportError:
        loop_clip = None
        if nvc is None:
            return clips, "clips not looped: neither PyAV nor PyNvVideoCodec is installed"
    out = []
    for name, path, info in clips:
        stem = pathlib.Path(name).stem
        if loop_clip is not None:
            looped_name = f"{stem}_x{times}.mkv"
            frames = loop_clip(path, folder / looped_name, times)
        else:
            looped_name = f"{stem}_x{times}.{info['codec']}"
            frames = write_elementary_stream(nvc, path, folder / looped_name, times)
        out.append((looped_name, folder / looped_name, dict(info, frames=frames)))
    return out, None


def header_line(nvc, nvml, engines, cv2):
    parts = []
    if fastmog.cuda_available():
        props = fastmog.device_properties(0)
        runtime, driver = fastmog._fastmog._versions()
        parts.append(props["name"])
        version = nvml.driver_version() if nvml is not None else None
        parts.append(f"driver {version + ' ' if version else ''}(CUDA {driver // 1000}."
                     f"{driver % 1000 // 10}), runtime {runtime // 1000}.{runtime % 1000 // 10}")
    else:
        parts.append("no GPU (" + " ".join(fastmog._fastmog._cuda_status()) + ")")
    parts.append(f"{os.cpu_count()} CPU cores")
    parts.append(f"OpenCV {cv2.__version__} ({cv2.getNumThreads()} threads)")
    if nvc is not None:
        parts.append(f"PyNvVideoCodec {getattr(nvc, '__version__', '?')}")
    if engines:
        parts.append("NVDEC engines " + ", ".join(f"{c}: {n}" for c, n in engines.items()))
    parts.append(datetime.date.today().isoformat())
    return ", ".join(parts)


NOTES = """\
- frames/s and ms/frame: the steady rate, as over a long video. Each
  measurement loops over the short clip with a new reader per pass until it
  has {seconds:g} s of steady time (or {wall:g} s of wall time: a shorter steady
  part is noted), after a warm-up pass of {warmup} frames; the time spent
  opening readers (and the frame NVDEC decodes while opening) is left out.
  "with re-open" is the rate of the loop itself, with the mean time to open
  one reader. OpenCV's CPU MOG2 rows stop after {cpu_frames} frames.
- vs NVDEC decode: against "NVDEC decode alone (VideoReader)" with as many
  NVDEC sessions on the same clip; vs host decode: against "host decode -> fastmog" of the same colour
  (grey for rows without colour). Targets (issue 11): NVDEC -> fastmog at
  >= {tc}x NVDEC decode alone and >= {th:g}x the host-decode path.
- NVDEC rows wait for their stream at the end of every pass (inside the
  timed part), so no GPU work hides behind the next opening. Host masks from
  NVDEC go into a ring of 4 pinned buffers by non-blocking downloads; a
  buffer is reused after its download finished. Host-decode rows do not
  wait at a pass's end: the pipeline's last few frames (well under 1 ms of
  GPU work) may overlap the next opening, which favours the host path.
- Session rows: one VideoReader(sessions=N) over the one file: N NVDEC
  sessions decode a closed GOP each at once, and the frames come out in
  order into one subtractor (one session runs on one NVDEC engine).
- Parallel rows: each decoder runs in its own thread with its own stream,
  reader and subtractor over the same clip; frames/s is the sum of the
  decoders' steady rates, "with re-open" all frames over the common wall
  time. NVDEC util is NVML's decoder utilization of the device (as
  nvidia-smi shows it), the mean of 0.1 s samples while the row ran."""


def main(argv=None):
    args = parse_args(argv)
    folder = tempfile.TemporaryDirectory(prefix="fastmog-video-")
    nvc, nvdec_why = nvdec_status()
    clips, loop_why = looped(load_clips(args), args.loop, pathlib.Path(folder.name), nvc)
    try:
        import cv2
    except ImportError:
        fail("OpenCV is needed (host decoding, CPU MOG2): "
                 "pip install opencv-python-headless")
    gpu_why = None
    if not fastmog.cuda_available():
        gpu_why = "no usable GPU: " + " ".join(fastmog._fastmog._cuda_status())
    nvml = Nvml(fastmog.device_properties(0)["pci_bus_id"]) if gpu_why is None else None
    engines = {}
    if nvc is not None:
        for name, path, info in clips:
            engines.setdefault(info["codec"], decoder_engines(nvc, path, 0))
    header = header_line(nvc, nvml, engines, cv2)
    skipped = "".join(f"\n\nNot run: {why}" for why in dict.fromkeys((gpu_why, nvdec_why)) if why)
    if args.loop > 1 and not loop_why:
        skipped += (f"\n\nClips: each clip named played {args.loop} times over, not "
                    f"re-encoded ({', '.join(name for name, _, _ in clips)}; .mkv: remuxed "
                    f"by PyAV, .h264/.hevc: the Annex-B elementary stream NVDEC is fed)")
    elif loop_why:
        skipped += f"\n\n{loop_why}"
    print(header + skipped.replace("\n\n", "\n"), flush=True)
    table = Table()
    bench = Bench(args, table, nvc, nvml, cv2)
    started = time.perf_counter()
    for name, path, info in clips:
        bench.clip(name, path, info, nvdec_why, gpu_why)
    elapsed = time.perf_counter() - started
    notes = NOTES.format(seconds=args.seconds, wall=2 * args.seconds, warmup=args.warmup,
                         cpu_frames=args.cpu_frames, tc=TARGET_CEILING, th=TARGET_HOST)
    print()
    print(table.text())
    print(f"\n({elapsed:.0f} s)")
    if args.write:
        command = " ".join(["python benchmarks/video.py"] + (argv if argv is not None
                                                              else sys.argv[1:]))
        args.write.write_text(f"# fastmog video benchmark\n\n{header}{skipped}\n\n"
                              f"Command: `{command}` ({elapsed:.0f} s)\n\n"
                              f"{table.markdown()}\n\n{notes}\n")
        print(f"written to {args.write}")


if __name__ == "__main__":
    main()
