"""Where people look rather than read: a profile as an HTML table with a
timeline picture (matplotlib, optional and imported only here), and as a
Chrome/Perfetto trace with host, stream and engine lanes and flow arrows from
each wait to its root cause. Pure Python over an _analysis.Profile."""
from __future__ import annotations

import base64
import html as _html
import importlib
import io

from . import _analysis as pa


def _lanes(prof):
    """[(lane name, [(start s, end s, label, kind)])]: the host thread, one
    lane per stream, one per engine."""
    host, streams, engines = [], {}, {}
    for r in prof.records:
        if r.parent is None and prof._main_thread(r):
            host.append((r.host_start, pa.host_window(r)[1], r.name, "host"))
        ww = prof.wait_window(r)
        if ww is not None and prof._main_thread(r):
            host.append((ww[0], ww[1], "wait", "wait"))
        if pa.is_decode(r):
            e = pa.engine_of(r)
            if e is not None and not (e == "NVDEC" and prof.sessions):
                engines.setdefault(e, []).append((*pa.host_window(r), r.name, "decode"))
        w = pa.gpu_window(r)
        if w is None:
            continue
        lane = streams.setdefault(f"stream 0x{r.stream:x}", [])
        for q0, q1, behind in prof.queued(r):
            what = prof.records[behind].name if behind is not None else "other streams"
            lane.append((q0, q1, f"queued behind {what}", "queued"))
        if not pa.is_wait(r):
            lane.append((w[0], w[1], r.name, "gpu"))
            e = pa.engine_of(r)
            if e is not None and r.index not in prof._owner:
                engines.setdefault(e, []).append((w[0], w[1], r.name, "gpu"))
    lanes = [("host thread", host)]
    lanes += sorted(streams.items())
    lanes += sorted(engines.items())
    return lanes


def _lane_of(prof, r) -> str:
    """The lane where a root cause is drawn: its engine, else its stream."""
    e = pa.engine_of(r)
    if e is not None:
        return e
    return f"stream 0x{r.stream:x}" if pa.gpu_window(r) is not None else "host thread"


