"""fastmog's per-call timer: Timer, profile(), nvtx_range() and the report.

Every GPU operation of fastmog takes ``timer=`` (or uses the Timer of the
innermost ``with fastmog.profile():`` block of the current thread). A timed
call records its host time (what cProfile sees) and, with CUDA events on its
own stream, the GPU time of its work (what Nsight sees). Events are read only
when the records are asked for. In sync mode each call waits for its own
stream before returning, so host profilers charge GPU time to the call that
caused it.
"""
import collections
import contextlib
import dataclasses
import functools
import json

from .. import _fastmog
from . import _analysis, _probes, _view


@dataclasses.dataclass(frozen=True)
class CallRecord:
    """One timed call. Times in milliseconds; host_start is perf_counter()
    seconds; gpu_start (same clock) is None for calls without GPU work.

    queued_start (same clock) is when the call's stream reached the call,
    before the waits on other streams it inserted: [queued_start, gpu_start]
    is time queued behind other work, never part of gpu_ms. behind is the
    record a GPU wait was for (Stream.wait: the call that recorded the
    event), session a decoder session, wait_start when the host began to
    block, gil_ms the part of waited_ms after the GPU work was done (taking
    the GIL back from other Python threads), bytes_read/bytes_written the
    bytes its GPU work moves by fastmog's own count (frames, masks, the
    model), submitted (same clock) when the host had submitted that work."""

    index: int
    name: str
    activity: str | None
    stream: int
    device: int
    shape: tuple
    parent: int | None
    host_start: float
    host_ms: float
    waited_ms: float
    gpu_ms: float | None
    gpu_start: float | None
    waited_on: tuple  # indices of earlier calls the host waited for
    waited_on_count: int
    queued_start: float | None = None
    behind: int | None = None
    behind_stream: int = 0
    session: int | None = None
    wait_start: float | None = None
    bytes_read: int = 0
    bytes_written: int = 0
    gpu_ms_raw: float | None = None   # the events' own window, before the latency is taken off
    gil_ms: float = 0.0     # of waited_ms, after the GPU work was done: getting the GIL back
    # host clock, once the call's GPU work was submitted; None without GPU work
    submitted: float | None = None
    # the window opened behind a gate the host opened once the work was
    # submitted (Timer.gpu_copies): no wait for the host is in it
    gated: bool = False

    @property
    def gpu_end(self):
        return None if self.gpu_start is None else self.gpu_start + self.gpu_ms / 1e3


def _records(raw):
    out = []
    for i, r in enumerate(raw):
        (name, activity, stream, device, h, w, c, parent, start_ns, host_ns, waited_ns,
         gpu_ms, gpu_start_ns, causes, n_causes) = r[:15]
        queued_ns, behind, behind_stream, session, wait_ns, read, written, gil_ns = (
            r[15:23] if len(r) >= 23 else (None, -1, 0, -1, 0, 0, 0, 0))
        submitted_ns = r[23] if len(r) >= 24 and gpu_start_ns is not None else 0
        out.append(CallRecord(
            index=i, name=name, activity=activity, stream=stream, device=device,
            shape=(h, w, c) if h > 0 else (), parent=None if parent < 0 else parent,
            host_start=start_ns / 1e9, host_ms=host_ns / 1e6, waited_ms=waited_ns / 1e6,
            gpu_ms=gpu_ms, gpu_start=None if gpu_start_ns is None else gpu_start_ns / 1e9,
            waited_on=tuple(causes), waited_on_count=n_causes,
            queued_start=None if queued_ns is None else queued_ns / 1e9,
            behind=None if behind < 0 else behind, behind_stream=behind_stream,
            session=None if session < 0 else session,
            wait_start=wait_ns / 1e9 if wait_ns else None,
            bytes_read=read, bytes_written=written, gil_ms=gil_ns / 1e6,
            submitted=submitted_ns / 1e9 if submitted_ns else None,
            gated=bool(r[24]) if len(r) >= 25 else False))
    return out


def _fmt(ms):
    """nvprof-style time: us below a millisecond, else ms, else s."""
    if ms < 1.0:
        return f"{ms * 1000:.3f}us"
    if ms < 1000.0:
        return f"{ms:.3f}ms"
    return f"{ms / 1000:.3f}s"


def _stats(values):
    return sum(values), len(values), sum(values) / len(values), min(values), max(values)


