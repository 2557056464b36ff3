"""The timer on the GPU: a call's GPU window is its own work, the time its
stream waited on other streams is recorded apart with what it was behind,
host waits are charged to their root cause, records carry their bytes, and
Python code (a decoder) adds GPU-timed records."""
import sys
import threading
import time

import numpy as np
import pytest

import fastmog
from fastmog.profiling import _analysis as pa

pytestmark = pytest.mark.gpu

H, W = 1080, 1920


def test_a_wait_behind_another_stream_is_queued_time_not_the_kernels(rng):
    producer, consumer = fastmog.Stream(), fastmog.Stream()
    # 20 copies of 100 MB: far longer than the host takes to queue them
    big = fastmog.GpuMat.from_array(rng.integers(0, 255, (16 * H, W, 3), dtype=np.uint8),
                                    stream=producer)
    copy = fastmog.GpuMat(big.shape, np.uint8)
    frame = fastmog.GpuMat.from_array(rng.integers(0, 255, (H, W), dtype=np.uint8),
                                      stream=consumer)
    sub = fastmog.BackgroundSubtractorMOG2()
    sub.apply(frame, stream=consumer)
    consumer.synchronize()
    ready = fastmog.Event(timing=False)
    with fastmog.profile(nvml=False) as t:
        for _ in range(20):                       # a long producer
            big.copy_to(copy, stream=producer)
        producer.record(ready)
        consumer.wait(ready)
        sub.apply(frame, stream=consumer)
        consumer.synchronize()
    records = t.records
    wait = next(r for r in records if r.name == "Stream.wait")
    apply = next(r for r in records if r.name == "BackgroundSubtractorMOG2.apply")
    copies = [r for r in records if r.name == "GpuMat.copy_to"]
    assert wait.activity == "wait" and wait.behind == copies[-1].index
    prof = pa.Profile(records)
    queued = prof.queued_ms(apply)
    assert queued > 0.5 * sum(c.gpu_ms for c in copies[1:])
    # the kernel's own window is no longer than the same kernel unqueued
    with fastmog.profile(nvml=False) as alone:
        for _ in range(5):
            sub.apply(frame, stream=consumer)
        consumer.synchronize()
    plain = min(r.gpu_ms for r in alone.records if r.name == apply.name)
    assert apply.gpu_ms < 1.5 * plain + 0.02
    assert "GpuMat.copy_to" in prof.host_causes()["Stream.synchronize"][0]


def test_a_download_behind_an_apply_behind_a_decode_is_charged_to_the_decode(rng):
    decoder, s = fastmog.Stream(), fastmog.Stream()
    nv12 = fastmog.GpuMat.from_array(rng.integers(0, 255, (4 * H, W, 3), dtype=np.uint8),
                                     stream=decoder)
    slot = fastmog.GpuMat(nv12.shape, np.uint8)
    frame = fastmog.GpuMat.from_array(rng.integers(0, 255, (H, W), dtype=np.uint8), stream=s)
    out = fastmog.pinned_empty((H, W), np.uint8)
    sub = fastmog.BackgroundSubtractorMOG2()
    sub.apply(frame, stream=s)
    s.synchronize()
    ready = fastmog.Event(timing=False)
    with fastmog.profile(nvml=False) as t:
        with t.gpu_span("VideoReader.decode", "NVDEC output copy", decoder, (4 * H, W, 3),
                        session=0, bytes_read=nv12.nbytes):
            for _ in range(20):
                nv12.copy_to(slot, stream=decoder)
        ready.record(stream=decoder)
        s.wait(ready)
        sub.apply(frame, stream=s).download(out, stream=s)
    records = t.records
    decode = next(r for r in records if r.name == "VideoReader.decode")
    assert decode.session == 0 and decode.activity == "NVDEC output copy"
    assert decode.gpu_ms is not None and decode.gpu_ms > 0
    roots, _ = pa.Profile(records).host_causes()["GpuMat.download"]
    assert max(roots, key=roots.get) == "VideoReader.decode (NVDEC)"
    assert "waiting on VideoReader.decode (NVDEC)" in t.report()


