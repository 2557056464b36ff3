"""The overlapped pipeline and the many-cameras idiom, against the host
reference."""
import numpy as np
import pytest

import fastmog
from conftest import random_image
from fastmog._auto_batch import CANDIDATES, AutoBatch
from fastmog.testing import convert, iter_frames

pytestmark = pytest.mark.gpu


@pytest.fixture
def streams():
    s = [fastmog.Stream() for _ in range(3)]
    yield s
    for x in s:
        x.close()


@pytest.mark.parametrize("pinned", [True, False])
def test_pipeline_equals_host_in_order(data_dir, streams, pinned):
    frames = [convert(f, "grey", np.uint8) for f in iter_frames(data_dir, "CAVIAR2", 60)]
    if pinned:
        pinned_frames = []
        for f in frames:
            p = fastmog.pinned_like(f)
            p[...] = f
            pinned_frames.append(p)
        frames = pinned_frames
    gpu = fastmog.BackgroundSubtractorMOG2()
    host = fastmog.cpu.BackgroundSubtractorMOG2()
    got = [m.copy() for m in fastmog.pipeline(gpu, iter(frames), streams=streams, depth=3)]
    assert len(got) == len(frames)
    for i, (g, f) in enumerate(zip(got, frames)):
        assert np.array_equal(g, host.apply(f)), f"frame {i}"


@pytest.mark.parametrize("batch, depth", [(4, 2), (8, 3)])
def test_batched_pipeline_equals_host_in_order(data_dir, streams, batch, depth):
    # 45 frames: the last batch is partial; colour, so every channel counts
    frames = [convert(f, "bgr", np.uint8) for f in iter_frames(data_dir, "traffic", 45)]
    gpu = fastmog.BackgroundSubtractorMOG2()
    host = fastmog.cpu.BackgroundSubtractorMOG2()
    got = [m.copy() for m in fastmog.pipeline(gpu, iter(frames), streams=streams, depth=depth,
                                              batch=batch)]
    assert len(got) == len(frames)
    for i, (g, f) in enumerate(zip(got, frames)):
        assert np.array_equal(g, host.apply(f)), f"frame {i}"
    assert gpu.frame_count == host.frame_count == len(frames)


@pytest.mark.parametrize("download, margin", [(True, None), (False, None), (True, 0.0)])
def test_an_automatic_batch_times_its_launches_and_keeps_the_masks(data_dir, streams, download,
                                                                     margin, monkeypatch):
    """batch="auto" changes K between launches as it measures: the masks stay
    the host's, in order, and the choice is made from launches it timed.
    margin 0: no kernel is under the copies, so every K is tried."""
    if margin is not None:
        monkeypatch.setattr(fastmog._auto_batch, "MARGIN", margin)
    frames = [convert(f, "grey", np.uint8) for f in iter_frames(data_dir, "CAVIAR2", 200)]
    gpu = fastmog.BackgroundSubtractorMOG2()
    host = fastmog.cpu.BackgroundSubtractorMOG2()
    auto = AutoBatch()
    compute = streams[1]
    got = []
    for m in fastmog._pipeline.pipeline(gpu, iter(frames), streams=streams, batch=auto,
                                        download=download):
        got.append(m.copy() if download else m.download(stream=compute))
    assert len(got) == len(frames)
    for i, (g, f) in enumerate(zip(got, frames)):
        assert np.array_equal(g, host.apply(f)), f"frame {i}"
    assert auto.chosen in CANDIDATES, auto.describe()
    if margin == 0.0:
        assert sorted(auto.kernel) == list(CANDIDATES)
    assert auto.copies and all(t > 0 for t in auto.copies)
    assert all(t > 0 for times in auto.kernel.values() for t in times)


@pytest.mark.parametrize("batch, depth", [(1, 2), (4, 2)])
def test_without_download_the_device_masks_are_handed_out(data_dir, streams, batch, depth):
    # Each device mask is copied on the compute stream, where the ring
    # rewrites it later: a rewrite out of that order would show in the copies.
    frames = [convert(f, "grey", np.uint8) for f in iter_frames(data_dir, "CAVIAR2", 30)]
    gpu = fastmog.BackgroundSubtractorMOG2()
    host = fastmog.cpu.BackgroundSubtractorMOG2()
    compute = streams[1]
    copies = []
    with fastmog.profile() as prof:
        for m in fastmog.pipeline(gpu, iter(frames), streams=streams, depth=depth, batch=batch,
                                  download=False):
            assert isinstance(m, fastmog.GpuMat) and m.shape == frames[0].shape
            copy = fastmog.GpuMat(m.shape)
            m.copy_to(copy, stream=compute)
            copies.append(copy)
    names = {r.name for r in prof.records}
    assert "BackgroundSubtractorMOG2.apply" in names or \
        "BackgroundSubtractorMOG2.apply_batch" in names
    assert "GpuMat.download" not in names        # nothing left the GPU
    assert len(copies) == len(frames)
    for i, (c, f) in enumerate(zip(copies, frames)):
        assert np.array_equal(c.download(stream=compute), host.apply(f)), f"frame {i}"


def test_pipeline_rejects_bad_use(rng, streams):
    gpu = fastmog.BackgroundSubtractorMOG2()
    frames = [random_image(rng, (16, 16), np.uint8), random_image(rng, (16, 17), np.uint8)]
    with pytest.raises(ValueError, match="frame 1"):
        list(fastmog.pipeline(gpu, frames, streams=streams))
    with pytest.raises(TypeError, match="three"):
        list(fastmog.pipeline(gpu, frames, streams=streams[0]))
    for batch in (0, 1.5, True, "fast"):
        with pytest.raises(ValueError, match="batch"):
            list(fastmog.pipeline(gpu, frames, streams=streams, batch=batch))


def test_many_cameras_as_one_tall_frame(rng):
    """N models of the same size updated by one launch: stack the frames
    vertically. Each pixel's model is independent, so this equals N separate
    subtractors fed in lockstep."""
    n, h, w = 8, 48, 64
    stacked = fastmog.BackgroundSubtractorMOG2()
    separate = [fastmog.BackgroundSubtractorMOG2() for _ in range(n)]
    with fastmog.Stream() as s:
        base = random_image(rng, (n, h, w, 3), np.uint8)
        for t in range(20):
            frames = np.clip(base + rng.integers(-8, 9, base.shape), 0, 255).astype(np.uint8)
            tall = stacked.apply(frames.reshape(n * h, w, 3), stream=s).download(stream=s)
            for k in range(n):
                alone = separate[k].apply(frames[k], stream=s).download(stream=s)
                assert np.array_equal(tall[k * h:(k + 1) * h], alone), (t, k)
