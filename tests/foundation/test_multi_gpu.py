"""Several GPUs in one process (issue 15): everything works on device 1 as
on device 0, every cross-device mix is refused with a clear error (never a
silent copy or a crash), and the calling thread's current device is left
as it was. Skipped with the reason on machines with fewer than two GPUs."""
import threading

import numpy as np
import pytest

import fastmog
from conftest import random_image

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(fastmog.device_count() < 2, reason="needs two GPUs")]


def _current_device():
    torch = pytest.importorskip("torch")
    return torch.cuda.current_device()


@pytest.mark.parametrize("device", [0, 1])
def test_everything_on_either_device(rng, device):
    frames = [random_image(rng, (120, 160, 3), np.uint8) for _ in range(6)]
    host = fastmog.cpu.BackgroundSubtractorMOG2()
    expect = [host.apply(f) for f in frames]
    sub = fastmog.BackgroundSubtractorMOG2(device=device)
    with fastmog.Stream(device=device) as s:
        for f, e in zip(frames, expect):
            m = fastmog.GpuMat.from_array(f, stream=s)
            assert m.device == device
            assert np.array_equal(sub.apply(m, stream=s).download(stream=s), e)
        ev = s.record()
        ev.synchronize()
        bg = sub.get_background_image(stream=s).download(stream=s)
    assert np.array_equal(bg, host.get_background_image())
    streams = [fastmog.Stream(device=device) for _ in range(3)]
    masks = list(fastmog.pipeline(fastmog.BackgroundSubtractorMOG2(device=device), frames,
                                  streams=streams, copy=True))
    assert all(np.array_equal(a, b) for a, b in zip(masks, expect))


def test_every_cross_device_mix_is_refused(rng):
    frame = random_image(rng, (32, 32), np.uint8)
    s0, s1 = fastmog.Stream(device=0), fastmog.Stream(device=1)
    m0 = fastmog.GpuMat.from_array(frame, stream=s0)
    m1 = fastmog.GpuMat.from_array(frame, stream=s1)
    sub0 = fastmog.BackgroundSubtractorMOG2(device=0)
    bad = [
        lambda: m0.fill(0, stream=s1),
        lambda: m0.upload(frame, stream=s1),
        lambda: m0.download(stream=s1),
        lambda: m0.copy_to(m1, stream=s0),
        lambda: sub0.apply(frame, stream=s1),
        lambda: sub0.apply(m1, stream=s0),
        lambda: sub0.apply(m0, stream=s0, fgmask=fastmog.GpuMat((32, 32), device=1)),
        lambda: fastmog.Event(device=0).record(stream=s1),
        lambda: fastmog.asgpumat(m1, stream=s0),
        lambda: fastmog.nv12_to_bgr(fastmog.GpuMat((4, 6), device=1),
                                    fastmog.GpuMat((2, 6), device=1), stream=s0),
        lambda: list(fastmog.pipeline(sub0, [frame], streams=[s1, s1, s1])),
    ]
    before = _current_device()
    for call in bad:
        with pytest.raises(ValueError, match="device"):
            call()
        assert _current_device() == before
    assert sub0.frame_count == 0


def test_the_callers_current_device_is_kept(rng):
    torch = pytest.importorskip("torch")
    frame = random_image(rng, (64, 64), np.uint8)
    for current, target in ((0, 1), (1, 0)):
        torch.cuda.set_device(current)
        with fastmog.Stream(device=target) as s:
            sub = fastmog.BackgroundSubtractorMOG2(device=target)
            sub.apply(frame, stream=s).download(stream=s)
            fastmog.GpuMat((8, 8), device=target).close()
        assert torch.cuda.current_device() == current
    torch.cuda.set_device(0)


def test_one_pipeline_per_gpu_in_threads(rng):
    frames = [random_image(rng, (240, 320), np.uint8) for _ in range(20)]
    expect = [fastmog.cpu.BackgroundSubtractorMOG2().apply(f) for f in frames[:1]]
    results, errors = {}, []

    def run(device):
        try:
            streams = [fastmog.Stream(device=device) for _ in range(3)]
            sub = fastmog.BackgroundSubtractorMOG2(device=device)
            results[device] = list(fastmog.pipeline(sub, frames, streams=streams, copy=True))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(d,)) for d in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert all(np.array_equal(a, b) for a, b in zip(results[0], results[1]))
    assert np.array_equal(results[0][0], expect[0])
