"""The profile's analysis on synthetic records (no GPU needed): waits charged
to their root cause along the chain, queued time kept out of a call's GPU
window, engine busy fractions and the verdict of the four kinds of run, the
bytes accounting, and the notebook/trace views."""
import numpy as np
import pytest

import fastmog
from fastmog.profiling import _analysis as pa
from fastmog.profiling import _view as pv
from fastmog.profiling import CallRecord

MS = 1e-3
CEIL = pa.Ceilings(h2d=25.0, d2h=25.0, device=3000.0, source="injected")


class Builder:
    """Records in host order, times in ms from 0."""

    def __init__(self):
        self.records = []

    def add(self, name, activity=None, stream=0, host=(0.0, 0.0), gpu=None, *, queued=None,
            waited=0.0, wait_start=None, waited_on=(), behind=None, session=None, parent=None,
            nbytes=(0, 0), shape=(), gil=0.0):
        i = len(self.records)
        self.records.append(CallRecord(
            index=i, name=name, activity=activity, stream=stream, device=0 if gpu else -1,
            shape=shape, parent=parent, host_start=host[0] * MS, host_ms=host[1],
            waited_ms=waited, gpu_ms=None if gpu is None else gpu[1],
            gpu_start=None if gpu is None else gpu[0] * MS, waited_on=tuple(waited_on),
            waited_on_count=len(waited_on),
            queued_start=None if queued is None else queued * MS, behind=behind,
            session=session, wait_start=None if wait_start is None else wait_start * MS,
            bytes_read=nbytes[0], bytes_written=nbytes[1], gil_ms=gil))
        return i


def test_a_download_waiting_on_an_apply_waiting_on_a_decode_is_charged_to_the_decode():
    b = Builder()
    # session 0 decodes from 0 to 9 ms on the host, its output copy runs 9-10 ms on stream 7
    dec = b.add("VideoReader.decode", "NVDEC output copy", stream=7, host=(0, 10), gpu=(9, 1),
                session=0)
    # the consumer's stream 1 waits for it from 1 ms (Stream.wait's window)
    wait = b.add("Stream.wait", "wait", stream=1, host=(1, 0.01), gpu=(1, 9), behind=dec)
    apply = b.add("BackgroundSubtractorMOG2.apply", "kernel mog2_apply", stream=1,
                  host=(1.1, 0.02), gpu=(10, 0.2), queued=10)
    down = b.add("GpuMat.download", "memcpy DtoH", stream=1, host=(1.2, 9.1), gpu=(10.2, 0.1),
                 waited=9.0, wait_start=1.3, waited_on=(apply, wait))
    prof = pa.Profile(b.records)
    # the apply's own window stays its own: the wait is queued time, named
    [(q0, q1, behind)] = prof.queued(b.records[apply])
    assert (q0, q1, behind) == (pytest.approx(1 * MS), pytest.approx(10 * MS), dec)
    causes = prof.wait_causes(b.records[down])
    roots = {}
    for (root, via), ms in causes.items():
        roots[root] = roots.get(root, 0) + ms
    assert roots["VideoReader.decode (NVDEC)"] == pytest.approx(8.7, abs=1e-6)
    assert roots["BackgroundSubtractorMOG2.apply"] == pytest.approx(0.2, abs=1e-6)
    assert roots["GpuMat.download"] == pytest.approx(0.1, abs=1e-6)
    assert sum(roots.values()) == pytest.approx(9.0)
    # and the chain names the call in between
    chain = max(causes, key=causes.get)
    assert chain == ("VideoReader.decode (NVDEC)", ("BackgroundSubtractorMOG2.apply",))


