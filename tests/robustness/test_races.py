"""Races between threads and streams, the window held open: memory that
another thread or a consumer's stream still uses is never freed or handed out
under it, and a shared Timer keeps every call (the proofs of issue 12's
fixes; test_threads.py has the quicker tests of the same lifetimes). Each
test fails on the build from before the fixes (3e86b88) and passes after;
its docstring says what it proves and how it fails there. A race is not left
to luck: the window is held open (a long wait the other thread is known to be
in, or the GIL kept by the test), and a scenario that crashes the old build
runs in a child process, so the crash is a failed test rather than the end of
the run."""
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fastmog
from conftest import random_image

# ---- helpers ---------------------------------------------------------------------------

# Prepended to every child script: the child imports the same fastmog as this
# process and can queue GPU work of a known length with fastmog alone.
CHILD_PRELUDE = '''
import sys, threading, time
import numpy as np
import fastmog


def busy(stream, seconds):
    """Queues about `seconds` of GPU work on `stream`: memsets of a 2 GiB
    image, their length measured with events first. Returns the image, which
    must stay alive while the work runs."""
    big = fastmog.GpuMat((32768, 65536), np.uint8)
    big.fill(1, stream=stream)                  # first touch, not timed
    start = stream.record()
    for _ in range(4):
        big.fill(1, stream=stream)
    end = stream.record()
    end.synchronize()
    per = max(start.elapsed_time(end) / 4 / 1000, 1e-5)
    # Few enough launches that the launch queue never blocks this thread.
    for _ in range(min(int(seconds / per) + 1, 700)):
        big.fill(1, stream=stream)
    return big
'''


