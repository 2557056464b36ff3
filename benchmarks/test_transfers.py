"""Physical ceilings that later benchmarks compare against, measured in the
same run: host<->device over PCIe (pinned and pageable) and device-to-device
copy bandwidth. GPU time comes from CUDA events (in extra_info); the host time
pytest-benchmark reports includes waiting for the copy (blocking calls)."""
import numpy as np
import pytest

import fastmog

SHAPE_4K = (2160, 3840)
ROUNDS = 30


def _gpu_ms(stream, fn, repeats=20):
    start, end = fastmog.Event(), fastmog.Event()
    fn()  # warm-up
    start.record(stream=stream)
    for _ in range(repeats):
        fn()
    end.record(stream=stream)
    end.synchronize()
    return start.elapsed_time(end) / repeats


@pytest.fixture(scope="module")
def stream():
    with fastmog.Stream() as s:
        yield s


@pytest.mark.parametrize("host", ["pinned", "pageable"])
def test_upload_4k_grey(benchmark, stream, host):
    rng = np.random.default_rng(1)
    frame = rng.integers(0, 256, SHAPE_4K, dtype=np.uint8)
    if host == "pinned":
        pinned = fastmog.pinned_like(frame)
        pinned[...] = frame
        frame = pinned
    m = fastmog.GpuMat(SHAPE_4K)

    def upload():
        m.upload(frame, stream=stream)
        stream.synchronize()

    ms = _gpu_ms(stream, lambda: m.upload(frame, stream=stream))
    benchmark.extra_info.update(gpu_ms=ms, gb_per_s=frame.nbytes / ms / 1e6)
    benchmark.pedantic(upload, rounds=ROUNDS, warmup_rounds=3)


@pytest.mark.parametrize("host", ["pinned", "pageable"])
def test_download_4k_grey(benchmark, stream, host):
    m = fastmog.GpuMat(SHAPE_4K)
    m.fill(17, stream=stream)
    out = fastmog.pinned_empty(SHAPE_4K) if host == "pinned" else np.empty(SHAPE_4K, np.uint8)
    ms = _gpu_ms(stream, lambda: m.download(out, stream=stream, blocking=host == "pageable"))
    benchmark.extra_info.update(gpu_ms=ms, gb_per_s=out.nbytes / ms / 1e6)
    benchmark.pedantic(lambda: m.download(out, stream=stream), rounds=ROUNDS, warmup_rounds=3)


def test_device_copy_bandwidth(benchmark, stream):
    a = fastmog.GpuMat((16384, 16384), np.float32)   # 1 GiB, far beyond L2
    b = fastmog.GpuMat((16384, 16384), np.float32)
    a.fill(1.0, stream=stream)

    def copy():
        a.copy_to(b, stream=stream)
        stream.synchronize()

    ms = _gpu_ms(stream, lambda: a.copy_to(b, stream=stream), repeats=10)
    benchmark.extra_info.update(gpu_ms=ms, tb_per_s_read_plus_write=2 * a.nbytes / ms / 1e9)
    benchmark.pedantic(copy, rounds=10, warmup_rounds=2)
