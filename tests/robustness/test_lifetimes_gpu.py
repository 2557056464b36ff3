"""Lifetimes across streams and closes racing use (issue 21, items 1-7), each
shown with its race window held open on purpose: a spin kernel keeps a
stream busy while the test does what used to break, then the bytes are
checked after synchronizing. Cases that crashed or hung before their fix
run in a child process. The rules these tests show are written at the top
of src/devmem.c (when memory may be reused) and src/stream.c (a stream that
is closing is busy; calls hold their stream)."""
import numpy as np
import pytest

import fastmog
from conftest import random_image
from gpu_race import run_child, spin

pytestmark = pytest.mark.gpu

SIZE = (1024, 4096)     # 4 MiB: big enough for a pool block of its own
SPIN_MS = 600


@pytest.fixture
def cupy():
    return pytest.importorskip("cupy")


def _new_owners(stream, value, n=4):
    """New GpuMats on the same thread: the pool's first candidates are the
    blocks freed last."""
    owners = [fastmog.GpuMat.from_array(np.full(SIZE, value, np.uint8), stream=stream)
              for _ in range(n)]
    stream.synchronize()
    return owners


# ---- item 1: a buffer is reused only after every stream's use is done ----------

def test_free_waits_for_closed_stream_use(cupy):
    """A read queued on C behind other work, then a use on A, A closed, the
    GpuMat dropped: new GpuMats must not get its memory while C still reads."""
    a, b, c = fastmog.Stream(), fastmog.Stream(), fastmog.Stream()
    m = fastmog.GpuMat.from_array(np.full(SIZE, 7, np.uint8), stream=a)
    a.synchronize()
    spin(c, SPIN_MS)
    out = m.download(stream=c, blocking=False)   # queued behind the spin
    m.download(stream=a)                         # the latest use is on A
    a.close()
    del m
    owners = _new_owners(b, 99)
    c.synchronize()
    assert np.count_nonzero(out != 7) == 0, "C's queued download read a new owner's bytes"
    assert all(o.download(stream=b)[0, 0] == 99 for o in owners)


def test_foreign_owner_waits_for_earlier_streams(cupy):
    """The same with foreign memory: the owner is let go only after C's read.
    CuPy works on a non-blocking stream of its own, so nothing but the
    release rule orders its reuse of the block after C."""
    a, c = fastmog.Stream(), fastmog.Stream()
    cs = cupy.cuda.Stream(non_blocking=True)
    with cs:
        arr = cupy.full(SIZE, 7, cupy.uint8)
    cs.synchronize()
    m = fastmog.asgpumat(arr, stream=a)
    spin(c, SPIN_MS)
    out = m.download(stream=c, blocking=False)
    m.download(stream=a)
    a.close()
    del m, arr
    with cs:    # CuPy's pool hands the freed block to the next allocation of its size
        others = [cupy.full(SIZE, 99, cupy.uint8) for _ in range(4)]
    c.synchronize()
    cs.synchronize()
    assert np.count_nonzero(out != 7) == 0, "the owner was dropped while C still read"
    del others


def test_pending_releases_are_swept(cupy):
    """Deferred frees do go back: once the streams are done, a sweep returns
    them (memory_stats' pending_releases drops to what it was)."""
    s = fastmog.Stream()
    before = fastmog.memory_stats()["pending_releases"]
    spin(s, 100)
    mats = [fastmog.GpuMat(SIZE, np.uint8) for _ in range(3)]
    for m in mats:
        m.fill(1, stream=s)
    del mats, m
    assert fastmog.memory_stats()["pending_releases"] >= before
    s.synchronize()
    fastmog.empty_cache()
    assert fastmog.memory_stats()["pending_releases"] <= before


# ---- item 3: fences are keyed by a serial that is never reused -------------------

def test_dropped_stream_fence_is_not_taken_over(cupy):
    """A Stream dropped with work queued frees its address; a new Stream at
    that address must not take over (and lose) the dropped one's fence."""
    s0, b = fastmog.Stream(), fastmog.Stream()
    m = fastmog.GpuMat.from_array(np.full(SIZE, 7, np.uint8), stream=s0)
    s0.synchronize()
    c = fastmog.Stream()
    spin(c, SPIN_MS)
    out = m.download(stream=c, blocking=False)
    m.download(stream=s0)           # C's use is fenced
    old = id(c)
    del c                           # dropped with its read still queued
    spares, d = [], None
    for _ in range(256):
        s = fastmog.Stream()
        if id(s) == old:
            d = s
            break
        spares.append(s)
    if d is None:
        cupy.cuda.Device().synchronize()
        pytest.skip("no new Stream landed at the dropped one's address")
    m.download(stream=d)            # S0 fenced
    m.download(stream=s0)           # D fenced: the dropped stream's key, before
    del m
    owners = _new_owners(b, 99)
    cupy.cuda.Device().synchronize()
    assert np.count_nonzero(out != 7) == 0, "the dropped stream's read lost its fence"
    del owners, spares