def chrome_trace(prof) -> dict:
    events: list[dict] = [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "host"}},
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "GPU streams"}},
        {"name": "process_name", "ph": "M", "pid": 2, "args": {"name": "GPU engines"}}]
    gpu_slice = {}
    for r in prof.records:
        args = {"call": r.index, "shape": list(r.shape), "waited_ms": r.waited_ms}
        if r.waited_on:
            args["waited_on"] = [f"#{i}" for i in r.waited_on]
        tid = "host thread" if prof._main_thread(r) else f"decoder session {r.session}"
        events.append({"name": r.name, "cat": "host", "ph": "X", "pid": 0, "tid": tid,
                       "ts": r.host_start * 1e6, "dur": r.host_ms * 1e3, "args": args})
        w = pa.gpu_window(r)
        if w is None:
            continue
        lane = f"stream 0x{r.stream:x}"
        for q0, q1, behind in prof.queued(r):
            what = prof.records[behind].name if behind is not None else "other streams"
            events.append({"name": f"queued behind {what}", "cat": "queued", "ph": "X",
                           "pid": 1, "tid": lane, "ts": q0 * 1e6, "dur": (q1 - q0) * 1e6,
                           "args": {"call": r.index, "behind": behind}})
        if pa.is_wait(r):
            continue
        moved = (r.bytes_read or 0) + (r.bytes_written or 0)
        gargs = {"call": r.index, "device": r.device, "bytes": moved}
        events.append({"name": f"{r.activity} ({r.name})", "cat": "gpu", "ph": "X", "pid": 1,
                       "tid": lane, "ts": w[0] * 1e6, "dur": (w[1] - w[0]) * 1e6, "args": gargs})
        e = pa.engine_of(r)
        if e is not None:
            events.append({"name": r.name, "cat": "engine", "ph": "X", "pid": 2, "tid": e,
                           "ts": w[0] * 1e6, "dur": (w[1] - w[0]) * 1e6, "args": gargs})
        gpu_slice[r.index] = (lane, w)
    for r in prof.records:
        if pa.is_decode(r) and not prof._main_thread(r):
            events.append({"name": "decode", "cat": "engine", "ph": "X", "pid": 2,
                           "tid": f"NVDEC session {r.session}", "ts": r.host_start * 1e6,
                           "dur": r.host_ms * 1e3, "args": {"call": r.index}})
    # flow arrows: from each host wait to the root cause it was charged to
    flow = 0
    for r in prof.records:
        if r.waited_ms <= 0:
            continue
        cause = prof.wait_root(r)
        if cause is None:
            continue
        end = pa.host_window(r)[1]
        w = pa.gpu_window(cause) or pa.host_window(cause)
        if cause.index in gpu_slice:
            target_pid, target_tid = 1, gpu_slice[cause.index][0]
        elif pa.is_decode(cause) and not prof._main_thread(cause):
            target_pid, target_tid = 2, f"NVDEC session {cause.session}"
        else:
            target_pid, target_tid = 0, "host thread"
        flow += 1
        name = f"waits on {pa.cause_name(cause)}"
        events.append({"name": name, "cat": "wait", "ph": "s", "id": flow, "pid": 0,
                       "tid": "host thread" if prof._main_thread(r) else
                       f"decoder session {r.session}", "ts": (end - 1e-7) * 1e6})
        events.append({"name": name, "cat": "wait", "ph": "f", "bp": "e", "id": flow,
                       "pid": target_pid, "tid": target_tid, "ts": (w[1] - 1e-7) * 1e6})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def timeline_png(prof) -> bytes | None:
    """The timeline as a PNG (None without matplotlib)."""
    try:
        matplotlib = importlib.import_module("matplotlib")
        matplotlib.use("Agg", force=False)
        plt = importlib.import_module("matplotlib.pyplot")
    except Exception:
        return None
    lanes = _lanes(prof)
    t0 = prof.interval[0]
    colours = {"host": "#4c72b0", "wait": "#f2b8b8", "gpu": "#55a868", "queued": "#dddddd",
               "decode": "#c44e52"}
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(lanes) + 1.2))
    for y, (_, items) in enumerate(lanes):
        for a, b, _label, kind in items:
            ax.broken_barh([((a - t0) * 1e3, max((b - a) * 1e3, 1e-3))], (y - 0.4, 0.8),
                           facecolors=colours.get(kind, "#8172b2"))
    # waits drawn to their root cause
    rows = {name: y for y, (name, _) in enumerate(lanes)}
    for r in prof.records:
        if r.waited_ms <= 0 or not prof._main_thread(r):
            continue
        root = prof.wait_root(r)
        if root is None or _lane_of(prof, root) not in rows:
            continue
        end = (pa.gpu_window(root) or pa.host_window(root))[1]
        ax.annotate("", xy=((end - t0) * 1e3, rows[_lane_of(prof, root)]),
                    xytext=((pa.host_window(r)[1] - t0) * 1e3, 0),
                    arrowprops={"arrowstyle": "->", "color": "#c44e52", "lw": 0.6})
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([name for name, _ in lanes])
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return buf.getvalue()


def html(prof, report: str) -> str:
    """The report as an HTML table, with the timeline picture when matplotlib
    is installed."""
    rows = []
    for line in report.splitlines():
        cls = ' style="font-weight:bold"' if line.startswith("verdict") or line.endswith(":") else ""
        rows.append(f"<tr><td{cls}><pre>{_html.escape(line)}</pre></td></tr>")
    out = "<table>" + "".join(rows) + "</table>"
    try:
        png = timeline_png(prof)
    except Exception as e:          # a picture must never cost the table
        png = None
        out += f"<p>(no timeline picture: {_html.escape(str(e))})</p>"
    if png is not None:
        out += ('<img alt="fastmog timeline" src="data:image/png;base64,'
                + base64.b64encode(png).decode("ascii") + '"/>')
    elif "no timeline picture" not in out:
        out += "<p>(install matplotlib for the timeline picture)</p>"
    return out