def run_child(body, timeout=60):
    """Runs CHILD_PRELUDE + body in a fresh interpreter that imports the
    fastmog this process imported; returns (returncode, stdout + stderr)."""
    package_parent = str(pathlib.Path(fastmog.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    code = CHILD_PRELUDE + textwrap.dedent(body)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=timeout, env=env)
    return r.returncode, r.stdout + r.stderr


def assert_child_ok(rc, output):
    # A negative code is a signal: -11 is the segfault of a use after free.
    assert rc == 0 and "CHILD OK" in output, f"child exited with {rc}:\n{output[-3000:]}"


# ---- GpuMat.close() from another thread during a download ---------------------------


@pytest.mark.gpu
def test_gpumat_closed_while_download_allocates_its_pinned_result():
    """gpumat.c: download(out=None) allocated its pinned result (GIL released
    in cudaHostAlloc) and only then read `self->buffer`, which a close() from
    another thread had set to NULL meanwhile: the old build segfaults. The fix
    (transfer.c) holds the buffer for the whole call. The close is made to land
    inside the allocation: a fresh 512 MiB pinned block takes tens of
    milliseconds to allocate, measured first, and the close comes a quarter
    of the way in."""
    rc, out = run_child('''
        shape = (16384, 32768)                       # 512 MiB
        t0 = time.perf_counter()
        probe = fastmog.pinned_empty(shape, np.uint8)
        alloc_s = time.perf_counter() - t0
        del probe
        fastmog.empty_cache()                        # the download must allocate afresh
        s = fastmog.Stream()
        m = fastmog.GpuMat(shape)
        m.fill(7, stream=s)
        s.synchronize()
        ready = threading.Event()
        result, errors = [], []

        def download():
            ready.set()
            try:
                result.append(m.download(stream=s))
            except BaseException as e:
                errors.append(e)

        t = threading.Thread(target=download)
        t.start()
        ready.wait()                  # returns once the download released the GIL
        time.sleep(alloc_s / 4)
        m.close()
        t.join()
        assert not errors, errors
        got = result[0]
        assert got.shape == shape and int(got.min()) == 7 == int(got.max()), "wrong bytes"
        print("allocation took %.1f ms" % (alloc_s * 1e3))
        print("CHILD OK")
    ''')
    assert_child_ok(rc, out)


@pytest.mark.gpu
def test_gpumat_closed_during_a_pageable_download_is_not_reused_under_the_copy():
    """gpumat.c: a pageable download waited for the stream (GIL released)
    and then copied from `m->data`; a close() meanwhile had queued the free of
    that memory, so the pool could hand it to a new GpuMat before the copy ran.
    The fix (transfer.c) holds the buffer until the copy is done. To make the
    interleaving certain, this thread keeps the GIL (switch interval 100 s)
    from the close until new GpuMats of the same size have been allocated and
    zero-filled on the GPU; the download thread cannot queue its copy before.
    The old build then downloads zeros instead of the frame."""
    rc, out = run_child('''
        rng = np.random.default_rng()
        shape = (2048, 2048)
        frame = rng.integers(1, 256, shape, dtype=np.uint8)    # no zeros
        s, fs = fastmog.Stream(), fastmog.Stream()
        m = fastmog.GpuMat.from_array(frame, stream=s)
        keep = busy(s, 0.4)
        out = np.zeros(shape, np.uint8)                          # pageable
        ready = threading.Event()
        errors = []

        def download():
            ready.set()
            try:
                m.download(out, stream=s)
            except BaseException as e:
                errors.append(e)

        t = threading.Thread(target=download)
        t.start()
        ready.wait()
        time.sleep(0.05)                  # the download now waits for `s`
        m.close()
        done = s.record()                 # after the busy work (and the old build's free)
        sys.setswitchinterval(100)        # keep the GIL: the download cannot copy yet
        while not done.query():
            pass
        others = [fastmog.GpuMat(shape) for _ in range(32)]
        for o in others:
            o.fill(0, stream=fs)
        filled = fs.record()
        while not filled.query():
            pass
        sys.setswitchinterval(0.005)
        t.join()
        assert not errors, errors
        bad = int(np.count_nonzero(out != frame))
        assert bad == 0, "%d of %d downloaded bytes are not the frame's" % (bad, out.size)
        print("CHILD OK")
    ''')
    assert_child_ok(rc, out)


# ---- the pinned pool: empty_cache() in one thread, pinned_empty() in another ---------


@pytest.mark.gpu
def test_pinned_block_freed_by_empty_cache_is_never_handed_out():
    """pinned.c: empty_cache() freed the cached blocks one by one, releasing
    the GIL around each cudaFreeHost, while they were still listed in the
    pool; a pinned_empty() in another thread then took a block already freed
    (best fit picks the first block of the size: the one freed first). The
    old build segfaults writing to it, or hands one block out twice (caught
    here as two live arrays sharing an address or losing their contents).
    The fix detaches the list before freeing. The other thread runs pure
    Python between allocations, so it is waiting for the GIL whenever
    empty_cache releases it."""
    rc, out = run_child('''
        shape = (1024, 4096)                         # 4 MiB blocks
        stop = threading.Event()
        started = threading.Event()
        problems = []

        def user():
            live, k = [], 0
            while not stop.is_set():
                a = fastmog.pinned_empty(shape, np.uint8)
                k += 1
                v = k % 250 + 1                      # never 0: the main thread writes 0
                a[...] = v
                live.append((a, v))
                if len(live) > 24:                   # long enough to meet a reissued address
                    live.pop(0)
                for b, w in live:
                    if int(b[0, 0]) != w or int(b[-1, -1]) != w:
                        problems.append("a live pinned array lost its contents")
                addrs = [b.ctypes.data for b, _ in live]
                if len(set(addrs)) != len(addrs):
                    problems.append("one pinned block is in two live arrays")
                started.set()

        t = threading.Thread(target=user)
        t.start()
        started.wait()
        try:
            for _ in range(8):
                blocks = [fastmog.pinned_empty(shape, np.uint8) for _ in range(16)]
                for b in blocks:
                    b[...] = 0
                del blocks, b                        # 16 cached blocks
                fastmog.empty_cache()                # frees them, GIL released around each
        finally:
            stop.set()
            t.join()
        assert not problems, problems[:3]
        stats = fastmog.memory_stats()
        assert stats["pinned_in_use"] >= 0 and stats["pinned_cached"] >= 0, stats
        print("CHILD OK")
    ''')
    assert_child_ok(rc, out)


# ---- a Timer shared between two threads -------------------------------------------------


@pytest.mark.gpu
def test_timer_read_while_another_thread_records_keeps_the_pending_call():
    """timer.c: reading the records waited for a pending call's end event
    (GIL released) through a pointer into the record array; another thread
    recording meanwhile grows (moves) that array, so the old build wrote the
    call's GPU time into freed memory and reported gpu_ms=None for it (or
    crashed). The fix looks the record up again after the wait. The reader
    waits for ~0.5 s of queued GPU work; the other thread records 20,000
    calls (the array grows from 256 to 32,768 records) inside that wait, and
    heap blocks allocated right after the array keep it from growing in
    place."""
    rc, out = run_child('''
        timer = fastmog.Timer(nvtx=False)
        s, idle = fastmog.Stream(), fastmog.Stream()
        small = fastmog.GpuMat((64, 64))
        small.fill(0, stream=s, timer=timer)         # record 0 allocates the array
        s.synchronize()
        fences = [np.empty(40000, np.uint8) for _ in range(64)]   # heap blocks after it
        keep = busy(s, 0.5)
        pending = timer.call_count
        small.fill(1, stream=s, timer=timer)         # its GPU work ends after the busy work
        go = threading.Event()
        errors = []

        def recorder():
            go.wait()
            time.sleep(0.05)                         # the reader is waiting by now
            try:
                for _ in range(20000):
                    idle.synchronize(timer=timer)
            except BaseException as e:
                errors.append(e)

        t = threading.Thread(target=recorder)
        t.start()
        go.set()
        records = timer.records                      # waits for the pending call
        t.join()
        assert not errors, errors
        assert len(records) > 256, "the recorder did not run during the wait"
        r = records[pending]
        assert r.name == "GpuMat.fill" and r.gpu_ms is not None and r.gpu_ms >= 0, r
        assert len(timer.records) == 2 + 20000
        print("CHILD OK")
    ''')
    assert_child_ok(rc, out)


# ---- DLPack: a consumer's kernel still queued when fastmog lets go -----------------------


SPIN_CYCLES = 600_000_000   # 0.3 s at 2 GHz, 0.6 s at 1 GHz


def _torch_consumer(m, shape):
    torch = pytest.importorskip("torch")
    consumer = torch.cuda.Stream()
    with torch.cuda.stream(consumer):
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(SPIN_CYCLES)           # holds the consumer's stream
        else:
            spin = torch.ones((4096, 4096), device="cuda")
            for _ in range(100):
                spin = spin @ spin / 4096
        t = torch.from_dlpack(m)                     # __dlpack__(stream=consumer)
        copy = t.to(torch.int16)                     # queued behind the spin; reads m
    del t                                            # the export's deleter runs here
    return consumer.synchronize, lambda: copy.cpu().numpy()


def _cupy_consumer(m, shape):
    cupy = pytest.importorskip("cupy")
    spin = cupy.RawKernel(r'''
        extern "C" __global__ void spin(long long cycles) {
            long long t0 = clock64();
            while (clock64() - t0 < cycles) {}
        }''', "spin")
    consumer = cupy.cuda.Stream(non_blocking=True)
    with consumer:
        spin((1,), (1,), (np.int64(SPIN_CYCLES),))
        a = cupy.from_dlpack(m)                      # __dlpack__(stream=consumer)
        copy = a.astype(cupy.int16)                  # queued behind the spin; reads m
    del a
    return consumer.synchronize, lambda: cupy.asnumpy(copy)


@pytest.mark.gpu
@pytest.mark.parametrize("consumer", [_torch_consumer, _cupy_consumer], ids=["torch", "cupy"])
def test_dlpack_memory_waits_for_the_consumers_queued_kernel(consumer, rng):
    """interop_export.c/devmem.c: the old build freed an exported GpuMat's memory on
    fastmog's own stream once the consumer dropped the tensor, not after the
    consumer's stream; with that stream idle the free completed at once and
    the pool handed the block to the next GpuMat of the size while the
    consumer's kernel (queued behind ~0.3 s of spinning) had not read it yet.
    Here that next GpuMat is zero-filled and finished before the consumer
    reads, so the old build's consumer sees zeros. The fix orders the free
    after the consumer's stream (the synchronize below then waits for it)."""
    shape = (2048, 2048)
    frame = random_image(rng, shape, np.uint8)
    frame[frame == 0] = 1                            # zeros would hide a reuse
    fastmog.empty_cache()    # little cached: the pool neither trims nor picks another block
    s = fastmog.Stream()
    m = fastmog.GpuMat.from_array(frame, stream=s)
    s.synchronize()
    wait_consumer, read_copy = consumer(m, shape)
    m.close()
    del m
    s.synchronize()          # old build: the free is done; fixed: waits for the consumer
    others = [fastmog.GpuMat(shape) for _ in range(32)]
    fs = fastmog.Stream()
    for o in others:
        o.fill(0, stream=fs)
    fs.synchronize()
    wait_consumer()
    got = read_copy().astype(np.uint8)
    bad = int(np.count_nonzero(got != frame))
    assert bad == 0, f"the consumer read {bad} of {got.size} bytes after fastmog reused them"
    s.close()
    fs.close()