# ---- item 2: a stream that is closing is busy; calls hold their stream -----------

def test_close_races_two_closes_of_a_busy_stream():
    rc, out = run_child("""
        import threading, fastmog
        from gpu_race import spin
        for _ in range(3):
            s = fastmog.Stream()
            spin(s, 300)
            errors = []
            def close():
                try:
                    s.close()
                except Exception as e:
                    errors.append(repr(e))
            threads = [threading.Thread(target=close) for _ in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert s.closed and not errors, errors
        print("OK")
    """)
    assert rc == 0 and "OK" in out, out


def test_close_races_synchronize_begun_during_close():
    rc, out = run_child("""
        import threading, time, fastmog
        from gpu_race import spin
        s = fastmog.Stream()
        spin(s, 500)
        t = threading.Thread(target=s.close)
        t.start()
        time.sleep(0.15)            # close() is waiting for the spin
        try:
            s.synchronize()
            result = "synchronized"
        except ValueError as e:
            result = str(e)
        t.join()
        assert result == "stream is closed" and s.closed, result
        print("OK")
    """)
    assert rc == 0 and "OK" in out, out


def test_close_races_a_producer_inside_apply():
    """close() from inside apply (a producer's __cuda_array_interface__ runs
    while apply holds the stream) is refused: no work on a NULL handle."""
    rc, out = run_child("""
        import cupy, numpy as np, fastmog
        s = fastmog.Stream()
        sub = fastmog.BackgroundSubtractorMOG2()
        arr = cupy.zeros((64, 64), cupy.uint8)
        seen = []
        class Producer:
            @property
            def __cuda_array_interface__(self):
                try:
                    s.close()
                    seen.append("closed")
                except ValueError as e:
                    seen.append(str(e))
                return arr.__cuda_array_interface__
        mask = sub.apply(Producer(), stream=s)
        s.synchronize()
        assert seen and all("in use" in x for x in seen), seen
        assert not s.closed and mask.download(stream=s).shape == (64, 64)
        s.close()
        print("OK")
    """)
    assert rc == 0 and "OK" in out, out


def test_close_refused_while_a_download_waits():
    rc, out = run_child("""
        import threading, time, numpy as np, fastmog
        from gpu_race import spin
        s = fastmog.Stream()
        m = fastmog.GpuMat.from_array(np.ones((256, 256), np.uint8), stream=s)
        spin(s, 500)
        got = []
        t = threading.Thread(target=lambda: got.append(m.download(stream=s)))
        t.start()
        time.sleep(0.15)
        try:
            s.close()
            result = "closed"
        except ValueError as e:
            result = str(e)
        t.join()
        assert "in use" in result, result
        assert got and (got[0] == 1).all()
        s.close()
        print("OK")
    """)
    assert rc == 0 and "OK" in out, out


def test_cuda_array_interface_export_lives_until_the_gpumat_is_gone(cupy):
    """The CUDA Array Interface has no release signal: a consumer holds the
    GpuMat object, not its memory. close() and del while CuPy holds it must
    leave the bytes in place (new GpuMats on the same thread would otherwise
    get the block first)."""
    s = fastmog.Stream()
    m = fastmog.GpuMat.from_array(np.full(SIZE, 7, np.uint8), stream=s)
    s.synchronize()
    view = cupy.asarray(m)                       # keeps the object m alive
    m.close()
    del m
    owners = _new_owners(s, 99)
    got = cupy.asnumpy(view)
    assert np.count_nonzero(got != 7) == 0, "CuPy's view read a new owner's bytes"
    assert all(o.download(stream=s)[0, 0] == 99 for o in owners)
    s.close()


# ---- item 4: mode_counts() cannot be written through; damaged counts stay bounded --

def test_mode_counts_has_no_cuda_array_interface(stream, rng):
    sub = fastmog.BackgroundSubtractorMOG2()
    sub.apply(random_image(rng, (32, 32), np.uint8), stream=stream)
    counts = sub.mode_counts()
    assert not hasattr(counts, "__cuda_array_interface__")
    assert counts.__dlpack__(stream=None, max_version=(1, 0)) is not None
    assert counts.download(stream=stream).shape == (32, 32)


def test_damaged_mode_counts_stay_inside_the_model(cupy, stream, rng):
    """Counts of 255 written into the model (anyone with its address can) are
    clamped to n_mixtures: the next apply reads and writes inside the model
    only, and rewrites the counts."""
    h, w = 64, 96
    sub = fastmog.BackgroundSubtractorMOG2(n_mixtures=3)
    for _ in range(3):
        sub.apply(random_image(rng, (h, w, 3), np.uint8), stream=stream)
    counts = sub.mode_counts()
    stream.synchronize()
    mem = cupy.cuda.UnownedMemory(counts.ptr, h * w, counts)
    raw = cupy.ndarray((h, w), cupy.uint8, cupy.cuda.MemoryPointer(mem, 0))
    raw.fill(255)
    cupy.cuda.Device().synchronize()
    sub.apply(random_image(rng, (h, w, 3), np.uint8), stream=stream)
    after = sub.mode_counts().download(stream=stream)
    assert after.max() <= 3, f"mode counts up to {after.max()} with n_mixtures=3"
    sub.get_background_image(stream=stream).download(stream=stream)