def test_a_waits_tail_after_the_gpu_work_is_charged_to_the_gil():
    """The NVDEC run on the H200: a download's GPU work was done 0.35 ms into
    a 28.9 ms wait; the rest went to taking the GIL back from the session
    threads. It was charged, by GPU time, to the apply and the download."""
    b = Builder()
    apply = b.add("BackgroundSubtractorMOG2.apply", "kernel mog2_apply", stream=1,
                  host=(0, 0.02), gpu=(0.05, 0.2))
    down = b.add("GpuMat.download", "memcpy DtoH", stream=1, host=(0.03, 29.0),
                 gpu=(0.25, 0.15), waited=28.9, wait_start=0.1, waited_on=(apply,), gil=28.5)
    prof = pa.Profile(b.records)
    roots = {}
    for (root, _), ms in prof.wait_causes(b.records[down]).items():
        roots[root] = roots.get(root, 0) + ms
    assert roots[pa.GIL] == pytest.approx(28.5)
    assert sum(v for k, v in roots.items() if k != pa.GIL) == pytest.approx(0.4)
    assert "taking the GIL back" in prof.verdict()


def test_a_calls_own_queued_window_less_its_nested_upload_is_charged_to_the_producer():
    b = Builder()
    producer = b.add("GpuMat.copy_to", "memcpy DtoD", stream=5, host=(0, 0.1), gpu=(0, 4))
    apply = b.add("BackgroundSubtractorMOG2.apply", "kernel mog2_apply", stream=1,
                  host=(0.5, 0.2), gpu=(4, 1), queued=0.5)
    b.add("GpuMat.upload", "memcpy HtoD", stream=1, host=(0.55, 0.05), gpu=(0.6, 1.0),
          parent=apply)
    prof = pa.Profile(b.records)
    windows = prof.queued(b.records[apply])
    assert [(round(a / MS, 6), round(c / MS, 6)) for a, c, _ in windows] == [(0.5, 0.6), (1.6, 4.0)]
    assert all(w[2] == producer for w in windows if w[1] > 1.0 * MS)
    assert prof.queued_ms(b.records[apply]) == pytest.approx(2.5)


def test_an_event_synchronize_on_a_stream_with_no_timed_cause_is_untimed_work():
    b = Builder()
    s = b.add("Event.synchronize", None, host=(0, 2), waited=2.0, wait_start=0)
    assert pa.Profile(b.records).wait_causes(b.records[s]) == {("untimed work", ()): 2.0}


# ---- the four runs ---------------------------------------------------------------

