"""What a profile says, from its records alone: each call's own GPU work apart
from the time its stream spent queued behind other streams, every host wait
charged to its root cause along the chain of waits, each engine's busy
fraction over the profiled interval, bandwidth against a ceiling, and one
verdict line naming what bounds the run.

Pure Python over records (fastmog.CallRecord, or anything with its fields), so
it runs on synthetic records on a machine without a GPU. Times are seconds of
the host clock (perf_counter); GPU times were mapped onto it by the Timer's
per-device epoch.

The engines:
- "H2D copies" and "D2H copies" (PCIe): memcpy HtoD / DtoH records;
- "kernels (SMs)": kernels, memsets and device-to-device copies;
- "NVDEC session k": a decoder session's records (activity starting "NVDEC"):
  its host windows (the Decode call, which returns when the engine has the
  frame) and its GPU windows (the output copy); with one session decoding in
  the caller's thread, "NVDEC";
- "host": the calling thread, busy whenever it is not blocked in a fastmog
  wait (download, synchronize) or waiting for a decoded frame.
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Any, Iterable, Sequence

H2D, D2H, SM, HOST = "H2D copies", "D2H copies", "kernels (SMs)", "host"
DECODE = "NVDEC decode"
# A wait's tail after its GPU work was done (CallRecord.gil_ms): the waiting
# thread was taking the GIL back from the others (an NVDEC session thread,
# say), which no GPU window explains.
GIL = "the GIL (other Python threads)"

_LABELS = {H2D: "host->device copies (PCIe)", D2H: "device->host copies (PCIe)",
           SM: "MOG2 kernels", HOST: "the host (Python or the frame producer)",
           DECODE: "NVDEC decode"}
_EPS = 20e-6        # clock slack when matching GPU windows across streams (s)


@dataclasses.dataclass(frozen=True)
class Ceilings:
    """Bandwidth ceilings in GB/s (1e9 bytes/s): PCIe each way, measured with
    a pinned 64 MiB copy, and device memory, measured with a device-to-device
    copy (bytes read + written per second)."""

    h2d: float
    d2h: float
    device: float
    source: str = "measured"


# ---- intervals ------------------------------------------------------------------

def _union(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _length(intervals: Iterable[tuple[float, float]]) -> float:
    return sum(b - a for a, b in _union(intervals))


def _clip(intervals, lo, hi):
    return [(max(a, lo), min(b, hi)) for a, b in intervals if min(b, hi) > max(a, lo)]


def _subtract(intervals, cut):
    """`intervals` minus the union of `cut`."""
    out = []
    cut = _union(cut)
    for a, b in intervals:
        pos = a
        for c, d in cut:
            if d <= pos or c >= b:
                continue
            if c > pos:
                out.append((pos, c))
            pos = max(pos, d)
        if pos < b:
            out.append((pos, b))
    return out


# ---- records --------------------------------------------------------------------

def gpu_window(r) -> tuple[float, float] | None:
    if r.gpu_ms is None or r.gpu_start is None:
        return None
    return (r.gpu_start, r.gpu_start + r.gpu_ms / 1e3)


def host_window(r) -> tuple[float, float]:
    return (r.host_start, r.host_start + r.host_ms / 1e3)


def is_wait(r) -> bool:
    return r.activity == "wait"


def is_decode(r) -> bool:
    return bool(r.activity) and str(r.activity).startswith("NVDEC")


def engine_of(r) -> str | None:
    """The engine a record's own GPU (or decoder) work ran on, None for waits
    and host-only calls."""
    act = r.activity or ""
    if act == "wait":
        return None
    if act.startswith("NVDEC"):
        session = getattr(r, "session", None)
        return f"NVDEC session {session}" if session is not None and session >= 0 else "NVDEC"
    if gpu_window(r) is None:
        return None
    if act == "memcpy HtoD":
        return H2D
    if act == "memcpy DtoH":
        return D2H
    return SM


def cause_name(r) -> str:
    return f"{r.name} (NVDEC)" if is_decode(r) else r.name


class Profile:
    """The analysis of one list of records (indexed by CallRecord.index)."""

    def __init__(self, records: Sequence[Any], ceilings: Ceilings | None = None,
                 nvml: dict | None = None):
        self.records = list(records)
        self.ceilings = ceilings
        self.nvml = nvml
        self.sessions = any(is_decode(r) and not self._main_thread(r) for r in self.records)
        self._owner = self._decode_owners()
        self._queued = self._queued_windows()

    def _decode_owners(self) -> dict[int, int]:
        """{index: decode record}: timed calls queued inside a decoder's GPU
        span (its output copy made of fastmog calls) are the decoder's work."""
        owners: dict[int, int] = {}
        spans = []
        for r in self.records:
            dw = gpu_window(r)
            if is_decode(r) and dw is not None:
                spans.append((r, dw))
        if not spans:
            return owners
        for r in self.records:
            w = gpu_window(r)
            if w is None or is_decode(r) or is_wait(r):
                continue
            for d, dw in spans:
                if (d.stream == r.stream and d.index < r.index
                        and dw[0] - _EPS <= w[0] and w[1] <= dw[1] + _EPS):
                    owners[r.index] = d.index
                    break
        return owners

    def owner(self, r):
        """The record a call's work belongs to: itself, or the decode whose
        span holds it."""
        i = self._owner.get(r.index)
        return r if i is None else self.records[i]

    # ---- the profiled interval ------------------------------------------------

    @property
    def interval(self) -> tuple[float, float]:
        if not self.records:
            return (0.0, 0.0)
        lo = min(r.host_start for r in self.records)
        hi = max(host_window(r)[1] for r in self.records)
        for r in self.records:
            w = gpu_window(r)
            if w is not None:
                lo, hi = min(lo, w[0]), max(hi, w[1])
        return (lo, hi)

    @property
    def seconds(self) -> float:
        lo, hi = self.interval
        return hi - lo

    # ---- queued behind ----------------------------------------------------------

    def _infer_behind(self, r, q0, q1):
        """The record on another stream whose GPU work ended last within the
        wait [q0, q1]: what the stream was waiting for."""
        best, best_end = None, None
        for o in self.records:
            if o.index >= r.index or o.stream == r.stream or is_wait(o):
                continue
            w = gpu_window(o)
            if w is None or not (q0 - _EPS <= w[1] <= q1 + _EPS):
                continue
            if best_end is None or w[1] > best_end:
                best, best_end = o.index, w[1]
        return best

    def _queued_windows(self):
        """{index: [(q0, q1, behind index or None)]}: the windows a GPU call's
        stream spent waiting on other streams before the call's own work:
        its own queued..start (less nested calls' GPU work) and the windows
        of the Stream.wait calls on its stream since the stream's previous
        call."""
        out: dict[int, list] = collections.defaultdict(list)
        children = collections.defaultdict(list)
        for r in self.records:
            if r.parent is not None:
                children[r.parent].append(r)
        pending_waits: dict[int, list] = collections.defaultdict(list)
        for r in self.records:
            w = gpu_window(r)
            if w is None:
                continue
            if is_wait(r):
                behind = r.behind if getattr(r, "behind", None) is not None else None
                if behind is None:
                    behind = self._infer_behind(r, w[0], w[1])
                pending_waits[r.stream].append((w[0], w[1], behind))
                continue
            for q in pending_waits.pop(r.stream, []):
                out[r.index].append(q)
            q0 = getattr(r, "queued_start", None)
            if q0 is not None and w[0] > q0:
                nested = [gpu_window(c) for c in children[r.index]]
                nested += [(q[0], q[1]) for c in children[r.index] for q in out.get(c.index, [])]
                pieces = _subtract([(q0, w[0])], [n for n in nested if n is not None])
                behind = r.behind if getattr(r, "behind", None) is not None else None
                for a, b in pieces:
                    if b - a <= 0:
                        continue
                    out[r.index].append((a, b, behind if behind is not None
                                         else self._infer_behind(r, a, b)))
        return dict(out)

    def queued(self, r) -> list[tuple[float, float, int | None]]:
        return self._queued.get(r.index, [])

    def queued_ms(self, r) -> float:
        return 1e3 * sum(b - a for a, b, _ in self.queued(r))

    # ---- waits charged to their root cause ---------------------------------------

    def _attribute(self, lo, hi, targets, depth, via, out, by_index=None):
        """Charges the window [lo, hi] to `targets` (records the waiter was
        behind): their own work to them, the time they were queued behind
        other work to that work, recursively. Returns what is left."""
        left = [(lo, hi)]
        for t in sorted(targets, key=lambda r: -r.index):
            if not left:
                break
            own = []
            w = gpu_window(t)
            if w is not None and not is_wait(t):
                own.append(w)
            if is_decode(t):
                own.append(host_window(t))
            for piece in _union(_clip(own, lo, hi)):
                hit = _clip(left, *piece)
                ms = 1e3 * _length(hit)
                if ms > 0:
                    out[(cause_name(self.owner(t)), via)] += ms
                    if by_index is not None:
                        by_index[self.owner(t).index] += ms
                    left = _subtract(left, hit)
            windows = list(self.queued(t))
            if is_wait(t) and w is not None:
                windows.append((w[0], w[1], getattr(t, "behind", None)
                                if getattr(t, "behind", None) is not None
                                else self._infer_behind(t, *w)))
            for q0, q1, behind in windows:
                hit = _clip(left, q0, q1)
                if not hit:
                    continue
                left = _subtract(left, hit)
                if behind is None or depth > 16:
                    name = "other streams" if is_wait(t) else f"{cause_name(t)} queued"
                    out[(name, via)] += 1e3 * _length(hit)
                    continue
                b = self.owner(self.records[behind])
                deeper = via if is_wait(t) else via + (cause_name(t),)
                for a, c in hit:
                    rest = self._attribute(a, c, [b], depth + 1, deeper, out, by_index)
                    # unexplained time inside a wait for `b` is still b's doing
                    ms = 1e3 * _length(rest)
                    if ms > 0:
                        out[(cause_name(b), deeper)] += ms
                        if by_index is not None:
                            by_index[b.index] += ms
        return left

    def wait_root(self, r):
        """The record a host call's wait is charged to the most, or None."""
        by_index: dict[int, float] = collections.defaultdict(float)
        self.wait_causes(r, by_index)
        if not by_index:
            return None
        return self.records[max(by_index, key=lambda i: by_index[i])]

    def wait_window(self, r) -> tuple[float, float] | None:
        if r.waited_ms <= 0:
            return None
        ws = getattr(r, "wait_start", None)
        end = host_window(r)[1]
        lo = ws if ws is not None else end - r.waited_ms / 1e3
        return (lo, min(end, lo + r.waited_ms / 1e3))

    def wait_causes(self, r, by_index=None) -> dict[tuple, float]:
        """{(root cause name, chain of calls in between): ms} of one host
        call's blocking wait."""
        out: dict[tuple, float] = collections.defaultdict(float)
        if r.waited_ms <= 0:
            return dict(out)
        ws = getattr(r, "wait_start", None)
        end = host_window(r)[1]
        lo = ws if ws is not None else end - r.waited_ms / 1e3
        hi = min(end, lo + r.waited_ms / 1e3)
        gil = min(getattr(r, "gil_ms", 0.0) or 0.0, r.waited_ms) / 1e3
        if gil > 0:
            out[(GIL, ())] += 1e3 * gil
            hi -= gil
            if hi <= lo:
                return dict(out)
        targets = [self.records[i] for i in r.waited_on if 0 <= i < len(self.records)]
        if gpu_window(r) is not None and r.index not in r.waited_on:
            targets.append(r)           # a blocking copy waits for itself too
        left = self._attribute(lo, hi, targets, 0, (), out, by_index) if targets else [(lo, hi)]
        rest = 1e3 * _length(left)
        if rest > 0:
            own = [t for t in targets if not is_wait(t) and t.gpu_ms]
            total = sum(t.gpu_ms for t in own)
            if own and total > 0:
                for t in own:
                    out[(cause_name(t), ())] += rest * t.gpu_ms / total
            else:
                out[("untimed work", ())] += rest
        return dict(out)

    def host_causes(self):
        """{host call name: ({root: ms}, {(root, via): ms})}."""
        roots: dict = collections.defaultdict(collections.Counter)
        chains: dict = collections.defaultdict(collections.Counter)
        for r in self.records:
            for (root, via), ms in self.wait_causes(r).items():
                roots[r.name][root] += ms
                chains[r.name][(root, via)] += ms
        return {k: (dict(roots[k]), dict(chains[k])) for k in roots}

    # ---- engines ------------------------------------------------------------------

    def _main_thread(self, r) -> bool:
        return not (getattr(r, "session", None) is not None and r.session >= 0)

    def engine_windows(self) -> dict[str, list[tuple[float, float]]]:
        out: dict[str, list] = collections.defaultdict(list)
        for r in self.records:
            e = engine_of(r)
            if e is None or r.index in self._owner:     # owned: in its decode's span
                continue
            if e == "NVDEC" and self.sessions:
                continue        # the consumer waiting for the sessions' frames
            w = gpu_window(r)
            if w is not None:
                out[e].append(w)
            if e.startswith("NVDEC"):
                out[e].append(host_window(r))
        lo, hi = self.interval
        blocked = []
        for r in self.records:
            if not self._main_thread(r):
                continue
            if r.waited_ms > 0:
                ws = getattr(r, "wait_start", None)
                end = host_window(r)[1]
                a = ws if ws is not None else end - r.waited_ms / 1e3
                blocked.append((a, min(end, a + r.waited_ms / 1e3)))
            if is_decode(r):            # decoding, or waiting for a session's frame
                blocked.append(host_window(r))
        out[HOST] = _subtract([(lo, hi)], blocked)
        return {k: _union(v) for k, v in out.items()}

    def busy(self) -> dict[str, float]:
        """Each engine's busy fraction of the profiled interval."""
        span = self.seconds
        if span <= 0:
            return {}
        return {e: min(1.0, _length(w) / span) for e, w in self.engine_windows().items()}

    def groups(self) -> dict[str, float]:
        """Busy fraction per verdict group: decode (the mean over sessions),
        each copy direction, the kernels, the host."""
        busy = self.busy()
        out = {k: busy[k] for k in (H2D, D2H, SM, HOST) if k in busy}
        decoders = [v for k, v in busy.items() if k.startswith("NVDEC")]
        if decoders:
            out[DECODE] = sum(decoders) / len(decoders)
        return out

    # ---- bytes and bandwidth -----------------------------------------------------

    def bandwidth(self) -> list[dict]:
        """Per (activity, name) with bytes: total bytes, GPU seconds, GB/s and
        the fraction of the relevant ceiling."""
        groups: dict[tuple, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
        for r in self.records:
            moved = (getattr(r, "bytes_read", 0) or 0) + (getattr(r, "bytes_written", 0) or 0)
            if r.gpu_ms is None or is_wait(r) or moved <= 0:
                continue
            g = groups[(r.activity, r.name)]
            g[0] += moved
            g[1] += r.gpu_ms / 1e3
            g[2] += 1
        rows = []
        for (activity, name), (moved, seconds, calls) in groups.items():
            e = engine_of_activity(activity)
            # a copy moves its bytes once over PCIe: count them once
            payload = moved / 2 if e in (H2D, D2H) else moved
            gbps = payload / seconds / 1e9 if seconds > 0 else 0.0
            ceiling = None
            if self.ceilings is not None:
                ceiling = {H2D: self.ceilings.h2d, D2H: self.ceilings.d2h}.get(
                    e, self.ceilings.device)
            rows.append({"activity": activity, "name": name, "calls": int(calls), "bytes": payload,
                         "seconds": seconds, "gbps": gbps, "ceiling": ceiling,
                         "fraction": gbps / ceiling if ceiling else None})
        return sorted(rows, key=lambda row: -row["seconds"])

    # ---- the verdict ----------------------------------------------------------------

    def verdict(self) -> str:
        groups = self.groups()
        if not groups:
            return "verdict: nothing was recorded"
        gpu = {k: v for k, v in groups.items() if k != HOST}
        host = groups.get(HOST, 0.0)
        top = max(gpu, key=lambda k: gpu[k]) if gpu else HOST
        if not gpu or host > gpu[top] + 0.05:
            top = HOST
        b = groups[top]
        why = f"busy {100 * b:.0f} % of {self.seconds:.3f} s"
        bw = {row["activity"]: row for row in self.bandwidth()}
        if top in (H2D, D2H):
            row = bw.get("memcpy HtoD" if top == H2D else "memcpy DtoH")
            if row is not None:
                why += f", {row['gbps']:.1f} GB/s"
                if row["fraction"] is not None:
                    why += f" = {100 * row['fraction']:.0f} % of {row['ceiling']:.1f} GB/s measured"
        if top == DECODE:
            sessions = sum(1 for k in self.busy() if k.startswith("NVDEC"))
            why += f" (mean over {sessions} session{'s' if sessions != 1 else ''})"
        if top == HOST:
            waited = 1 - host
            why += f" (blocked on fastmog waits {100 * waited:.0f} % of it)"
        others = []
        for k, v in sorted(groups.items(), key=lambda kv: -kv[1]):
            if k == top:
                continue
            if v < 0.005:
                others.append(f"{_LABELS[k]} idle")
            else:
                others.append(f"{_LABELS[k]} busy {100 * v:.0f} %: could take about "
                              f"{min(1 / v, 999):.1f}x more frames")
        line = f"verdict: bound by {_LABELS[top]}: {why}"
        gil = sum(getattr(r, "gil_ms", 0.0) or 0.0 for r in self.records
                  if self._main_thread(r)) / 1e3
        if self.seconds > 0 and gil / self.seconds >= 0.05:
            others.append(f"the main thread spent {100 * gil / self.seconds:.0f} % of the run "
                          f"taking the GIL back from other Python threads after its GPU work "
                          f"was done")
        return "; ".join([line] + others)


def engine_of_activity(activity) -> str:
    act = activity or ""
    if act == "memcpy HtoD":
        return H2D
    if act == "memcpy DtoH":
        return D2H
    if act.startswith("NVDEC"):
        return "NVDEC"
    return SM