# ---- item 5: every foreign view is bounded by its allocation ------------------------

class _Claim:
    """A CUDA Array Interface producer claiming `shape` (uint8) at `ptr`."""

    def __init__(self, ptr, shape):
        self.__cuda_array_interface__ = {
            "shape": shape, "typestr": "|u1", "data": (ptr, False),
            "version": 3, "strides": None, "stream": None}


def test_foreign_view_beyond_its_allocation_is_refused(cupy, stream):
    ptr = cupy.cuda.runtime.malloc(64 * 64)     # one allocation of exactly 4 KiB
    try:
        with pytest.raises(ValueError, match="allocation"):
            fastmog.asgpumat(_Claim(ptr, (8192, 8192)), stream=stream)
        with pytest.raises(ValueError, match="allocation"):
            fastmog.asgpumat(_Claim(ptr + 64, (64, 64)), stream=stream)
        sub = fastmog.BackgroundSubtractorMOG2()
        with pytest.raises(ValueError, match="allocation"):
            sub.apply(_Claim(ptr, (8192, 8192)), stream=stream)
        assert sub.frame_count == 0 and sub.model_bytes == 0
        # inside the allocation: accepted, to its last byte
        assert fastmog.asgpumat(_Claim(ptr + 64, (63, 64)), stream=stream).shape == (63, 64)
        arr = cupy.zeros((64, 64), cupy.uint8)
        assert fastmog.asgpumat(arr[10:20, 5:30], stream=stream).shape == (10, 25)
        stream.synchronize()
    finally:
        cupy.cuda.runtime.deviceSynchronize()
        cupy.cuda.runtime.free(ptr)


def test_dlpack_view_beyond_its_allocation_is_refused(cupy, stream):
    ptr = cupy.cuda.runtime.malloc(64 * 64)
    try:
        # a CuPy array over memory it does not own: its shape is not checked
        claim = cupy.cuda.UnownedMemory(ptr, 8192 * 8192, None)
        bad = cupy.ndarray((8192, 8192), cupy.uint8, cupy.cuda.MemoryPointer(claim, 0))

        class ByDLPack:
            def __dlpack__(self, **kw):
                return bad.__dlpack__(**kw)

            def __dlpack_device__(self):
                return bad.__dlpack_device__()

        with pytest.raises(ValueError, match="allocation"):
            fastmog.asgpumat(ByDLPack(), stream=stream)
        good = cupy.ndarray((64, 64), cupy.uint8, cupy.cuda.MemoryPointer(claim, 0))
        assert fastmog.asgpumat(good[8:, 8:], stream=stream).shape == (56, 56)
        stream.synchronize()
    finally:
        cupy.cuda.runtime.deviceSynchronize()
        cupy.cuda.runtime.free(ptr)


# ---- item 6: producers run before the subtractor's lock is taken --------------------

def test_producer_calling_back_into_the_subtractor_does_not_deadlock():
    rc, out = run_child("""
        import cupy, numpy as np, fastmog
        s = fastmog.Stream()
        sub = fastmog.BackgroundSubtractorMOG2()
        arr = cupy.full((48, 64), 9, cupy.uint8)
        class ByInterface:
            @property
            def __cuda_array_interface__(self):
                sub.reset()             # takes the subtractor's lock
                return arr.__cuda_array_interface__
        class ByDLPack:
            def __dlpack__(self, **kw):
                sub.reset()
                return arr.__dlpack__(**kw)
            def __dlpack_device__(self):
                return arr.__dlpack_device__()
        sub.apply(ByInterface(), stream=s)
        sub.apply(ByDLPack(), stream=s)
        sub.apply_batch([ByInterface(), ByDLPack()], stream=s)
        fastmog.apply_cameras([sub], [ByInterface()], stream=s)
        s.synchronize()
        print("OK")
    """, timeout=30)
    assert rc == 0 and "OK" in out, out


# ---- item 7: streams named through __cuda_stream__ are accepted ---------------------

def test_stream_wrap_accepts_the_cuda_stream_protocol(cupy):
    with fastmog.Stream() as s:
        class Method:
            def __cuda_stream__(self):
                return (0, s.handle)

        class Attribute:
            __cuda_stream__ = (0, s.handle)

        for obj in (Method(), Attribute(), s):
            w = fastmog.Stream.wrap(obj)
            assert w.handle == s.handle and w.device == s.device
        cs = cupy.cuda.Stream(non_blocking=True)
        assert fastmog.Stream.wrap(cs).handle == cs.ptr
        torch = pytest.importorskip("torch")
        ts = torch.cuda.Stream()
        assert fastmog.Stream.wrap(ts).handle == ts.cuda_stream