class Timer(_fastmog._Timer):
    """Timer(sync=False, nvtx=True): records of timed fastmog calls.

    Pass it per call (``timer=t``) or make it active for a block with
    ``fastmog.profile()``. ``records`` lists the calls, ``report()`` prints
    nvprof-style tables of GPU activities and host calls (each wait charged
    to its root cause), the engines' busy fractions, bandwidth against the
    measured ceilings and a verdict; ``to_chrome_trace()`` writes a timeline
    for chrome://tracing or Perfetto, ``reset()`` forgets.
    """

    nvml: dict | None = None          # NVML's summary of the last profile() block
    # GPU windows less the latency of event timing, measured once per process
    # and device for each transition (fastmog._probes.event_bias)
    calibrate = True

    def latency(self, name, seconds):
        """Records one latency sample of `name` (a live stream's frame, from its
        decode to its mask, say); report() gives each name's median, p99 and
        max, and `latencies` the samples."""
        self.__dict__.setdefault("_latencies", {}).setdefault(name, []).append(float(seconds))

    @property
    def latencies(self):
        """{name: [seconds, ...]} of the latency samples so far."""
        return {k: list(v) for k, v in self.__dict__.get("_latencies", {}).items()}

    def reset(self):
        """Forgets every record and latency sample."""
        super().reset()
        self.__dict__.pop("_latencies", None)

    @property
    def records(self):
        """The calls so far (reads pending CUDA events, waiting only for them).
        With `calibrate`, gpu_ms is the events' window less the latency the
        GPU adds between an event and the operation (measured once per
        process); gpu_ms_raw keeps the window."""
        records = _records(self._raw_records())
        if self.calibrate and any(r.gpu_ms is not None and r.device >= 0 for r in records):
            records = _probes.corrected(records)
        return records

    def analysis(self, records=None, ceilings=None):
        """The records analysed (fastmog.profiling._analysis.Profile). Ceilings
        are measured once per process where there is GPU work, unless given."""
        records = self.records if records is None else records
        if ceilings is None:
            devices = [r.device for r in records if r.gpu_ms is not None and r.device >= 0]
            if devices:
                    ceilings = _probes.ceilings(devices[0])
        return _analysis.Profile(records, ceilings, self.nvml)

    def gpu_activities(self, records=None):
        """{(activity, call name): [GPU ms, ...]} for calls with GPU work of
        their own (a Stream.wait's window is queued time, not work)."""
        groups = collections.defaultdict(list)
        for r in self.records if records is None else records:
            if r.gpu_ms is not None and r.activity != "wait":
                groups[(r.activity, r.name)].append(r.gpu_ms)
        return dict(groups)

    def host_calls(self, records=None):
        """{name: (host ms list, waited ms total, {root cause: waited ms})}:
        a wait for a call that was itself queued behind other work (a decode)
        is charged to that work, following the chain."""
        records = self.records if records is None else records
        causes = _analysis.Profile(records).host_causes()
        groups = {}
        for r in records:
            host, waited = groups.setdefault(r.name, ([], [0.0]))
            host.append(r.host_ms)
            waited[0] += r.waited_ms
        return {k: (h, w[0], causes.get(k, ({}, {}))[0]) for k, (h, w) in groups.items()}

    def gpu_span(self, name, activity, stream, shape=(0, 0, 0), *, session=-1,
                 host_start_ns=None, bytes_read=0, bytes_written=0):
        """A context manager timing, as record `name` with `activity`, the GPU
        work queued on `stream` inside it (a decoder's output copy): timer-owned
        CUDA events, so the caller's own events may be re-recorded at will.
        Call the span's submitted() after queuing its first operation to
        leave out the time the GPU then waited for the host."""
        return _GpuSpan(self, name, activity, stream, shape, session, host_start_ns,
                        bytes_read, bytes_written)

    def gpu_copies(self, name, activity, stream, pairs, shape=(0, 0, 0), *, session=-1,
                   host_start_ns=None):
        """Queues the device-to-device copies `pairs` ((src, dst) GpuMats) on
        `stream`, timed as one record `name` with `activity` (a decoder's
        output copy): its events sit beside the copies in one C call, so no
        other thread can take the GIL inside the GPU window the way it can
        between gpu_span's entry and the work. Returns the record's index."""
        return self._gpu_copies(name, activity, stream, tuple(shape), pairs, session=session,
                                host_start_ns=host_start_ns)

    def report(self, ceilings=None):
        """The nvprof-shaped summary as text, ending with the verdict."""
        records = self.records
        prof = self.analysis(records, ceilings)
        lines = [f"==fastmog== {len(records)} calls timed"
                 f"{' (sync mode)' if self.sync else ''} over {_fmt(prof.seconds * 1e3)}"]
        gpu = self.gpu_activities(records)
        total_gpu = sum(sum(v) for v in gpu.values())
        queued = collections.defaultdict(float)
        for r in records:
            if r.gpu_ms is not None and r.activity != "wait":
                queued[(r.activity, r.name)] += prof.queued_ms(r)
        lines.append("GPU activities:")
        cut = [r.gpu_ms_raw - r.gpu_ms for r in records if r.gpu_ms_raw is not None]
        if cut:
            lines.append(f"  (each window less the event latency measured on this GPU for its "
                         f"transition: {_fmt(min(cut))} to {_fmt(max(cut))}; "
                         f"CallRecord.gpu_ms_raw keeps the window)")
        lines.append(f"{'Time(%)':>8} {'Time':>11} {'Calls':>6} {'Avg':>11} {'Min':>11} "
                     f"{'Max':>11} {'Queued':>11}  Name")
        for (activity, name), values in sorted(gpu.items(), key=lambda kv: -sum(kv[1])):
            t, n, avg, lo, hi = _stats(values)
            pct = 100.0 * t / total_gpu if total_gpu else 0.0
            lines.append(f"{pct:7.2f}% {_fmt(t):>11} {n:>6} {_fmt(avg):>11} {_fmt(lo):>11} "
                         f"{_fmt(hi):>11} {_fmt(queued[(activity, name)]):>11}  "
                         f"[{activity}] {name}")
        if not gpu:
            lines.append("  (no GPU work recorded)")
        causes = prof.host_causes()
        top_level = sum(r.host_ms for r in records if r.parent is None)
        lines.append("Host calls:")
        lines.append(f"{'Time(%)':>8} {'Time':>11} {'Calls':>6} {'Avg':>11} {'Min':>11} "
                     f"{'Max':>11} {'Waited':>11}  Name")
        host = collections.defaultdict(lambda: ([], [0.0]))
        for r in records:
            host[r.name][0].append(r.host_ms)
            host[r.name][1][0] += r.waited_ms
        for name, (values, waited) in sorted(host.items(), key=lambda kv: -sum(kv[1][0])):
            t, n, avg, lo, hi = _stats(values)
            pct = 100.0 * t / top_level if top_level else 0.0
            why = ""
            roots, chains = causes.get(name, ({}, {}))
            if roots:
                parts = []
                for root, ms in sorted(roots.items(), key=lambda kv: -kv[1]):
                    vias = [via for (rt, via), v in chains.items() if rt == root and via and v > 0]
                    chain = ""
                    if vias:
                        via = max(vias, key=lambda v: chains[(root, v)])
                        chain = " [" + " -> ".join(via + (root,)) + "]"
                    parts.append(f"{root} ({_fmt(ms)}){chain}")
                why = "  waiting on " + ", ".join(parts)
            lines.append(f"{pct:7.2f}% {_fmt(t):>11} {n:>6} {_fmt(avg):>11} {_fmt(lo):>11} "
                         f"{_fmt(hi):>11} {_fmt(waited[0]):>11}  {name}{why}")
        lines.extend(_latency_lines(self.latencies))
        lines.extend(_engine_lines(prof))
        lines.append(prof.verdict())
        return "\n".join(lines)

    def __str__(self):
        return self.report()

    def _repr_html_(self):
        prof = self.analysis()
        return _view.html(prof, self.report(prof.ceilings))

    def to_chrome_trace(self, path=None):
        """The calls as Chrome trace / Perfetto JSON: the host thread, each
        stream and each engine (NVDEC sessions, copies, SMs) on a track of its
        own, queued windows named for what they were behind, and flow arrows
        from each host wait to its root cause. Returns the dict; writes it to
        `path` if given."""
        trace = _view.chrome_trace(_analysis.Profile(self.records))
        if path is not None:
            with open(path, "w") as f:
                json.dump(trace, f)
        return trace