def nvdec_run(frames=120, sessions=7, frame_ms=9.5, kernel_ms=0.254, size=(2160, 3840)):
    """`sessions` decoders each busy ~97 % of the run; MOG2 waits for them."""
    b = Builder()
    h, w = size
    period = frame_ms / sessions           # one frame out every period
    decs = []
    for k in range(frames):
        s = k % sessions
        start = (k // sessions) * frame_ms + s * period     # sessions staggered
        decs.append(b.add("VideoReader.decode", "NVDEC output copy", stream=100 + s,
                          host=(start, frame_ms * 0.97), gpu=(start + frame_ms * 0.96, 0.02),
                          session=s, shape=(h * 3 // 2, w, 1), nbytes=(h * w * 3 // 2,) * 2))
    t = 0.0
    for k in range(frames):
        ready = b.records[decs[k]].gpu_end / MS
        wait = b.add("Stream.wait", "wait", stream=1, host=(t, 0.005),
                     gpu=(t, max(ready - t, 0.001)), behind=decs[k])
        start = max(t, ready)
        ap = b.add("BackgroundSubtractorMOG2.apply", "kernel mog2_apply", stream=1,
                   host=(t + 0.01, 0.02), gpu=(start, kernel_ms), queued=start,
                   nbytes=(h * w * 40, h * w * 38), shape=(h, w, 1))
        down = b.add("GpuMat.download", "memcpy DtoH", stream=1, host=(t + 0.03, 0),
                     gpu=(start + kernel_ms, 0.02), nbytes=(h * w, h * w), shape=(h, w, 1))
        end = start + kernel_ms + 0.02
        b.records[down] = b.records[down].__class__(**{
            **b.records[down].__dict__, "host_ms": end - (t + 0.03),
            "waited_ms": end - (t + 0.04), "wait_start": (t + 0.04) * MS,
            "waited_on": (wait, ap, down)})
        t = end + 0.01
    return b.records


def pipeline_run(batches=40, batch=8, size=(2160, 3840), channels=3, pcie_gbps=24.0):
    """Pinned frames through fastmog.pipeline: uploads back to back on one
    stream (PCIe-bound), kernels and downloads overlapping them."""
    b = Builder()
    h, w = size
    frame_bytes = h * w * channels
    up_ms = frame_bytes / (pcie_gbps * 1e9) * 1e3
    t_gpu = 0.0
    host = 0.0
    last_down = None
    for k in range(batches):
        for _ in range(batch):
            b.add("GpuMat.upload", "memcpy HtoD", stream=1, host=(host, 0.02),
                  gpu=(t_gpu, up_ms), nbytes=(frame_bytes, frame_bytes), shape=(h, w, channels))
            host += 0.03
            t_gpu += up_ms
        kstart = t_gpu
        ap = b.add("BackgroundSubtractorMOG2.apply_batch", "kernel mog2_apply", stream=2,
                   host=(host, 0.05), gpu=(kstart, 0.18 * batch), queued=kstart - 0.001,
                   nbytes=(batch * frame_bytes + 2 * h * w * 100, batch * h * w + h * w * 100))
        d_ms = batch * h * w / (pcie_gbps * 1e9) * 1e3
        down = b.add("GpuMat.download", "memcpy DtoH", stream=3, host=(host + 0.05, 0.02),
                     gpu=(kstart + 0.18 * batch, d_ms), nbytes=(batch * h * w,) * 2)
        if last_down is not None:
            # the host waits for the batch before last: Event.synchronize
            target = b.records[last_down]
            end = max(host + 0.1, target.gpu_end / MS)
            b.add("Event.synchronize", None, host=(host + 0.08, end - host - 0.08),
                  waited=end - host - 0.1, wait_start=host + 0.1, waited_on=(last_down,))
            host = end
        last_down = down
        del ap
    return b.records


def batch_run(calls=50, batch=16, kernel_ms=3.0, size=(2160, 3840)):
    """Device-resident frames through apply_batch, back to back."""
    b = Builder()
    h, w = size
    t = 0.0
    for k in range(calls):
        ap = b.add("BackgroundSubtractorMOG2.apply_batch", "kernel mog2_apply", stream=1,
                   host=(k * 0.05, 0.04), gpu=(t, kernel_ms), queued=t,
                   nbytes=(batch * h * w + h * w * 90, batch * h * w + h * w * 90))
        t += kernel_ms
        del ap
    b.add("Stream.synchronize", None, stream=1, host=(calls * 0.05, t - calls * 0.05),
          waited=t - calls * 0.05, wait_start=calls * 0.05, waited_on=tuple(range(calls - 8, calls)))
    return b.records


def sleepy_run(frames=40, sleep_ms=30.0, size=(480, 640)):
    """A Python loop that sleeps between frames: the GPU waits for the host."""
    b = Builder()
    h, w = size
    t = 0.0
    for k in range(frames):
        up = b.add("GpuMat.upload", "memcpy HtoD", stream=1, host=(t, 0.03), gpu=(t + 0.01, 0.03),
                   nbytes=(h * w * 3,) * 2)
        ap = b.add("BackgroundSubtractorMOG2.apply", "kernel mog2_apply", stream=1,
                   host=(t + 0.04, 0.02), gpu=(t + 0.05, 0.05), queued=t + 0.05)
        b.add("GpuMat.download", "memcpy DtoH", stream=1, host=(t + 0.07, 0.1),
              gpu=(t + 0.11, 0.02), waited=0.05, wait_start=t + 0.08, waited_on=(up, ap),
              nbytes=(h * w,) * 2)
        t += sleep_ms
    return b.records


def test_verdict_nvdec_pipeline_is_decode():
    prof = pa.Profile(nvdec_run(), CEIL)
    verdict = prof.verdict()
    assert verdict.startswith("verdict: bound by NVDEC decode: busy 9"), verdict
    assert "MOG2 kernels busy" in verdict and "more frames" in verdict
    groups = prof.groups()
    assert groups[pa.DECODE] > 0.9 and 0.1 < groups[pa.SM] < 0.3
    # the downloads' waits go to the decode, not to the kernel they queued behind
    causes = prof.host_causes()["GpuMat.download"][0]
    assert max(causes, key=causes.get) == "VideoReader.decode (NVDEC)"


@pytest.mark.parametrize("sessions,size,kernel_ms", [(1, (1080, 1920), 0.06),
                                                      (3, (2160, 3840), 0.25),
                                                      (7, (720, 1280), 0.03)])
def test_verdict_nvdec_stays_decode_across_sizes_and_sessions(sessions, size, kernel_ms):
    prof = pa.Profile(nvdec_run(frames=60, sessions=sessions, size=size, kernel_ms=kernel_ms))
    assert prof.verdict().startswith("verdict: bound by NVDEC decode"), prof.verdict()


@pytest.mark.parametrize("batch,channels", [(1, 1), (8, 3), (4, 4)])
def test_verdict_pinned_pipeline_is_pcie(batch, channels):
    prof = pa.Profile(pipeline_run(batches=30, batch=batch, channels=channels), CEIL)
    verdict = prof.verdict()
    assert verdict.startswith("verdict: bound by host->device copies (PCIe): busy"), verdict
    assert "GB/s = 96 % of 25.0 GB/s measured" in verdict
    rows = {row["activity"]: row for row in prof.bandwidth()}
    assert rows["memcpy HtoD"]["gbps"] == pytest.approx(24.0, rel=1e-6)


@pytest.mark.parametrize("batch,size", [(16, (2160, 3840)), (4, (480, 640))])
def test_verdict_device_resident_apply_batch_is_the_kernel(batch, size):
    prof = pa.Profile(batch_run(batch=batch, size=size), CEIL)
    verdict = prof.verdict()
    assert verdict.startswith("verdict: bound by MOG2 kernels: busy 100 %"), verdict
    assert "the host (Python or the frame producer) busy" in verdict


@pytest.mark.parametrize("sleep_ms", [5.0, 30.0])
def test_verdict_sleepy_python_loop_is_the_host(sleep_ms):
    prof = pa.Profile(sleepy_run(sleep_ms=sleep_ms), CEIL)
    verdict = prof.verdict()
    assert verdict.startswith("verdict: bound by the host (Python or the frame producer)"), verdict
    assert "MOG2 kernels" in verdict


def test_busy_fractions_per_engine_and_session():
    busy = pa.Profile(nvdec_run(sessions=3, frames=30)).busy()
    assert {"NVDEC session 0", "NVDEC session 1", "NVDEC session 2", pa.SM, pa.D2H,
            pa.HOST} <= set(busy)
    assert all(0.0 <= v <= 1.0 for v in busy.values())


# ---- bytes ----------------------------------------------------------------------

def independent_model_bytes(h, w, c, nmix=5):
    tiles = -(-(h * w) // 32)                         # tiles of 32 pixels, the last padded
    modes = tiles * nmix * (2 + c) * 32 * 4           # a weight, a variance, C means per slot
    return -(-modes // 256) * 256 + h * w             # padded to 256 bytes; modes used


@pytest.mark.parametrize("c", [1, 3, 4])
@pytest.mark.parametrize("frames", [1, 5, 16, 17, 40])
def test_mog2_bytes_equal_an_independent_count(c, frames):
    h, w = 47, 70                                     # 3290 pixels: the last tile part full
    passes = -(-frames // 16)
    model = independent_model_bytes(h, w, c)
    read, written = fastmog._fastmog._mog2_bytes(h, w, c, False, 5, frames)
    assert read == frames * h * w * c + passes * model
    assert written == frames * h * w + passes * model
    read_k, _ = fastmog._fastmog._mog2_bytes(h, w, c, False, 5, frames, known=frames)
    assert read_k == read + frames * h * w
    read_f, _ = fastmog._fastmog._mog2_bytes(h, w, c, True, 5, frames)
    assert read_f == frames * h * w * c * 4 + passes * model


def test_apply_cameras_bytes_are_each_cameras_frame_mask_and_model():
    shapes = [(48, 64, 1), (30, 40, 3), (16, 16, 4)]
    total = [0, 0]
    for h, w, c in shapes:
        r, wr = fastmog._fastmog._mog2_bytes(h, w, c, False, 5, 1, per_pass=1)
        total[0] += r
        total[1] += wr
    expect_read = sum(h * w * c + independent_model_bytes(h, w, c) for h, w, c in shapes)
    expect_written = sum(h * w + independent_model_bytes(h, w, c) for h, w, c in shapes)
    assert total == [expect_read, expect_written]


@pytest.mark.parametrize("c", [1, 3, 4])
def test_host_subtractor_records_carry_the_byte_count(rng, c):
    h, w, k = 36, 52, 5
    shape = (h, w) if c == 1 else (h, w, c)
    frames = [rng.integers(0, 255, shape, dtype="uint8") for _ in range(k)]
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    with fastmog.profile(nvml=False) as t:
        sub.apply(frames[0])
        sub.apply_batch(frames)
    one, batch = t.records
    model = independent_model_bytes(h, w, c)
    assert (one.bytes_read, one.bytes_written) == (h * w * c + model, h * w + model)
    assert (batch.bytes_read, batch.bytes_written) == (k * h * w * c + model, k * h * w + model)


# ---- views ----------------------------------------------------------------------

def test_chrome_trace_has_engine_lanes_queued_windows_and_flow_arrows():
    prof = pa.Profile(nvdec_run(frames=14, sessions=7))
    trace = pv.chrome_trace(prof)
    events = trace["traceEvents"]
    tids = {e.get("tid") for e in events}
    assert "NVDEC session 3" in tids and pa.SM in tids and "host thread" in tids
    assert any(e["name"].startswith("queued behind VideoReader.decode") for e in events)
    starts = {e["id"] for e in events if e.get("ph") == "s"}
    finishes = {e["id"] for e in events if e.get("ph") == "f"}
    assert starts and starts == finishes
    assert all(e["name"] == "waits on VideoReader.decode (NVDEC)"
               for e in events if e.get("ph") == "s")


def test_html_is_a_table_and_a_picture_or_the_table_alone():
    prof = pa.Profile(sleepy_run(frames=5))
    out = pv.html(prof, "GPU activities:\nverdict: bound by x")
    assert out.startswith("<table>") and "verdict: bound by x" in out
    try:
        import matplotlib  # noqa: F401
        assert "data:image/png;base64," in out
    except ImportError:
        assert "install matplotlib" in out


def test_event_latency_is_taken_off_per_transition():
    from fastmog.profiling import _probes as _profile_probes

    b = Builder()
    b.add("GpuMat.upload", "memcpy HtoD", stream=1, host=(0, 0.01), gpu=(0.0, 0.5))
    b.add("BackgroundSubtractorMOG2.apply", "kernel mog2_apply", stream=1, host=(0.01, 0.01),
          gpu=(0.501, 0.2))
    b.add("GpuMat.download", "memcpy DtoH", stream=1, host=(0.02, 0.5), gpu=(0.701, 0.15))
    b.add("BackgroundSubtractorMOG2.apply", "kernel mog2_apply", stream=1, host=(2.0, 0.01),
          gpu=(2.0, 0.2))
    bias = {("idle", "HtoD"): 0.008, ("HtoD", "kernel"): 0.007, ("kernel", "DtoH"): 0.006,
            ("idle", "kernel"): 0.005}
    records = [dataclasses_replace(r, device=0) for r in b.records]
    out = _profile_probes.corrected(records, bias_of=lambda device: bias)
    assert [round(r.gpu_ms, 6) for r in out] == [0.492, 0.193, 0.144, 0.195]
    assert [r.gpu_ms_raw for r in out] == [0.5, 0.2, 0.15, 0.2]


def test_the_time_the_gpu_waited_for_the_host_to_launch_is_not_the_calls():
    from fastmog.profiling import _probes as _profile_probes

    b = Builder()
    # an idle stream: the start event ran at 1.0 ms, the host submitted the
    # kernel at 1.04 ms (its launch waited for a lock), the kernel took 0.2
    b.add("BackgroundSubtractorMOG2.apply", "kernel mog2_apply", stream=1, host=(0.99, 0.06),
          gpu=(1.0, 0.245))
    # a busy stream: the host submitted long before the GPU got there
    b.add("BackgroundSubtractorMOG2.apply", "kernel mog2_apply", stream=2, host=(0.5, 0.01),
          gpu=(3.0, 0.205))
    records = [dataclasses_replace(r, device=0, submitted=s * MS)
               for r, s in zip(b.records, (1.04, 0.51))]
    out = _profile_probes.corrected(records, bias_of=lambda device: {("idle", "kernel"): 0.005})
    assert [round(r.gpu_ms, 6) for r in out] == [0.2, 0.2]
    # without the submission time nothing is known of the host's part
    out = _profile_probes.corrected([dataclasses_replace(r, submitted=None) for r in records],
                                    bias_of=lambda device: {("idle", "kernel"): 0.005})
    assert [round(r.gpu_ms, 6) for r in out] == [0.24, 0.2]


def test_the_host_lag_never_exceeds_the_hosts_own_time_to_submit():
    from fastmog.profiling import _probes as _profile_probes

    b = Builder()
    # the anchors' mapping drifts by tens of us: put a 27.5 us kernel's
    # start event 25 us before its call began, and the host would seem to
    # have held the GPU for 30 us, the kernel cut to nothing. The event is
    # recorded inside the call: the GPU waited at most from the call's start
    # (1.0 ms) to the submission (1.005 ms)
    b.add("BackgroundSubtractorMOG2.apply", "kernel mog2_apply", stream=1, host=(1.0, 0.01),
          gpu=(0.975, 0.0275))
    records = [dataclasses_replace(r, device=0, submitted=1.005 * MS) for r in b.records]
    out = _profile_probes.corrected(records, bias_of=lambda device: {("idle", "kernel"): 0.005})
    assert round(out[0].gpu_ms, 6) == 0.0175
    assert round(out[0].gpu_start, 9) == round(0.98 * MS, 9)


def test_a_gated_window_is_not_cut_for_the_host_and_takes_the_gates_latency():
    from fastmog.profiling import _probes as _profile_probes

    b = Builder()
    # a decoder's output copy behind a gate, on an idle stream: the host's
    # clock says it submitted the copy after the window opened (the anchors
    # are good to a few us), but behind a gate the GPU cannot have waited
    b.add("VideoReader.decode", "NVDEC output copy", stream=1, host=(0.99, 0.03),
          gpu=(1.0, 0.012))
    records = [dataclasses_replace(r, device=0, submitted=1.004 * MS, gated=True)
               for r in b.records]
    bias = {("gate", "DtoD"): 0.002, ("idle", "DtoD"): 0.008}
    out = _profile_probes.corrected(records, bias_of=lambda device: bias)
    assert round(out[0].gpu_ms, 6) == 0.010
    assert out[0].gpu_start == records[0].gpu_start
    # the same window ungated: the host's 4 us come off, then the idle
    # stream's 8 us, down to the floor of half what is left
    out = _profile_probes.corrected([dataclasses_replace(records[0], gated=False)],
                                    bias_of=lambda device: bias)
    assert round(out[0].gpu_ms, 6) == 0.004


def dataclasses_replace(r, **kw):
    import dataclasses
    return dataclasses.replace(r, **kw)


def test_gpu_span_arguments_are_checked_without_a_gpu():
    t = fastmog.Timer()
    with pytest.raises(TypeError, match="stream"):
        t._gpu_begin("VideoReader.decode", "NVDEC output copy", None, (1, 1, 1))
    with pytest.raises(TypeError, match="stream"):
        t._gpu_end(0)
    with pytest.raises(TypeError, match="stream"):
        t.gpu_copies("VideoReader.decode", "NVDEC output copy", None, [])
    t._decoder_call("VideoReader.decode", 5, 7, (2, 3, 1), "NVDEC", 2)
    [r] = t.records
    assert (r.activity, r.session, r.host_ms, r.parent) == ("NVDEC", 2, 7e-6, None)
    # a session thread's record is never nested in the calling thread's open call
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    with fastmog.profile(timer=t, nvml=False):
        sub.apply(np.zeros((4, 4), np.uint8))
        t._decoder_call("VideoReader.decode", 9, 1, (2, 3, 1), "NVDEC", -1)
    assert t.records[-1].parent is None


def test_calls_inside_a_decoders_span_are_the_decoders_work():
    b = Builder()
    dec = b.add("VideoReader.decode", "NVDEC output copy", stream=7, host=(0, 5), gpu=(1, 4),
                session=0)
    copy = b.add("GpuMat.copy_to", "memcpy DtoD", stream=7, host=(0.1, 0.01), gpu=(1, 3.9))
    wait = b.add("Stream.wait", "wait", stream=1, host=(0.2, 0.01), gpu=(0.3, 4.7), behind=copy)
    apply = b.add("BackgroundSubtractorMOG2.apply", "kernel mog2_apply", stream=1,
                  host=(0.3, 0.02), gpu=(5, 0.2))
    down = b.add("GpuMat.download", "memcpy DtoH", stream=1, host=(0.4, 4.9), gpu=(5.2, 0.1),
                 waited=4.8, wait_start=0.5, waited_on=(wait, apply))
    prof = pa.Profile(b.records)
    assert prof.owner(b.records[copy]).index == dec
    roots, _ = prof.host_causes()["GpuMat.download"]
    assert max(roots, key=roots.get) == "VideoReader.decode (NVDEC)"
    assert "GpuMat.copy_to" not in roots and pa.SM not in prof.busy() or \
        prof.busy()[pa.SM] < 0.1


def test_latency_samples_are_reported_as_their_distribution():
    t = fastmog.Timer()
    for ms in range(1, 201):                    # 1 .. 200 ms
        t.latency("frame to mask", ms / 1e3)
    text = t.report()
    assert "Latency:\n  frame to mask: median 101.000ms, p99 199.000ms, max 200.000ms " \
           "over 200 samples" in text, text
    assert len(t.latencies["frame to mask"]) == 200
    t.reset()
    assert t.latencies == {} and "Latency:" not in t.report()


def test_bandwidth_over_the_ceiling_is_explained_by_what_the_call_is():
    from fastmog.profiling._timer import _engine_lines
    b = Builder()
    # a 4K mask downloaded at 27 GB/s against a 25 GB/s ceiling, and a kernel
    # moving 200 MB in 50 us (4000 GB/s against 3000)
    b.add("GpuMat.download", "memcpy DtoH", stream=1, host=(0, 0.4), gpu=(0, 0.3072),
          nbytes=(8_294_400, 8_294_400))
    b.add("BackgroundSubtractorMOG2.apply", "kernel mog2_apply", stream=1, host=(0.5, 0.01),
          gpu=(0.5, 0.05), nbytes=(100_000_000, 100_000_000))
    lines = {line.split("[")[1].split("]")[0]: line for line in _engine_lines(pa.Profile(
        b.records, CEIL)) if "GB/s" in line and "[" in line}
    assert "at the measured ceiling" in lines["memcpy DtoH"]
    assert "L2" not in lines["memcpy DtoH"]
    assert "served from L2" in lines["kernel mog2_apply"]
