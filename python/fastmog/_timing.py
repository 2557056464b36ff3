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
import html
import json

from . import _fastmog


@dataclasses.dataclass(frozen=True)
class CallRecord:
    """One timed call. Times in milliseconds; host_start is perf_counter()
    seconds; gpu_start (same clock) is None for calls without GPU work."""

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


def _records(raw):
    out = []
    for i, r in enumerate(raw):
        (name, activity, stream, device, h, w, c, parent, start_ns, host_ns, waited_ns,
         gpu_ms, gpu_start_ns, causes, n_causes) = r
        out.append(CallRecord(
            index=i, name=name, activity=activity, stream=stream, device=device,
            shape=(h, w, c) if h > 0 else (), parent=None if parent < 0 else parent,
            host_start=start_ns / 1e9, host_ms=host_ns / 1e6, waited_ms=waited_ns / 1e6,
            gpu_ms=gpu_ms, gpu_start=None if gpu_start_ns is None else gpu_start_ns / 1e9,
            waited_on=tuple(causes), waited_on_count=n_causes))
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
    nvprof-style tables of GPU activities and host calls, ``to_chrome_trace()``
    writes a timeline for chrome://tracing or Perfetto, ``reset()`` forgets.
    """

    @property
    def records(self):
        """The calls so far (reads pending CUDA events, waiting only for them)."""
        return _records(self._raw_records())

    def gpu_activities(self, records=None):
        """{(activity, call name): [GPU ms, ...]} for calls with GPU work."""
        groups = collections.defaultdict(list)
        for r in self.records if records is None else records:
            if r.gpu_ms is not None:
                groups[(r.activity, r.name)].append(r.gpu_ms)
        return dict(groups)

    def host_calls(self, records=None):
        """{name: (host ms list, waited ms total, {cause name: waited ms})}."""
        records = self.records if records is None else records
        groups = {}
        for r in records:
            host, waited, causes = groups.setdefault(r.name, ([], [0.0], collections.Counter()))
            host.append(r.host_ms)
            waited[0] += r.waited_ms
            if r.waited_ms > 0 and r.waited_on:
                # share the wait among the calls it was for, by their GPU time
                weights = [(records[i].name, records[i].gpu_ms or 0.0) for i in r.waited_on]
                total = sum(w for _, w in weights) or float(len(weights))
                for cause, w in weights:
                    causes[cause] += r.waited_ms * ((w or 1.0) / total if total else 1.0)
        return {k: (h, w[0], dict(c)) for k, (h, w, c) in groups.items()}

    def report(self):
        """The nvprof-shaped summary as text."""
        records = self.records
        lines = [f"==fastmog== {len(records)} calls timed"
                 f"{' (sync mode)' if self.sync else ''}"]
        gpu = self.gpu_activities(records)
        total_gpu = sum(sum(v) for v in gpu.values())
        lines.append("GPU activities:")
        lines.append(f"{'Time(%)':>8} {'Time':>11} {'Calls':>6} {'Avg':>11} {'Min':>11} "
                     f"{'Max':>11}  Name")
        for (activity, name), values in sorted(gpu.items(), key=lambda kv: -sum(kv[1])):
            t, n, avg, lo, hi = _stats(values)
            pct = 100.0 * t / total_gpu if total_gpu else 0.0
            lines.append(f"{pct:7.2f}% {_fmt(t):>11} {n:>6} {_fmt(avg):>11} {_fmt(lo):>11} "
                         f"{_fmt(hi):>11}  [{activity}] {name}")
        if not gpu:
            lines.append("  (no GPU work recorded)")
        host = self.host_calls(records)
        top_level = sum(r.host_ms for r in records if r.parent is None)
        lines.append("Host calls:")
        lines.append(f"{'Time(%)':>8} {'Time':>11} {'Calls':>6} {'Avg':>11} {'Min':>11} "
                     f"{'Max':>11} {'Waited':>11}  Name")
        for name, (values, waited, causes) in sorted(host.items(), key=lambda kv: -sum(kv[1][0])):
            t, n, avg, lo, hi = _stats(values)
            pct = 100.0 * t / top_level if top_level else 0.0
            why = ""
            if causes:
                parts = sorted(causes.items(), key=lambda kv: -kv[1])
                why = "  waiting on " + ", ".join(f"{c} ({_fmt(ms)})" for c, ms in parts)
            lines.append(f"{pct:7.2f}% {_fmt(t):>11} {n:>6} {_fmt(avg):>11} {_fmt(lo):>11} "
                         f"{_fmt(hi):>11} {_fmt(waited):>11}  {name}{why}")
        return "\n".join(lines)

    def __str__(self):
        return self.report()

    def _repr_html_(self):
        return "<pre>" + html.escape(self.report()) + "</pre>"

    def to_chrome_trace(self, path=None):
        """The calls as Chrome trace / Perfetto JSON: host calls on one track,
        GPU work on one track per stream. Returns the dict; writes it to `path`
        if given."""
        events = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "host"}},
                  {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "GPU"}}]
        for r in self.records:
            args = {"shape": list(r.shape), "waited_ms": r.waited_ms}
            if r.waited_on:
                args["waited_on"] = [f"#{i}" for i in r.waited_on]
            events.append({"name": r.name, "cat": "host", "ph": "X", "pid": 0, "tid": 0,
                           "ts": r.host_start * 1e6, "dur": r.host_ms * 1e3,
                           "args": dict(args, call=r.index)})
            if r.gpu_ms is not None:
                events.append({"name": f"{r.activity} ({r.name})", "cat": "gpu", "ph": "X",
                               "pid": 1, "tid": f"stream 0x{r.stream:x}",
                               "ts": r.gpu_start * 1e6, "dur": r.gpu_ms * 1e3,
                               "args": {"call": r.index, "device": r.device}})
        trace = {"traceEvents": events, "displayTimeUnit": "ms"}
        if path is not None:
            with open(path, "w") as f:
                json.dump(trace, f)
        return trace


@contextlib.contextmanager
def profile(sync=False, nvtx=True, timer=None):
    """Times every fastmog call of this thread inside the block:

        with fastmog.profile() as t:
            mask = sub.apply(frame, stream=s)
        print(t.report())

    `sync=True` makes each call wait for its own stream's work before it
    returns (not the whole device). Pass `timer` to keep adding to one Timer.
    """
    t = Timer(sync=sync, nvtx=nvtx) if timer is None else timer
    token = _fastmog._profile_enter(t)
    try:
        yield t
    finally:
        _fastmog._profile_exit(token)


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
