"""Snapshots of a MOG2 model (issue 24, item 4): restoring one and going on
gives exactly the masks of the run that never stopped, on the host and the
GPU and across them; a file is written whole or not at all; a snapshot of
another format, version or geometry, or a damaged one, is refused with a
clear error."""
import copy
import os

import numpy as np
import pytest

import fastmog
from conftest import random_image

Host = fastmog.cpu.BackgroundSubtractorMOG2
gpu = pytest.mark.gpu

PARAMS = {"history": 12, "var_threshold": 9.5, "n_mixtures": 3, "background_ratio": 0.8,
          "var_init": 11.0, "shadow_value": 90}


def _frames(rng, n, shape, dtype=np.uint8):
    """A scene that moves: noise over a block that walks, so models differ
    pixel by pixel and some pixels hold several modes."""
    base = random_image(rng, shape, dtype)
    out = []
    for i in range(n):
        f = base.copy()
        f[4:12, 2 * i % (shape[1] - 8):2 * i % (shape[1] - 8) + 8] = 200 if dtype == np.uint8 \
            else 0.8
        noise = rng.integers(-6, 7, shape).astype(np.int16)
        if dtype == np.uint8:
            f = np.clip(f.astype(np.int16) + noise, 0, 255).astype(np.uint8)
        else:
            f = (f + noise.astype(np.float32) / 255).astype(np.float32)
        out.append(f)
    return out


def _same_model(a, b):
    """Two snapshots alike bit for bit: every value, stale modes too."""
    assert {k: v for k, v in a.items() if not isinstance(v, np.ndarray)} == \
        {k: v for k, v in b.items() if not isinstance(v, np.ndarray)}
    for k in ("weight", "variance", "mean", "mode_count"):
        np.testing.assert_array_equal(a[k].view(np.uint8), b[k].view(np.uint8), err_msg=k)


@pytest.mark.parametrize("shape", [(24, 32), (24, 32, 3), (24, 32, 4)], ids=["grey", "bgr",
                                                                             "bgra"])
@pytest.mark.parametrize("at", [1, 5, 30])          # before history (12), and after it
@pytest.mark.parametrize("params", [{}, PARAMS], ids=["defaults", "tuned"])
def test_host_restore_then_on_equals_the_run_that_never_stopped(rng, shape, at, params):
    frames = _frames(rng, at + 15, shape)
    whole, first = Host(**params), Host(**params)
    want = [whole.apply(f).copy() for f in frames]
    for f in frames[:at]:
        first.apply(f)
    snap = first.snapshot()
    assert snap["frames_seen"] == at and snap["version"] == 1
    restored = Host.restore(snap)
    got = [restored.apply(f).copy() for f in frames[at:]]
    for k, (g, w) in enumerate(zip(got, want[at:])):
        np.testing.assert_array_equal(g, w, err_msg=f"frame {at + k}")
    np.testing.assert_array_equal(restored.get_background_image(), whole.get_background_image())
    assert restored.frame_count == whole.frame_count
    _same_model(restored.snapshot(), whole.snapshot())
    assert all(getattr(restored, k) == getattr(first, k) for k in PARAMS)


@pytest.mark.parametrize("shape", [(24, 32), (24, 32, 3)], ids=["grey", "bgr"])
def test_modes_a_pixel_no_longer_has_are_zero_in_a_snapshot(rng, shape):
    """So one model's snapshots are equal byte for byte wherever it ran: the
    GPU kernel stores only the modes in use, the host also a dropped mode's
    weight, and once their stale slots made GPU and host snapshots differ."""
    sub = Host(**PARAMS)
    counts = []
    for f in _frames(rng, 40, shape):
        sub.apply(f)
        counts.append(sub.snapshot()["mode_count"])
    snap = sub.snapshot()
    # pixels that had more modes than they have now: some dropped one
    assert (np.max(counts, axis=0) > snap["mode_count"]).any()
    stale = np.arange(PARAMS["n_mixtures"])[:, None, None] >= snap["mode_count"]
    assert (snap["weight"][stale] == 0).all() and (snap["variance"][stale] == 0).all()
    assert (np.moveaxis(snap["mean"], 1, -1)[stale] == 0).all()
    assert (snap["variance"][~stale] > 0).all()        # and the modes in use are kept


