"""apply_batch and apply_cameras on the GPU, bit for bit: the masks,
background and mode counts of K (N) GPU apply() calls and of the host
reference's apply_batch (apply_cameras), for every form of frames they take;
bad input raises before any work and leaves every model as it was."""
import numpy as np
import pytest

import fastmog
from conftest import random_image
from fastmog.testing import convert, iter_frames
from test_batch import (CAMERAS, RANDOM, camera_frames, known_masks, named_argument_cases,
                        noisy_frames)

pytestmark = pytest.mark.gpu


def download(masks, stream):
    """The masks of one call, on the host, once the stream has done them."""
    stream.synchronize()
    return [m.download(stream=stream) for m in masks]


def padded_view(frame, stream):
    """The frame as a view inside a larger GpuMat: rows pitched, not continuous."""
    big = np.zeros((frame.shape[0] + 4, frame.shape[1] + 6, *frame.shape[2:]), frame.dtype)
    big[2:-2, 3:-3] = frame
    return fastmog.GpuMat.from_array(big, stream=stream)[2:-2, 3:-3]


def device_forms(frames, j, stream):
    """Batch j as the GPU takes it, in turn: a host stack, a list of host
    frames, a list of GpuMats, a tuple of GpuMat views."""
    form = j % 4
    if form == 0:
        return np.stack(frames)
    if form == 1:
        return list(frames)
    if form == 2:
        return [fastmog.GpuMat.from_array(f, stream=stream) for f in frames]
    return tuple(padded_view(f, stream) for f in frames)


def on_device(known, stream):
    """Known-foreground entries as GpuMats where the index is odd."""
    if known is None:
        return None
    return [k if k is None or i % 2 == 0 else fastmog.GpuMat.from_array(k, stream=stream)
            for i, k in enumerate(known)]


class GpuTrio:
    """apply_batch on one GPU subtractor, apply() frame by frame on a second,
    apply_batch of the host reference on the same frames."""

    def __init__(self, kwargs, stream):
        self.batch = fastmog.BackgroundSubtractorMOG2(**kwargs)
        self.loop = fastmog.BackgroundSubtractorMOG2(**kwargs)
        self.host = fastmog.cpu.BackgroundSubtractorMOG2(**kwargs)
        self.stream = stream

    def step(self, device_frames, host_frames, lr=-1.0, known=None, host_known=None,
             fgmasks=None):
        s, k = self.stream, len(host_frames)
        masks = self.batch.apply_batch(device_frames, lr, stream=s, fgmasks=fgmasks,
                                       known_foreground=known)
        assert isinstance(masks, tuple) and len(masks) == k
        if fgmasks is not None:
            assert all(a is b for a, b in zip(masks, fgmasks))
        assert all(m.shape == host_frames[0].shape[:2] and m.dtype == np.uint8 for m in masks)
        got = download(masks, s)
        want = self.host.apply_batch(host_frames, lr, known_foreground=host_known)
        for i in range(k):
            assert np.array_equal(got[i], want[i]), \
                f"frame {i} of {k}: {np.count_nonzero(got[i] != want[i])} pixels differ from the host"
            kf = None if host_known is None else host_known[i]
            one = self.loop.apply(host_frames[i], lr, stream=s, known_foreground=kf)
            assert np.array_equal(one.download(stream=s), want[i]), f"frame {i} of {k}: apply()"
        assert self.batch.frame_count == self.loop.frame_count == self.host.frame_count
        return got

    def check_model(self):
        s = self.stream
        for sub in (self.batch, self.loop):
            assert np.array_equal(sub.mode_counts().download(stream=s), self.host.mode_counts())
            background = sub.get_background_image(stream=s).download(stream=s)
            assert np.array_equal(background, self.host.get_background_image())


# id: (sequence, colour, dtype, constructor kwargs, K, frames)
REAL_GPU = {
    "traffic-grey-K8": ("traffic", "grey", np.uint8, {}, 8, 40),
    "traffic-bgr-float32-K17": ("traffic", "bgr", np.float32, {}, 17, 40),
    "traffic-bgra-noshadow-K3": ("traffic", "bgra", np.uint8,
                                 {"n_mixtures": 4, "detect_shadows": False}, 3, 24),
    "vtest-bgr-K16": ("vtest", "bgr", np.uint8, {}, 16, 40),
}