def _latency_lines(latencies):
    """Each latency's distribution: median, p99, max."""
    if not latencies:
        return []
    lines = ["Latency:"]
    for name, samples in latencies.items():
        ms = sorted(1e3 * t for t in samples)
        p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
        lines.append(f"  {name}: median {_fmt(ms[len(ms) // 2])}, p99 {_fmt(p99)}, max "
                     f"{_fmt(ms[-1])} over {len(ms)} samples")
    return lines


def _engine_lines(prof):
    lines = []
    busy = prof.busy()
    if busy:
        lines.append(f"Engines (busy fraction of {_fmt(prof.seconds * 1e3)}):")
        for engine, b in sorted(busy.items(), key=lambda kv: -kv[1]):
            lines.append(f"{100 * b:7.1f}%  {engine}")
    rows = prof.bandwidth()
    if rows:
        c = prof.ceilings
        head = "Bandwidth (fastmog's byte count"
        head += (f"; ceilings {c.source}: PCIe H2D {c.h2d:.1f}, D2H {c.d2h:.1f}, device memory "
                 f"{c.device:.0f} GB/s):" if c is not None else "; no ceilings measured):")
        lines.append(head)
        for row in rows:
            frac = f"{100 * row['fraction']:5.1f}% of ceiling" if row["fraction"] is not None else ""
            if row["fraction"] is not None and row["fraction"] > 1:
                # a kernel above device memory's ceiling read from L2 (or less
                # than counted); a copy a little above PCIe's is the ceiling's
                # own measurement spread
                frac += (" (at the measured ceiling)" if row["activity"].startswith("memcpy")
                         else " (served from L2, or fewer modes used than counted)")
            lines.append(f"{row['gbps']:9.2f} GB/s {frac:>18}  {row['bytes'] / 1e6:10.1f} MB  "
                         f"[{row['activity']}] {row['name']}")
    if prof.nvml is not None:
        n = prof.nvml
        if "absent" in n:
            lines.append(f"NVML: absent ({n['absent']})")
        else:
            dec = n.get("decoder_percent")
            lines.append(f"NVML ({n['samples']} samples): SM {n['sm_percent']:.0f} %, decoder "
                         f"{'n/a' if dec is None else f'{dec:.0f} %'}")
    return lines