def test_host_restore_across_apply_batch_and_float_frames(rng):
    frames = _frames(rng, 24, (20, 28, 3), np.float32)
    whole, first = Host(), Host()
    want = whole.apply_batch(frames)
    first.apply_batch(frames[:9])
    restored = Host.restore(first.snapshot())
    np.testing.assert_array_equal(restored.apply_batch(frames[9:]), want[9:])
    assert restored.snapshot()["geometry"]["is_float"] is True


def test_host_restore_under_apply_cameras(rng):
    cams = [_frames(rng, 14, (16, 24)), _frames(rng, 14, (20, 20, 3))]
    whole = [Host(), Host(history=7)]
    want = [fastmog.cpu.apply_cameras(whole, [c[i] for c in cams]) for i in range(14)]
    first = [Host(), Host(history=7)]
    for i in range(6):
        fastmog.cpu.apply_cameras(first, [c[i] for c in cams])
    restored = [Host.restore(s.snapshot()) for s in first]
    for i in range(6, 14):
        got = fastmog.cpu.apply_cameras(restored, [c[i] for c in cams])
        for g, w in zip(got, want[i]):
            np.testing.assert_array_equal(g, w)


def test_a_file_round_trip_is_exact_and_written_whole(rng, tmp_path):
    sub = Host(**PARAMS)
    for f in _frames(rng, 8, (24, 32, 3)):
        sub.apply(f)
    snap = sub.snapshot()
    path = tmp_path / "model.npz"
    fastmog.save_snapshot(path, snap)
    assert os.listdir(tmp_path) == ["model.npz"]           # no partial file left behind
    back = fastmog.load_snapshot(path)
    assert {k: v for k, v in back.items() if not isinstance(v, np.ndarray)} == \
        {k: v for k, v in snap.items() if not isinstance(v, np.ndarray)}
    for k in ("weight", "variance", "mean", "mode_count"):
        assert back[k].dtype == snap[k].dtype
        np.testing.assert_array_equal(back[k], snap[k])
    frame = _frames(rng, 1, (24, 32, 3))[0]
    np.testing.assert_array_equal(Host.restore(back).apply(frame), sub.apply(frame))


def test_a_failed_write_leaves_the_old_file(rng, tmp_path, monkeypatch):
    sub = Host()
    sub.apply(_frames(rng, 1, (16, 16))[0])
    path = tmp_path / "model.npz"
    fastmog.save_snapshot(path, sub.snapshot())
    before = path.read_bytes()

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", full_disk)
    with pytest.raises(OSError):
        fastmog.save_snapshot(path, sub.snapshot())
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["model.npz"]


@pytest.fixture
def snap(rng):
    sub = Host(n_mixtures=3)
    for f in _frames(rng, 6, (12, 16, 3)):
        sub.apply(f)
    return sub.snapshot()


def _damaged(snap, change):
    s = copy.deepcopy(snap)
    change(s)
    return s


@pytest.mark.parametrize("change, error, says", [
    (lambda s: s.update(format="opencv.mog2"), ValueError, "not a fastmog MOG2 snapshot"),
    (lambda s: s.update(version=2), ValueError, "a version 2 snapshot"),
    (lambda s: s.pop("mean"), ValueError, "lacks \"mean\""),
    (lambda s: s.pop("frames_seen"), ValueError, "lacks \"frames_seen\""),
    (lambda s: s.update(frames_seen=-1), ValueError, "frames_seen must be from 0"),
    (lambda s: s.update(frames_seen=True), TypeError, "frames_seen must be an int"),
    (lambda s: s.update(frames_seen=2**31), ValueError, "frames_seen must be from 0 to "
     "2147483647"),
    (lambda s: s["geometry"].update(width=17), ValueError, "does not have the shape"),
    (lambda s: s["geometry"].update(channels=2), ValueError, "channels must be 1, 3 or 4"),
    (lambda s: s["geometry"].update(n_mixtures=9), ValueError, "n_mixtures must be from 1"),
    (lambda s: s["geometry"].pop("is_float"), ValueError, "lacks \"is_float\""),
    (lambda s: s.update(weight=s["weight"].astype(np.float64)), TypeError,
     "weight must be a float32"),
    (lambda s: s.update(mean=s["mean"][:, :, :, ::-1]), ValueError, "C-contiguous"),
    (lambda s: s["mode_count"].__setitem__((3, 4), 4), ValueError, "more than its 3 modes"),
    (lambda s: s["parameters"].pop("var_max"), ValueError, "lack \"var_max\""),
    (lambda s: s["parameters"].update(colour=1), ValueError, "does not have"),
    (lambda s: s["parameters"].update(history=0), ValueError, "history"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_damaged_or_mismatched_snapshots_are_refused(snap, change, error, says):
    bad = _damaged(snap, change)
    with pytest.raises(error) as e:
        Host.restore(bad)
    assert says in str(e.value), str(e.value)


def test_only_a_snapshot_dict_is_taken():
    with pytest.raises(TypeError, match="a snapshot is the dict"):
        Host.restore([1, 2])


@pytest.mark.parametrize("damage", ["truncated", "bit flipped", "not a zip", "no meta"])
def test_damaged_files_are_refused_naming_the_file(rng, tmp_path, snap, damage):
    path = tmp_path / "model.npz"
    fastmog.save_snapshot(path, snap)
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        data = data[:len(data) // 2]
    elif damage == "bit flipped":
        at = data.index(b"weight.npy") + 200   # inside the weights' stored bytes
        data[at] ^= 0x10
    elif damage == "not a zip":
        data = b"hello" * 20
    else:
        np.savez(path, **{k: snap[k] for k in ("weight", "variance", "mean", "mode_count")})
        data = path.read_bytes()
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError) as e:
        Host.restore(fastmog.load_snapshot(path))
    assert str(path) in str(e.value) and "not a whole fastmog MOG2 snapshot" in str(e.value)


def test_no_model_yet_is_a_clear_error():
    with pytest.raises(ValueError, match="no model yet"):
        Host().snapshot()


# ---- the GPU -------------------------------------------------------------------------------


@gpu
@pytest.mark.parametrize("shape", [(24, 32), (23, 29), (24, 32, 3), (21, 19, 3), (17, 13, 4)],
                         ids=["grey", "grey-last-tile-part", "bgr", "bgr-last-tile-part",
                              "bgra-last-tile-part"])
@pytest.mark.parametrize("at", [1, 5, 30])
def test_gpu_host_and_back_all_give_the_uninterrupted_masks(rng, stream, shape, at):
    """The GPU keeps its model in tiles of 32 pixels, a snapshot in planes:
    both ways are exact, a frame whose pixels do not fill the last tile too."""
    frames = _frames(rng, at + 10, shape)
    whole = Host(**PARAMS)
    want = [whole.apply(f).copy() for f in frames]
    g = fastmog.BackgroundSubtractorMOG2(**PARAMS)
    for f in frames[:at]:
        g.apply(f, stream=stream)
    snap_gpu = g.snapshot(stream=stream)
    h = Host(**PARAMS)
    for f in frames[:at]:
        h.apply(f)
    snap_host = h.snapshot()
    _same_model(snap_gpu, snap_host)                            # the same model, bit for bit
    gpu_from_gpu = fastmog.BackgroundSubtractorMOG2.restore(snap_gpu, stream=stream)
    gpu_from_host = fastmog.BackgroundSubtractorMOG2.restore(snap_host, stream=stream)
    host_from_gpu = Host.restore(snap_gpu)
    for i, f in enumerate(frames[at:]):
        w = want[at + i]
        np.testing.assert_array_equal(gpu_from_gpu.apply(f, stream=stream).download(
            stream=stream), w)
        np.testing.assert_array_equal(gpu_from_host.apply(f, stream=stream).download(
            stream=stream), w)
        np.testing.assert_array_equal(host_from_gpu.apply(f), w)


@gpu
@pytest.mark.parametrize("modes", [1, 8])
@pytest.mark.parametrize("shape", [(23, 29), (21, 19, 3), (17, 13, 4)],
                         ids=["grey", "bgr", "bgra"])
def test_gpu_tiles_of_one_and_eight_modes_match_the_host(rng, stream, shape, modes):
    """A tile's size and where its slots sit depend on the mode count, and
    more than 5 modes run kernels of their own: with 1 and 8 modes too, the
    GPU's model comes out as the host's, bit for bit, and the host's goes in
    and gives the uninterrupted masks."""
    params = dict(PARAMS, n_mixtures=modes)
    frames = _frames(rng, 40, shape)
    whole = Host(**params)
    want = [whole.apply(f).copy() for f in frames]
    g, h = fastmog.BackgroundSubtractorMOG2(**params), Host(**params)
    for f in frames[:30]:
        g.apply(f, stream=stream)
        h.apply(f)
    _same_model(g.snapshot(stream=stream), h.snapshot())
    restored = fastmog.BackgroundSubtractorMOG2.restore(h.snapshot(), stream=stream)
    for i, f in enumerate(frames[30:]):
        np.testing.assert_array_equal(restored.apply(f, stream=stream).download(stream=stream),
                                      want[30 + i], err_msg=f"frame {30 + i}")


@gpu
def test_gpu_snapshot_waits_for_work_on_other_streams(rng):
    """The snapshot is taken after what is queued on the model elsewhere."""
    frames = _frames(rng, 40, (256, 256, 3))
    host = Host()
    for f in frames:
        host.apply(f)
    with fastmog.Stream() as work, fastmog.Stream() as other:
        g = fastmog.BackgroundSubtractorMOG2()
        dev = [fastmog.GpuMat.from_array(f, stream=work) for f in frames]
        for f in dev:
            g.apply(f, stream=work)
        snap = g.snapshot(stream=other)
    np.testing.assert_array_equal(snap["mode_count"], host.snapshot()["mode_count"])
    assert snap["frames_seen"] == 40


@gpu
def test_gpu_restore_across_apply_batch_and_apply_cameras(rng, stream):
    frames = _frames(rng, 20, (24, 32, 3))
    whole = Host()
    want = [whole.apply(f).copy() for f in frames]
    g = fastmog.BackgroundSubtractorMOG2()
    g.apply_batch([fastmog.GpuMat.from_array(f, stream=stream) for f in frames[:8]],
                  stream=stream)
    r = fastmog.BackgroundSubtractorMOG2.restore(g.snapshot(stream=stream), stream=stream)
    for i in range(8, 20):
        mask, = fastmog.apply_cameras([r], [frames[i]], stream=stream)
        np.testing.assert_array_equal(mask.download(stream=stream), want[i])


@gpu
@pytest.mark.parametrize("shape", [(24, 32), (24, 32, 3)], ids=["grey", "bgr"])
def test_gpu_never_uses_what_the_slots_past_a_pixels_mode_count_hold(rng, stream, shape):
    """The kernel reads every weight slot of a model before it knows how many
    modes a pixel uses (one round trip to memory, not two), and a pass over
    several frames every slot's variance and means too: NaN in the slots
    past each pixel's count changes no mask and no mode in use, through
    apply, a pass over several frames and apply_cameras."""
    frames = _frames(rng, 34, shape)
    host = Host(**PARAMS)
    for f in frames[:10]:
        host.apply(f)
    poisoned = host.snapshot()
    stale = np.arange(PARAMS["n_mixtures"])[:, None, None] >= poisoned["mode_count"]
    assert stale.any() and not stale.all()
    poisoned["weight"][stale] = np.nan
    poisoned["variance"][stale] = np.nan
    np.moveaxis(poisoned["mean"], 1, -1)[stale] = np.nan    # a view: writes through
    g = fastmog.BackgroundSubtractorMOG2.restore(poisoned, stream=stream)
    want = [host.apply(f).copy() for f in frames[10:]]
    # each downloaded at once: the next call writes the subtractor's mask again
    got = [g.apply(f, stream=stream).download(stream=stream) for f in frames[10:14]]
    got += [m.download(stream=stream) for m in g.apply_batch(
        [fastmog.GpuMat.from_array(f, stream=stream) for f in frames[14:30]], stream=stream)]
    got += [fastmog.apply_cameras([g], [f], stream=stream)[0].download(stream=stream)
            for f in frames[30:]]
    assert len(got) == len(want)
    for i, (m, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(m, w, err_msg=f"frame {10 + i}")
    _same_model(g.snapshot(stream=stream), host.snapshot())


@gpu
def test_gpu_restore_refuses_before_allocating(snap, stream):
    before = fastmog.memory_stats()
    bad = copy.deepcopy(snap)
    bad["mode_count"][0, 0] = 9
    with pytest.raises(ValueError, match="more than its 3 modes"):
        fastmog.BackgroundSubtractorMOG2.restore(bad, stream=stream)
    with pytest.raises(TypeError, match="stream= is required"):
        fastmog.BackgroundSubtractorMOG2.restore(snap)
    assert fastmog.memory_stats() == before