@pytest.mark.parametrize("case", list(REAL_GPU))
def test_gpu_batch_on_real_sequences(data_dir, stream, case):
    sequence, colour, dtype, kwargs, k, limit = REAL_GPU[case]
    frames = [convert(f, colour, dtype) for f in iter_frames(data_dir, sequence, limit)]
    assert len(frames) == limit
    trio = GpuTrio(kwargs, stream)
    for j, start in enumerate(range(0, limit, k)):
        chunk = frames[start:start + k]
        trio.step(device_forms(chunk, j, stream), chunk)
    trio.check_model()
    assert trio.batch.frame_count == limit


@pytest.mark.parametrize("colour", ["grey", "bgr"])
def test_gpu_batch_squares_cut_by_the_frame_edges(data_dir, stream, colour):
    # A pass's warps take squares of 8x4 pixels (cuda/mog2.cu); cut to 237x301
    # the clip leaves squares of 5 columns at the right edge and of 1 row at
    # the bottom, whose pixels mostly fit their first mode (the short path).
    frames = [np.ascontiguousarray(convert(f, colour, np.uint8)[:237, :301])
              for f in iter_frames(data_dir, "traffic", 48)]
    assert len(frames) == 48
    trio = GpuTrio({}, stream)
    for j, start in enumerate(range(0, 48, 16)):
        chunk = frames[start:start + 16]
        trio.step(device_forms(chunk, j, stream), chunk)
    trio.check_model()


@pytest.mark.parametrize(("k", "channels", "dtype", "shadows"), [
    pytest.param(*p, id=f"K{p[0]}-{p[1]}ch-{np.dtype(p[2]).name}-{'shadows' if p[3] else 'noshadows'}")
    for p in RANDOM])
def test_gpu_batch_on_random_frames(rng, stream, k, channels, dtype, shadows):
    shape = (37, 53) if channels == 1 else (37, 53, channels)
    trio = GpuTrio(dict(n_mixtures=1 + channels, detect_shadows=shadows, history=25), stream)
    frames = noisy_frames(rng, shape, dtype, (3 if k < 16 else 2) * k + 5)
    rates = [-1.0, 1.0, 0.0, 0.02, -1.0, 0.3]  # automatic, restarts, frozen, fixed
    for j, start in enumerate(range(0, len(frames), k)):
        chunk = frames[start:start + k]
        known = known_masks(rng, len(chunk), shape[:2]) if j % 2 else None
        trio.step(device_forms(chunk, j, stream), chunk, rates[j % len(rates)],
                  on_device(known, stream), known)
    trio.check_model()


def test_gpu_batch_of_cupy_arrays(rng, stream):
    cp = pytest.importorskip("cupy")
    for shape, dtype in [((8, 45, 60), np.uint8), ((5, 30, 41, 3), np.float32)]:
        trio = GpuTrio({}, stream)
        for j in range(4):
            host = noisy_frames(rng, shape[1:], dtype, shape[0])
            stack = cp.asarray(np.stack(host))  # one (K, H, W[, C]) device array
            trio.step(stack if j % 2 == 0 else [stack[i] for i in range(shape[0])], host)
        trio.check_model()


def test_gpu_batch_fills_caller_masks_and_reuses_its_own(rng, stream):
    shape = (40, 64, 3)
    trio = GpuTrio({}, stream)
    frames = noisy_frames(rng, shape, np.uint8, 16)
    # the caller's masks: two plain, two views side by side inside a larger
    # GpuMat, whose pixels around them must stay as they were
    around = fastmog.GpuMat((50, 150), np.uint8)
    around.fill(77, stream=stream)
    out = [fastmog.GpuMat((40, 64), np.uint8), around[5:45, 5:69], around[5:45, 80:144],
           fastmog.GpuMat((40, 64), np.uint8)]
    trio.step(frames[:4], frames[:4], fgmasks=out)
    trio.step(tuple(frames[4:8]), frames[4:8], fgmasks=tuple(out))
    border = around.download(stream=stream)
    border[5:45, 5:69] = border[5:45, 80:144] = 77
    assert (border == 77).all()
    # its own masks: K distinct views over one buffer, the same one next time
    first = trio.step(frames[8:12], frames[8:12])
    mine = trio.batch.apply_batch(frames[12:16], stream=stream)
    again = trio.batch.apply_batch(frames[12:16], stream=stream)
    assert len({m.ptr for m in mine}) == 4
    assert [m.ptr for m in again] == [m.ptr for m in mine]
    assert len(first) == 4 and first[0].shape == (40, 64)


def test_gpu_batch_after_apply_and_apply_after_batch(rng, stream):
    shape = (30, 44, 3)
    gpu = fastmog.BackgroundSubtractorMOG2(history=12)
    host = fastmog.cpu.BackgroundSubtractorMOG2(history=12)
    frames = noisy_frames(rng, shape, np.uint8, 40)

    def same(got, want):
        assert np.array_equal(got, want)
        assert gpu.frame_count == host.frame_count

    for f in frames[:3]:
        same(gpu.apply(f, stream=stream).download(stream=stream), host.apply(f))
    same(download(gpu.apply_batch(frames[3:8], stream=stream), stream),
         host.apply_batch(frames[3:8]))
    for f in frames[8:10]:
        same(gpu.apply(f, stream=stream).download(stream=stream), host.apply(f))
    same(download(gpu.apply_batch(np.stack(frames[10:27]), stream=stream), stream),
         host.apply_batch(frames[10:27]))
    assert gpu.frame_count == 27
    grey = [convert(f, "grey", np.uint8) for f in frames[27:34]]  # a new geometry restarts
    same(download(gpu.apply_batch(grey, stream=stream), stream), host.apply_batch(grey))
    assert gpu.frame_count == 7
    bg = gpu.get_background_image(stream=stream).download(stream=stream)
    assert np.array_equal(bg, host.get_background_image())


def test_gpu_empty_batch_and_no_cameras(rng, stream):
    gpu = fastmog.BackgroundSubtractorMOG2()
    frame = random_image(rng, (16, 24), np.uint8)
    gpu.apply(frame, stream=stream)
    assert gpu.apply_batch([], stream=stream) == ()
    assert gpu.apply_batch(np.zeros((0, 16, 24), np.uint8), stream=stream) == ()
    assert gpu.frame_count == 1
    assert fastmog.apply_cameras([], [], stream=stream) == ()


def test_gpu_cameras_equal_apply_calls_and_the_host(rng, stream):
    n = len(CAMERAS)
    subs = [fastmog.BackgroundSubtractorMOG2(**kw) for _, _, kw in CAMERAS]
    loops = [fastmog.BackgroundSubtractorMOG2(**kw) for _, _, kw in CAMERAS]
    hosts = [fastmog.cpu.BackgroundSubtractorMOG2(**kw) for _, _, kw in CAMERAS]
    per_camera = [-1.0, 0.1, 0.0, 1.0, -1.0, 0.02]
    own = None
    for r, frames in enumerate(camera_frames(rng, 20)):
        rate = [-1.0, per_camera[r % n:] + per_camera[:r % n], 0.05,
                tuple(per_camera[::-1])][r % 4]
        rates = rate if isinstance(rate, (list, tuple)) else [rate] * n
        # numpy, GpuMat and GpuMat views side by side
        device = [f if i % 3 == 0 else fastmog.GpuMat.from_array(f, stream=stream) if i % 3 == 1
                  else padded_view(f, stream) for i, f in enumerate(frames)]
        known = (None if r % 3 == 0 else
                 [None if (i + r) % 2 else known_masks(rng, 1, f.shape[:2])[0]
                  for i, f in enumerate(frames)])
        fgmasks = ([fastmog.GpuMat(f.shape[:2], np.uint8) for f in frames] if r % 5 == 4
                   else None)
        masks = fastmog.apply_cameras(subs, device, rate, stream=stream, fgmasks=fgmasks,
                                      known_foreground=on_device(known, stream))
        assert isinstance(masks, tuple) and len(masks) == n
        if fgmasks is not None:
            assert all(a is b for a, b in zip(masks, fgmasks))
        elif own is None:
            own = masks
        else:  # each subtractor's own mask, reused
            assert all(a is b for a, b in zip(masks, own))
        got = download(masks, stream)
        want = fastmog.cpu.apply_cameras(hosts, frames, rate, known_foreground=known)
        for i in range(n):
            kf = None if known is None else known[i]
            one = loops[i].apply(frames[i], rates[i], stream=stream, known_foreground=kf)
            assert np.array_equal(got[i], want[i]), f"round {r}, camera {i}: host"
            assert np.array_equal(one.download(stream=stream), want[i]), f"round {r}, camera {i}"
            assert subs[i].frame_count == loops[i].frame_count == hosts[i].frame_count
    for sub, host in zip(subs, hosts):
        assert np.array_equal(sub.mode_counts().download(stream=stream), host.mode_counts())
        bg = sub.get_background_image(stream=stream).download(stream=stream)
        assert np.array_equal(bg, host.get_background_image())
    # the mask apply_cameras returned is the one the subtractor's apply() reuses
    assert subs[0].apply(camera_frames(rng, 1)[0][0], stream=stream) is own[0]


@pytest.mark.parametrize("size", [pytest.param((48, 64), id="64-cameras-64x48"),
                                  pytest.param((480, 640), id="64-cameras-640x480",
                                               marks=pytest.mark.slow)])
def test_gpu_64_cameras(rng, stream, size):
    n, rounds = 64, 4
    shapes = [size if i % 2 else (*size, 3) for i in range(n)]  # grey and BGR alternate
    subs = [fastmog.BackgroundSubtractorMOG2() for _ in range(n)]
    loops = [fastmog.BackgroundSubtractorMOG2() for _ in range(n)]
    sets = [[fastmog.GpuMat.from_array(random_image(rng, shape, np.uint8), stream=stream)
             for shape in shapes] for _ in range(2)]
    for r in range(rounds):
        frames = sets[r % 2]
        got = download(fastmog.apply_cameras(subs, frames, stream=stream), stream)
        for i in range(n):
            want = loops[i].apply(frames[i], stream=stream).download(stream=stream)
            assert np.array_equal(got[i], want), f"round {r}, camera {i}"
    assert all(s.frame_count == rounds for s in subs)


def test_gpu_cameras_beyond_one_launch_of_several_kinds(rng, stream):
    # 70 cameras: two launches (64 per launch), every kind of frame in the
    # same launch, and some with 7 modes (the 8-mode kernels) among 5-mode ones
    kinds = [((20, 36), np.uint8), ((17, 29, 3), np.uint8), ((9, 40, 4), np.uint8),
             ((23, 21, 3), np.float32), ((40, 8), np.float32)]
    n = 70
    shapes = [kinds[i % len(kinds)] for i in range(n)]
    params = [{"n_mixtures": 7} if i % 3 == 0 else {} for i in range(n)]
    subs = [fastmog.BackgroundSubtractorMOG2(**p) for p in params]
    hosts = [fastmog.cpu.BackgroundSubtractorMOG2(**p) for p in params]
    rates = [-1.0 if i % 4 else 0.05 for i in range(n)]
    for r in range(6):
        frames = [random_image(rng, shape, dtype) for shape, dtype in shapes]
        got = download(fastmog.apply_cameras(subs, frames, rates, stream=stream), stream)
        want = fastmog.cpu.apply_cameras(hosts, frames, rates)
        for i in range(n):
            assert np.array_equal(got[i], want[i]), f"round {r}, camera {i}"


# The launch takes a block's camera and tile from its grid only where every
# camera has one size; else each block searches where the cameras' blocks
# start. Cases: as many blocks of 32x4 pixels from other shapes; counts whose
# sum divides evenly though they differ; counts that start where equal ones
# would, the last larger; 70 cameras of one size, in two launches; cameras of
# one size whose last tiles are partial both ways.
@pytest.mark.parametrize("shapes", [
    pytest.param([(64, 32), (32, 64), (16, 128)], id="same-count-other-shapes"),
    pytest.param([(40, 32), (80, 32), (120, 32)], id="10-20-30-blocks"),
    pytest.param([(40, 32), (40, 32), (48, 32)], id="10-10-12-blocks"),
    pytest.param([(8, 40)] * 70, id="70-cameras-of-4-blocks"),
    pytest.param([(10, 40)] * 3, id="one-size-partial-tiles"),
])
def test_gpu_cameras_found_by_their_blocks(rng, stream, shapes):
    subs = [fastmog.BackgroundSubtractorMOG2() for _ in shapes]
    hosts = [fastmog.cpu.BackgroundSubtractorMOG2() for _ in shapes]
    for r in range(4):
        frames = [random_image(rng, shape, np.uint8) for shape in shapes]
        got = download(fastmog.apply_cameras(subs, frames, stream=stream), stream)
        want = fastmog.cpu.apply_cameras(hosts, frames)
        for i, shape in enumerate(shapes):
            assert np.array_equal(got[i], want[i]), f"round {r}, camera {i} {shape}"
    for sub, host in zip(subs, hosts):
        assert np.array_equal(sub.mode_counts().download(stream=stream), host.mode_counts())


def assert_same_gpu_model(sub, twin, rng, stream, shape):
    """sub and twin (which never saw the refused calls) agree from here on."""
    assert sub.frame_count == twin.frame_count
    frames = noisy_frames(rng, shape, np.uint8, 3)
    for f in frames:
        a = sub.apply(f, stream=stream).download(stream=stream)
        assert np.array_equal(a, twin.apply(f, stream=stream).download(stream=stream))
    bg = sub.get_background_image(stream=stream).download(stream=stream)
    assert np.array_equal(bg, twin.get_background_image(stream=stream).download(stream=stream))


def test_gpu_batch_bad_input_changes_nothing(rng, stream):
    shape = (24, 32, 3)
    gpu = fastmog.BackgroundSubtractorMOG2()
    twin = fastmog.BackgroundSubtractorMOG2()
    for f in noisy_frames(rng, shape, np.uint8, 3):
        gpu.apply(f, stream=stream)
        twin.apply(f, stream=stream)
    good = noisy_frames(rng, shape, np.uint8, 4)
    stack = np.stack(good)
    dev = [fastmog.GpuMat.from_array(f, stream=stream) for f in good]
    small = fastmog.GpuMat.from_array(good[3][:, :31], stream=stream)
    masks = [fastmog.GpuMat((24, 32), np.uint8) for _ in range(4)]
    closed_stream = fastmog.Stream()
    closed_stream.close()
    bad = [
        (ValueError, lambda: gpu.apply_batch([good[0], good[1], good[2][:, :31]], stream=stream)),
        (TypeError, lambda: gpu.apply_batch([good[0], good[1].astype(np.float32)], stream=stream)),
        (ValueError, lambda: gpu.apply_batch([good[0], good[1][..., 0]], stream=stream)),
        (ValueError, lambda: gpu.apply_batch(dev[:3] + [small], stream=stream)),
        (TypeError, lambda: gpu.apply_batch(stack.astype(np.int16), stream=stream)),
        (ValueError, lambda: gpu.apply_batch(np.zeros((4, 24, 32, 5), np.uint8), stream=stream)),
        (TypeError, lambda: gpu.apply_batch(dev[:3] + ["not a frame"], stream=stream)),
        (TypeError, lambda: gpu.apply_batch(5, stream=stream)),
        (TypeError, lambda: gpu.apply_batch(stack)),
        (TypeError, lambda: gpu.apply_batch(stack, stream=None)),
        (ValueError, lambda: gpu.apply_batch(stack, stream=closed_stream)),
        (ValueError, lambda: gpu.apply_batch(stack, stream=stream, fgmasks=masks[:3])),
        (ValueError, lambda: gpu.apply_batch(stack, stream=stream,
                                             fgmasks=masks[:3] + [fastmog.GpuMat((24, 31), np.uint8)])),
        (TypeError, lambda: gpu.apply_batch(stack, stream=stream,
                                            fgmasks=masks[:3] + [fastmog.GpuMat((24, 32), np.float32)])),
        (ValueError, lambda: gpu.apply_batch(stack, stream=stream, known_foreground=[None] * 3)),
        (ValueError, lambda: gpu.apply_batch(stack, stream=stream, known_foreground=[None] * 5)),
        (ValueError, lambda: gpu.apply_batch(stack, stream=stream, known_foreground=[
            None, None, None, np.zeros((23, 32), np.uint8)])),
        (ValueError, lambda: gpu.apply_batch(stack, float("nan"), stream=stream)),
    ]
    for error, call in bad:
        with pytest.raises(error):
            call()
    assert_same_gpu_model(gpu, twin, rng, stream, shape)


def test_gpu_apply_and_apply_batch_name_the_argument_at_fault(stream):
    sub = fastmog.BackgroundSubtractorMOG2()
    for call, message in named_argument_cases(sub, lambda shape: fastmog.GpuMat(shape, np.uint8),
                                              stream=stream):
        with pytest.raises((TypeError, ValueError), match=message):
            call()
    assert sub.frame_count == 0


def test_gpu_cameras_bad_input_changes_nothing(rng, stream):
    shapes = [(24, 32, 3), (20, 20), (16, 40, 4)]
    subs = [fastmog.BackgroundSubtractorMOG2() for _ in shapes]
    twins = [fastmog.BackgroundSubtractorMOG2() for _ in shapes]
    for _ in range(3):
        frames = [noisy_frames(rng, s, np.uint8, 1)[0] for s in shapes]
        fastmog.apply_cameras(subs, frames, stream=stream)
        for t, f in zip(twins, frames):
            t.apply(f, stream=stream)
    frames = [noisy_frames(rng, s, np.uint8, 1)[0] for s in shapes]
    masks = [fastmog.GpuMat(s[:2], np.uint8) for s in shapes]
    closed = fastmog.BackgroundSubtractorMOG2()
    closed.close()
    host_sub = fastmog.cpu.BackgroundSubtractorMOG2()
    bad = [
        (ValueError, lambda: fastmog.apply_cameras([subs[0], subs[1], subs[0]], frames,
                                                   stream=stream)),
        (ValueError, lambda: fastmog.apply_cameras(subs, frames[:2], stream=stream)),
        (ValueError, lambda: fastmog.apply_cameras(subs, frames, [-1.0, 0.1], stream=stream)),
        (ValueError, lambda: fastmog.apply_cameras(subs, frames, [-1.0, 0.1, float("nan")],
                                                   stream=stream)),
        (ValueError, lambda: fastmog.apply_cameras(
            subs, frames[:2] + [np.zeros((16, 40, 5), np.uint8)], stream=stream)),
        (TypeError, lambda: fastmog.apply_cameras(subs[:2] + [host_sub], frames, stream=stream)),
        (ValueError, lambda: fastmog.apply_cameras(subs[:2] + [closed], frames, stream=stream)),
        (TypeError, lambda: fastmog.apply_cameras(subs, frames)),
        (ValueError, lambda: fastmog.apply_cameras(subs, frames, stream=stream, fgmasks=masks[:2])),
        (ValueError, lambda: fastmog.apply_cameras(
            subs, frames, stream=stream, fgmasks=masks[:2] + [fastmog.GpuMat((16, 41), np.uint8)])),
        (ValueError, lambda: fastmog.apply_cameras(subs, frames, stream=stream,
                                                   known_foreground=[None])),
        (ValueError, lambda: fastmog.apply_cameras(
            subs, frames, stream=stream, known_foreground=[None, None, np.zeros((15, 40), np.uint8)])),
    ]
    for error, call in bad:
        with pytest.raises(error):
            call()
    for sub, twin, shape in zip(subs, twins, shapes):
        assert_same_gpu_model(sub, twin, rng, stream, shape)


def test_gpu_batch_refuses_one_mask_buffer_for_two_frames(rng, stream):
    frames = noisy_frames(rng, (24, 32, 3), np.uint8, 3)
    gpu = fastmog.BackgroundSubtractorMOG2()
    m = fastmog.GpuMat((24, 32), np.uint8)
    around = fastmog.GpuMat((30, 40), np.uint8)
    aliased = [[m, m, m], [fastmog.GpuMat((24, 32), np.uint8), m, m[:, :]],
               [around[0:24, 0:32], around[6:30, 8:40], fastmog.GpuMat((24, 32), np.uint8)]]
    for masks in aliased:
        with pytest.raises(ValueError, match="same output buffer"):
            gpu.apply_batch(frames, stream=stream, fgmasks=masks)
    assert gpu.frame_count == 0
    apart = [fastmog.GpuMat((24, 32), np.uint8) for _ in range(3)]
    gpu.apply_batch(frames, stream=stream, fgmasks=apart)
    assert gpu.frame_count == 3
