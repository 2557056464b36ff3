"""Host cost of one call: apply on a tiny device-resident frame (64x64), with
no timer (the default: the timer costs nothing when off), with a Timer active,
and with NVTX ranges on. Host time only: the GPU work is a few microseconds."""
import numpy as np
import pytest

import fastmog


@pytest.fixture(scope="module")
def setup():
    stream = fastmog.Stream()
    frame = fastmog.GpuMat.from_array(np.full((64, 64), 9, np.uint8), stream=stream)
    sub = fastmog.BackgroundSubtractorMOG2()
    for _ in range(50):
        sub.apply(frame, stream=stream)
    stream.synchronize()
    yield sub, frame, stream
    stream.synchronize()
    stream.close()


def _apply_many(sub, frame, stream, n=1000):
    for _ in range(n):
        sub.apply(frame, stream=stream)
    stream.synchronize()


@pytest.mark.parametrize("mode", ["off", "timer", "nvtx"])
def test_apply_host_overhead_64x64(benchmark, setup, mode):
    sub, frame, stream = setup
    benchmark.extra_info["calls_per_round"] = 1000
    if mode == "timer":
        timer = fastmog.Timer()

        def run():
            with fastmog.profile(timer=timer):
                _apply_many(sub, frame, stream)
            timer.reset()
    elif mode == "nvtx":
        def run():
            fastmog.set_nvtx(True)
            try:
                _apply_many(sub, frame, stream)
            finally:
                fastmog.set_nvtx(False)
    else:
        def run():
            _apply_many(sub, frame, stream)
    benchmark.pedantic(run, rounds=20, warmup_rounds=2)
    # per call: the round's time / 1000
    benchmark.extra_info["us_per_call_median"] = benchmark.stats.stats.median * 1e6 / 1000
