"""Threads and lifetimes across producers and consumers (issue 12): closing
an object that another thread is using is refused or safe, never a crash;
memory a consumer still reads is never handed out again. The same lifetimes
with the race window held open, in child processes: test_races.py."""
import threading
import time

import numpy as np
import pytest

import fastmog
from conftest import random_image
from gpu_race import spin

pytestmark = pytest.mark.gpu


@pytest.fixture
def cupy():
    return pytest.importorskip("cupy")


def _busy(cupy, stream, seconds=0.5):
    """Queues `seconds` of GPU work on a fastmog stream: a kernel spinning
    on the GPU's clock, so the window does not depend on how fast the GPU
    multiplies matrices."""
    spin(stream, seconds * 1000)


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


def test_read_only_view_is_not_exported_as_writable_legacy_dlpack(stream, rng):
    sub = fastmog.BackgroundSubtractorMOG2()
    sub.apply(random_image(rng, (32, 32), np.uint8), stream=stream)
    counts = sub.mode_counts()
    with pytest.raises(BufferError, match="read-only"):
        counts.__dlpack__(stream=None)
    capsule = counts.__dlpack__(stream=None, max_version=(1, 0))
    assert capsule is not None


ROWS_PER_BLOCK = 4     # cuda/launch.h's FM_MOG2_BLOCK_ROWS: the grid is 65535 blocks down


def test_frame_taller_than_the_launch_grid_keeps_the_model(stream, rng):
    """Refused before the model is rebuilt: one block-row past the grid."""
    sub = fastmog.BackgroundSubtractorMOG2()
    sub.apply(random_image(rng, (16, 16), np.uint8), stream=stream)
    tall = fastmog.GpuMat((65535 * ROWS_PER_BLOCK + 1, 1))
    with pytest.raises(ValueError, match="rows"):
        sub.apply(tall, stream=stream)
    assert sub.frame_count == 1 and sub.model_bytes > 0


def test_the_tallest_frame_the_grid_holds_is_applied_exactly(stream, rng):
    frames = [random_image(rng, (65535 * ROWS_PER_BLOCK, 1), np.uint8) for _ in range(3)]
    sub, host = fastmog.BackgroundSubtractorMOG2(), fastmog.cpu.BackgroundSubtractorMOG2()
    for f in frames:
        np.testing.assert_array_equal(sub.apply(f, stream=stream).download(stream=stream),
                                      host.apply(f))
    np.testing.assert_array_equal(sub.get_background_image(stream=stream).download(
        stream=stream), host.get_background_image())


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