@pytest.mark.parametrize("c", [1, 3, 4])
def test_gpu_records_carry_their_bytes(rng, c):
    s = fastmog.Stream()
    shape = (H // 4, W // 4) if c == 1 else (H // 4, W // 4, c)
    host = rng.integers(0, 255, shape, dtype=np.uint8)
    h, w = shape[:2]
    sub = fastmog.BackgroundSubtractorMOG2()
    with fastmog.profile(nvml=False) as t:
        m = fastmog.GpuMat.from_array(host, stream=s)
        sub.apply(m, stream=s).download(stream=s)
        sub.apply_batch([m] * 5, stream=s)
        fastmog.apply_cameras([sub, fastmog.BackgroundSubtractorMOG2()], [m, m], stream=s)
        s.synchronize()
    by = {r.name: r for r in t.records}
    frame = h * w * c
    assert (by["GpuMat.upload"].bytes_read, by["GpuMat.upload"].bytes_written) == (frame, frame)
    assert by["GpuMat.download"].bytes_read == h * w
    one = fastmog._fastmog._mog2_bytes(h, w, c, False, 5, 1)
    five = fastmog._fastmog._mog2_bytes(h, w, c, False, 5, 5)
    cam = fastmog._fastmog._mog2_bytes(h, w, c, False, 5, 1, per_pass=1)
    rec = by["BackgroundSubtractorMOG2.apply"]
    assert (rec.bytes_read, rec.bytes_written) == one
    rec = by["BackgroundSubtractorMOG2.apply_batch"]
    assert (rec.bytes_read, rec.bytes_written) == five
    rec = by["apply_cameras"]
    assert (rec.bytes_read, rec.bytes_written) == (2 * cam[0], 2 * cam[1])


def test_a_long_profile_reuses_its_events(rng):
    s = fastmog.Stream()
    frame = fastmog.GpuMat.from_array(rng.integers(0, 255, (64, 64), dtype=np.uint8), stream=s)
    sub = fastmog.BackgroundSubtractorMOG2()
    with fastmog.profile(nvml=False) as t:
        for i in range(3000):
            sub.apply(frame, stream=s)
            if i % 100 == 0:
                s.synchronize()
        s.synchronize()
    records = t.records
    assert len(records) == 3000 + 31
    applies = [r for r in records if r.name.endswith(".apply")]
    assert all(r.gpu_ms is not None and 0 <= r.gpu_ms < 50 for r in applies)
    starts = [r.gpu_start for r in applies]
    assert starts == sorted(starts)


def test_report_has_engines_bandwidth_and_a_verdict(rng):
    s = fastmog.Stream()
    host = fastmog.pinned_empty((H, W, 3), np.uint8)
    host[...] = 7
    sub = fastmog.BackgroundSubtractorMOG2()
    with fastmog.profile() as t:
        for _ in range(10):
            m = fastmog.GpuMat.from_array(host, stream=s)
            sub.apply(m, stream=s).download(stream=s)
    text = t.report()
    assert "Engines (busy fraction" in text and "Bandwidth (fastmog's byte count" in text
    assert "GB/s" in text and text.splitlines()[-1].startswith("verdict: bound by ")
    assert "NVML" in text
    trace = t.to_chrome_trace()
    assert any(e.get("tid") == pa.H2D for e in trace["traceEvents"])


def test_copies_timed_in_one_call_leave_out_another_threads_hold_on_the_gil(rng):
    # A decoder session's thread times its output copy while other threads
    # run Python. gpu_copies records the events beside the copies in one C
    # call: however often the GIL changes hands around it, the window holds
    # the copies and never another thread's turn with the GIL.
    s = fastmog.Stream()
    a = fastmog.GpuMat.from_array(rng.integers(0, 255, (64, 64), dtype=np.uint8), stream=s)
    b = fastmog.GpuMat((64, 64), np.uint8)
    data = [(i * 7919) % 200_003 for i in range(200_000)]
    start = time.perf_counter()
    sorted(data)                         # one C call that keeps the GIL throughout
    hog_ms = (time.perf_counter() - start) * 1e3
    stop, turns = threading.Event(), [0]

    def hog():
        while not stop.is_set():
            sorted(data)
            turns[0] += 1

    t = fastmog.Timer(nvtx=False)
    t.calibrate = False
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)          # hand the GIL over at every chance
    thread = threading.Thread(target=hog)
    thread.start()
    try:
        for _ in range(20):
            t.gpu_copies("VideoReader.decode", "NVDEC output copy", s, [(a, b)], (64, 64, 1),
                         session=3)
            s.synchronize()
            time.sleep(0.0005)           # the GIL goes to the other thread, for a sort
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(old)
    assert turns[0] >= 10                # the other thread held the GIL between the copies
    records = t.records
    assert len(records) == 20
    assert all(r.session == 3 and r.activity == "NVDEC output copy" for r in records)
    assert all(r.bytes_read == r.bytes_written == 64 * 64 for r in records)
    assert max(r.gpu_ms for r in records) < hog_ms / 4
    np.testing.assert_array_equal(b.download(stream=s), a.download(stream=s))


def test_copies_open_their_window_behind_a_gate_that_every_thread_opens(rng):
    # Each gpu_copies waits on the GPU at a gate its call opens once the
    # copies are queued. Gates share one word, raised to each ticket: threads
    # opening theirs in any order never shut another's, and no stream stalls.
    def worker(k, out):
        s = fastmog.Stream()
        src = fastmog.GpuMat.from_array(rng_k[k], stream=s)
        dst = fastmog.GpuMat((32, 48), np.uint8)
        t = fastmog.Timer(nvtx=False)
        t.calibrate = False
        for i in range(100):
            t.gpu_copies("VideoReader.decode", "NVDEC output copy", s, [(src, dst)],
                         (32, 48, 1), session=k)
            if i % 10 == 0:
                s.synchronize()
        out[k] = (dst.download(stream=s), t.records)

    rng_k = [rng.integers(0, 255, (32, 48), dtype=np.uint8) for _ in range(3)]
    out = {}
    threads = [threading.Thread(target=worker, args=(k, out)) for k in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not any(th.is_alive() for th in threads), "a stream stalled at a gate"
    for k in range(3):
        got, records = out[k]
        np.testing.assert_array_equal(got, rng_k[k])
        assert len(records) == 100 and all(r.gated for r in records)
        assert all(r.gpu_ms is not None and r.gpu_ms >= 0 for r in records)


def test_gpu_copies_checks_every_pair_before_queuing_any(rng):
    s = fastmog.Stream()
    a = fastmog.GpuMat.from_array(rng.integers(0, 255, (8, 8), dtype=np.uint8), stream=s)
    b = fastmog.GpuMat((8, 8), np.uint8)
    b.fill(0, stream=s)
    t = fastmog.Timer(nvtx=False)
    for pairs, error in (([(a, b), (a, fastmog.GpuMat((8, 9), np.uint8))], ValueError),
                         ([(a, b), (a, np.zeros((8, 8), np.uint8))], TypeError),
                         ([(a, b), a], TypeError), ([], ValueError)):
        with pytest.raises(error):
            t.gpu_copies("VideoReader.decode", "NVDEC output copy", s, pairs, (8, 8, 1))
    assert len(t.records) == 0
    assert not b.download(stream=s).any()


def test_the_gpu_waiting_for_the_host_to_submit_is_left_out_of_the_window(rng):
    # On a stream with nothing queued the start event runs at once; if the
    # host then takes 5 ms to submit the work (a lock, another thread), the
    # raw window holds those 5 ms and the work's own time does not.
    s = fastmog.Stream()
    a = fastmog.GpuMat.from_array(rng.integers(0, 255, (256, 256), dtype=np.uint8), stream=s)
    b = fastmog.GpuMat((256, 256), np.uint8)
    s.synchronize()
    t = fastmog.Timer(nvtx=False)
    for told in (True, False) * 3:
        with t.gpu_span("VideoReader.decode", "NVDEC output copy", s, (256, 256, 1)) as span:
            time.sleep(0.005)
            a.copy_to(b, stream=s)
            if told:
                span.submitted()
        s.synchronize()
    records = t.records
    t.calibrate = False
    raw = t.records
    told, untold = records[0::2], records[1::2]
    for r, w in zip(told, raw[0::2]):
        assert w.gpu_ms > 4.5 and r.gpu_ms_raw == w.gpu_ms
        assert r.submitted is not None and r.submitted - w.gpu_start > 0.0045
        assert r.gpu_ms < 0.5
        assert r.gpu_start - w.gpu_start > 0.0045          # the work began after the wait
    # a span that does not say when its work was submitted keeps its window
    for r in untold:
        assert r.submitted is None and r.gpu_ms > 4.5