class _GpuSpan:
    def __init__(self, timer, name, activity, stream, shape, session, host_start_ns,
                 bytes_read, bytes_written):
        self.timer, self.stream, self.index = timer, stream, None
        self.args = (name, activity, stream, tuple(shape))
        self.kwargs = {"session": session, "host_start_ns": host_start_ns}
        self.bytes = (bytes_read, bytes_written)

    def __enter__(self):
        begin = getattr(self.timer, "_gpu_begin")
        self.index = begin(*self.args, **self.kwargs)
        return self

    def submitted(self):
        """Says that the span's first operation has been queued: on a stream
        the GPU reached before then, its wait for the host is left out of
        the span's GPU time (as it is for fastmog's own calls)."""
        self.timer._gpu_submitted(self.index)

    def __exit__(self, *exc):
        end = getattr(self.timer, "_gpu_end")
        end(self.index, stream=self.stream, bytes_read=self.bytes[0], bytes_written=self.bytes[1])
        return False


@contextlib.contextmanager
def profile(sync=False, nvtx=True, timer=None, nvml=True):
    """Times every fastmog call of this thread inside the block:

        with fastmog.profile() as t:
            mask = sub.apply(frame, stream=s)
        print(t.report())

    `sync=True` makes each call wait for its own stream's work before it
    returns (not the whole device). Pass `timer` to keep adding to one Timer.
    `nvml`: sample SM and decoder utilization with the driver's NVML during
    the block where it is present (the report says when it is absent).
    """
    t = Timer(sync=sync, nvtx=nvtx) if timer is None else timer
    with sampling_nvml(t) if nvml else contextlib.nullcontext():
        token = _fastmog._profile_enter(t)
        try:
            yield t
        finally:
            _fastmog._profile_exit(token)


@contextlib.contextmanager
def sampling_nvml(timer, device=0):
    """Samples SM and decoder utilization of CUDA device `device` with the
    driver's NVML while the block runs (where NVML is present); the summary
    becomes timer.nvml, the report's NVML line."""
    sampler = _probes.NvmlSampler(device).start()
    try:
        yield timer
    finally:
        timer.nvml = sampler.stop()


class nvtx_range:
    """An NVTX range in the fastmog domain around your own code, as a context
    manager (``with fastmog.nvtx_range("decode"):``) or a decorator."""

    def __init__(self, name):
        self.name = str(name)

    def __enter__(self):
        _fastmog._nvtx_push(self.name)
        return self

    def __exit__(self, *exc):
        _fastmog._nvtx_pop()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapper
