"""Threads and lifetimes across producers and consumers (issue 12): closing
an object that another thread is using is refused or safe, never a crash;
memory a consumer still reads is never handed out again."""
import threading
import time

import numpy as np
import pytest

import fastmog
from conftest import random_image

pytestmark = pytest.mark.gpu


@pytest.fixture
def cupy():
    return pytest.importorskip("cupy")


def _busy(cupy, stream, seconds=0.5):
    """Queues about `seconds` of GPU work on a fastmog stream."""
    a = cupy.ones((2048, 2048), np.float32)
    with cupy.cuda.ExternalStream(stream.handle):
        start = time.perf_counter()
        cupy.cuda.get_current_stream().synchronize()
        n = 0
        while time.perf_counter() - start < 0.02:   # calibrate on a short burst
            a = a @ a / 2048
            n += 1
        cupy.cuda.get_current_stream().synchronize()
        per = (time.perf_counter() - start) / n
        for _ in range(int(seconds / per)):
            a = a @ a / 2048
    return a


def _in_thread(fn):
    errors = []

    def run():
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - reported to the test
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    return t, errors


def test_stream_close_while_another_thread_waits_is_refused(cupy):
    s = fastmog.Stream()
    keep = _busy(cupy, s)
    t, errors = _in_thread(s.synchronize)
    time.sleep(0.05)
    with pytest.raises(ValueError, match="waited for in another thread"):
        s.close()
    t.join()
    assert not errors and not s.closed
    s.close()
    s.close()                                   # twice is fine
    with pytest.raises(ValueError, match="closed"):
        s.synchronize()
    del keep


def test_event_close_while_another_thread_waits_is_refused(cupy):
    s = fastmog.Stream()
    keep = _busy(cupy, s)
    e = s.record()
    t, errors = _in_thread(e.synchronize)
    time.sleep(0.05)
    with pytest.raises(ValueError, match="waited for in another thread"):
        e.close()
    t.join()
    assert not errors
    e.close()
    s.close()
    del keep


def test_gpumat_closed_during_a_pageable_download_keeps_its_memory(cupy, rng):
    shape = (1024, 1024)
    frame = random_image(rng, shape, np.uint8)
    s = fastmog.Stream()
    m = fastmog.GpuMat.from_array(frame, stream=s)
    keep = _busy(cupy, s)
    out = np.zeros(shape, np.uint8)             # pageable: the copy waits for the stream
    t, errors = _in_thread(lambda: m.download(out, stream=s))
    time.sleep(0.05)
    m.close()                                   # the download is waiting meanwhile
    # Anything freed would be handed out again here and overwritten.
    others = [fastmog.GpuMat(shape) for _ in range(8)]
    for o in others:
        o.fill(0, stream=fastmog.Stream.null())
    t.join()
    assert not errors, errors
    assert np.array_equal(out, frame)
    del keep


def test_pinned_pool_survives_empty_cache_in_another_thread():
    stop = threading.Event()

    def trim():
        while not stop.is_set():
            fastmog.empty_cache()

    t = threading.Thread(target=trim)
    t.start()
    try:
        for i in range(300):
            a = fastmog.pinned_empty((256, 1024), np.uint8)
            a[...] = i % 251
            assert int(a[-1, -1]) == i % 251
            del a
    finally:
        stop.set()
        t.join()
    stats = fastmog.memory_stats()
    assert stats["pinned_in_use"] >= 0 and stats["pinned_cached"] >= 0


def test_two_threads_share_a_timer(rng):
    timer = fastmog.Timer()
    frame = random_image(rng, (64, 64), np.uint8)
    n = 200

    def work():
        with fastmog.Stream() as s:
            m = fastmog.GpuMat.from_array(frame, stream=s)
            for _ in range(n):
                m.download(stream=s, timer=timer)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    seen = 0
    while any(t.is_alive() for t in threads):
        seen = max(seen, len(timer.records))   # reads while the others record
    for t in threads:
        t.join()
    records = timer.records
    assert len(records) == 2 * n and seen <= 2 * n
    assert all(r.gpu_ms is not None and r.gpu_ms >= 0 for r in records)


def test_torch_kernel_still_queued_on_an_exported_mask_reads_the_right_bytes(cupy, rng):
    torch = pytest.importorskip("torch")
    shape = (2048, 2048)
    frame = random_image(rng, shape, np.uint8)
    s = fastmog.Stream()
    m = fastmog.GpuMat.from_array(frame, stream=s)
    s.synchronize()
    consumer = torch.cuda.Stream()
    with torch.cuda.stream(consumer):
        spin = torch.ones((4096, 4096), device="cuda")
        for _ in range(30):                     # keep the consumer's stream busy
            spin = spin @ spin / 4096
        t = torch.from_dlpack(m)                # __dlpack__(stream=consumer)
        copy = t.to(torch.int32) + 0            # queued behind the spin, reads m
    del t                                       # the capsule's deleter runs now
    m.close()
    del m
    # Memory released too early would be reused and overwritten here.
    others = [fastmog.GpuMat(shape) for _ in range(8)]
    with fastmog.Stream() as other:
        for o in others:
            o.fill(0, stream=other)
        other.synchronize()
    consumer.synchronize()
    assert np.array_equal(copy.cpu().numpy().astype(np.uint8), frame)
    del spin


def test_read_only_view_is_not_exported_as_writable_legacy_dlpack(stream, rng):
    sub = fastmog.BackgroundSubtractorMOG2()
    sub.apply(random_image(rng, (32, 32), np.uint8), stream=stream)
    counts = sub.mode_counts()
    with pytest.raises(BufferError, match="read-only"):
        counts.__dlpack__(stream=None)
    capsule = counts.__dlpack__(stream=None, max_version=(1, 0))
    assert capsule is not None


def test_frame_taller_than_the_launch_grid_keeps_the_model(stream, rng):
    sub = fastmog.BackgroundSubtractorMOG2()
    sub.apply(random_image(rng, (16, 16), np.uint8), stream=stream)
    tall = fastmog.GpuMat((65535 * 8 + 8, 1))
    with pytest.raises(ValueError, match="rows"):
        sub.apply(tall, stream=stream)
    assert sub.frame_count == 1 and sub.model_bytes > 0


def test_stream_repr_shows_a_hex_handle():
    import re

    with fastmog.Stream() as s:
        assert re.fullmatch(r"<fastmog\.Stream owned 0x[0-9a-f]+ device=\d+>", repr(s)), repr(s)


def test_fgmask_closed_while_apply_waits_for_the_lock(rng):
    """Thread A holds the subtractor (staging a large pageable frame); thread
    B's apply waits for it with fgmask=g; g is closed meanwhile. B must say
    so, not write through a released buffer."""
    sub = fastmog.BackgroundSubtractorMOG2()
    big = random_image(rng, (8192, 8192), np.uint8)   # staged with the GIL released
    small = random_image(rng, (8192, 8192), np.uint8)
    g = fastmog.GpuMat((8192, 8192))
    with fastmog.Stream() as s1, fastmog.Stream() as s2:
        a, a_errors = _in_thread(lambda: [sub.apply(big, stream=s1) for _ in range(5)])
        time.sleep(0.02)
        b, b_errors = _in_thread(lambda: sub.apply(small, stream=s2, fgmask=g))
        time.sleep(0.02)
        g.close()
        a.join()
        b.join()
    assert not a_errors, a_errors
    assert not b_errors or (isinstance(b_errors[0], ValueError)
                            and "closed" in str(b_errors[0])), b_errors
