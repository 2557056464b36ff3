"""apply_batch and apply_cameras of the host reference (fastmog.cpu), no GPU
needed: K frames in one call give exactly the masks, background and mode
counts of K apply() calls and of OpenCV's CPU MOG2; N cameras in one call,
those of N apply() calls; bad input is refused before any model changes."""
import functools
import tracemalloc

import numpy as np
import pytest

import fastmog
from conftest import random_image
from fastmog.testing import CUSTOM, convert, iter_frames, opencv_subtractor

cv2 = pytest.importorskip("cv2")


@functools.cache
def opencv_knows_foreground():
    """OpenCV 4.13+ takes knownForegroundMask; older ones are compared without it."""
    probe = cv2.createBackgroundSubtractorMOG2()
    frame = np.zeros((8, 8), np.uint8)
    try:
        probe.apply(frame, knownForegroundMask=frame, learningRate=-1)
    except (cv2.error, TypeError):
        return False
    return True


def opencv_apply(ref, frame, lr, known):
    if known is None:
        return ref.apply(frame, learningRate=lr)
    return ref.apply(frame, knownForegroundMask=known, learningRate=lr)


class Trio:
    """The same frames three ways: apply_batch on one host subtractor, apply()
    frame by frame on a second, and OpenCV's CPU MOG2 where it can follow (it
    has no 4-channel background image and, before 4.13, no known foreground)."""

    def __init__(self, kwargs, opencv=True):
        self.batch = fastmog.cpu.BackgroundSubtractorMOG2(**kwargs)
        self.loop = fastmog.cpu.BackgroundSubtractorMOG2(**kwargs)
        self.ref = opencv_subtractor(kwargs) if opencv else None

    def apply(self, frame, lr=-1.0):
        """One frame through apply() on both host subtractors (and OpenCV)."""
        a = self.batch.apply(frame, lr)
        b = self.loop.apply(frame, lr)
        assert np.array_equal(a, b)
        if self.ref is not None:
            assert np.array_equal(b, self.ref.apply(frame, learningRate=lr))

    def step(self, frames, lr=-1.0, known=None, fgmasks=None):
        """One apply_batch of `frames` (a stack or a sequence) checked frame by
        frame against apply() and OpenCV; returns the masks."""
        k = len(frames)
        shape = np.shape(frames[0])[:2]
        got = self.batch.apply_batch(frames, lr, fgmasks=fgmasks, known_foreground=known)
        if fgmasks is not None:
            assert got is fgmasks
        assert isinstance(got, np.ndarray) and got.dtype == np.uint8 and got.shape == (k, *shape)
        for i in range(k):
            kf = None if known is None else known[i]
            want = self.loop.apply(frames[i], lr, known_foreground=kf)
            assert np.array_equal(got[i], want), \
                f"frame {i} of {k}: {np.count_nonzero(got[i] != want)} pixels differ from apply()"
            if self.ref is not None and (kf is None or opencv_knows_foreground()):
                ref = opencv_apply(self.ref, frames[i], lr, kf)
                assert np.array_equal(want, ref), f"frame {i} of {k}: apply() differs from OpenCV"
            elif self.ref is not None:
                self.ref = None  # OpenCV fell behind: it could not take this known foreground
        assert self.batch.frame_count == self.loop.frame_count
        return got

    def check_model(self):
        assert np.array_equal(self.batch.mode_counts(), self.loop.mode_counts())
        background = self.batch.get_background_image()
        assert np.array_equal(background, self.loop.get_background_image())
        if self.ref is not None and (background.ndim == 2 or background.shape[2] == 3):
            assert np.array_equal(background, self.ref.getBackgroundImage())


def as_form(frames, j):
    """The batch of chunk j as a numpy stack, a list or a tuple, in turn."""
    return [np.stack, list, tuple][j % 3](frames)


def known_masks(rng, k, hw):
    """K known-foreground entries: a random block each, every third one None."""
    masks = []
    for i in range(k):
        if i % 3 == 1:
            masks.append(None)
            continue
        mask = np.zeros(hw, np.uint8)
        y, x = rng.integers(0, hw[0] // 2), rng.integers(0, hw[1] // 2)
        mask[y:y + hw[0] // 3, x:x + hw[1] // 3] = rng.integers(1, 256)
        masks.append(mask)
    return masks


def noisy_frames(rng, shape, dtype, n):
    """A still scene with sensor noise and, every 7th frame, pure noise (every
    mode busy); float frames are not integral."""
    base = random_image(rng, shape, np.uint8).astype(np.float64)
    frames = []
    for i in range(n):
        frame = (np.clip(base + rng.normal(0, 6, shape), 0, 255) if i % 7
                 else random_image(rng, shape, np.uint8))
        frames.append(frame.astype(dtype))
    return frames


def _auto_freeze_restart(j, n):
    """Per batch: automatic, then frozen (0), one batch restarted before every
    frame (1), automatic again."""
    return [-1.0, -1.0, 0.0, 1.0, -1.0][j] if j < 5 else -1.0


# id: (sequence, colour, dtype, constructor kwargs, K, learning rate of batch j of n, frames)
REAL = {
    "traffic-grey-K8": ("traffic", "grey", np.uint8, {}, 8, None, 48),
    "traffic-bgr-noshadow-K3": ("traffic", "bgr", np.uint8, {"detect_shadows": False}, 3, None, 30),
    "traffic-bgr-float32-K17": ("traffic", "bgr", np.float32, {}, 17, None, 40),
    "traffic-grey-h20-K4-auto-freeze-restart": ("traffic", "grey", np.uint8, {"history": 20}, 4,
                                               _auto_freeze_restart, 28),
    "vtest-bgr-custom-lr0.01-K2": ("vtest", "bgr", np.uint8, CUSTOM, 2, lambda j, n: 0.01, 20),
    "vtest-bgra-K8": ("vtest", "bgra", np.uint8, {"n_mixtures": 4}, 8, None, 24),
    "vtest-grey-noshadow-K1": ("vtest", "grey", np.uint8, {"detect_shadows": False}, 1, None, 10),
}


@pytest.mark.parametrize("case", list(REAL))
def test_batch_equals_apply_and_opencv_on_real_sequences(data_dir, case):
    sequence, colour, dtype, kwargs, k, rate, limit = REAL[case]
    frames = [convert(f, colour, dtype) for f in iter_frames(data_dir, sequence, limit)]
    assert len(frames) == limit
    chunks = [frames[i:i + k] for i in range(0, limit, k)]  # the last one may be short
    trio = Trio(kwargs)
    for j, chunk in enumerate(chunks):
        lr = -1.0 if rate is None else rate(j, len(chunks))
        trio.step(as_form(chunk, j), lr)
        if j % 3 == 2:
            trio.check_model()
    trio.check_model()
    if rate is None:
        assert trio.batch.frame_count == limit


# (K, channels, dtype, shadows): every K with some kind of frame, every kind of
# frame with and without shadows; 17 and 33 need more than one pass of 16
RANDOM = [(1, 3, np.uint8, True), (1, 1, np.float32, False), (2, 1, np.uint8, True),
          (2, 4, np.uint8, False), (3, 3, np.float32, True), (3, 1, np.uint8, False),
          (8, 3, np.uint8, True), (8, 3, np.uint8, False), (8, 4, np.uint8, True),
          (8, 1, np.float32, True), (16, 1, np.uint8, True), (16, 3, np.float32, False),
          (17, 3, np.uint8, True), (17, 1, np.uint8, False), (17, 4, np.uint8, True),
          (33, 3, np.uint8, False), (33, 1, np.float32, True)]


@pytest.mark.parametrize(("k", "channels", "dtype", "shadows"), [
    pytest.param(*p, id=f"K{p[0]}-{p[1]}ch-{np.dtype(p[2]).name}-{'shadows' if p[3] else 'noshadows'}")
    for p in RANDOM])
def test_batch_equals_apply_and_opencv_on_random_frames(rng, k, channels, dtype, shadows):
    shape = (37, 53) if channels == 1 else (37, 53, channels)
    trio = Trio(dict(n_mixtures=1 + channels, detect_shadows=shadows, history=25))
    # automatic, a restart before every frame, frozen, fixed, ...; the last batch is short
    frames = noisy_frames(rng, shape, dtype, (3 if k < 16 else 2) * k + 5)
    rates = [-1.0, 1.0, 0.0, 0.02, -1.0, 0.3]
    for j, start in enumerate(range(0, len(frames), k)):
        trio.step(as_form(frames[start:start + k], j), rates[j % len(rates)])
    trio.check_model()


@pytest.mark.parametrize("k", [3, 8, 17])
def test_batch_known_foreground_per_frame(rng, k):
    trio = Trio({})
    shape = (40, 64, 3)
    frames = noisy_frames(rng, shape, np.uint8, 3 * k)
    for j, start in enumerate(range(0, len(frames), k)):
        chunk = frames[start:start + k]
        known = known_masks(rng, len(chunk), shape[:2])
        if j == 1:
            known = tuple(known)
        elif j == 2:  # a (K, H, W) array: every entry a mask
            known = np.stack([np.zeros(shape[:2], np.uint8) if m is None else m for m in known])
        masks = trio.step(as_form(chunk, j), -1.0, known)
        for mask, kf in zip(masks, known):
            if kf is not None:
                assert (mask[kf > 0] == 255).all()
    trio.check_model()


def test_batch_after_apply_and_apply_after_batch(rng):
    # history 12 makes the automatic rate 1/min(2n, 12) turn over inside a batch:
    # a frame counter that does not advance per frame gives other masks.
    shape = (30, 44, 3)
    trio = Trio({"history": 12})
    frames = noisy_frames(rng, shape, np.uint8, 40)
    for f in frames[:3]:
        trio.apply(f)
    trio.step(np.stack(frames[3:8]))
    assert trio.batch.frame_count == 8
    for f in frames[8:10]:
        trio.apply(f)
    assert trio.batch.frame_count == 10
    trio.step(frames[10:27])
    assert trio.batch.frame_count == 27
    trio.check_model()
    # parameters set between batches take effect at the next one
    for sub in (trio.batch, trio.loop):
        sub.var_threshold = 9.0
        sub.detect_shadows = False
    trio.ref.setVarThreshold(9.0)
    trio.ref.setDetectShadows(False)
    trio.step(frames[27:33])
    assert trio.batch.frame_count == 33
    # a batch of a new geometry restarts the model at its first frame
    grey = [convert(f, "grey", np.uint8) for f in frames[33:40]]
    trio.step(np.stack(grey))
    assert trio.batch.frame_count == 7
    trio.check_model()


def test_batch_fills_caller_masks_and_takes_strided_stacks(rng):
    trio = Trio({})
    big = np.stack(noisy_frames(rng, (50, 80, 3), np.uint8, 12))
    view = big[:, 5:45, 10:74]  # (K, 40, 64, 3), not contiguous
    out = np.full((6, 40, 64), 77, np.uint8)
    trio.step(view[:6], fgmasks=out)
    assert not (out == 77).all()
    trio.step(view[6:], fgmasks=out)
    trio.check_model()


def test_empty_batch_changes_nothing(rng):
    frames = noisy_frames(rng, (24, 32, 3), np.uint8, 7)
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    twin = fastmog.cpu.BackgroundSubtractorMOG2()
    assert len(sub.apply_batch([])) == 0 and sub.frame_count == 0
    sub.apply_batch(frames[:3])
    twin.apply_batch(frames[:3])
    for empty in ([], (), np.zeros((0, 24, 32, 3), np.uint8)):
        assert len(sub.apply_batch(empty)) == 0
    assert sub.frame_count == 3
    assert np.array_equal(sub.apply_batch(frames[3:]), twin.apply_batch(frames[3:]))
    assert np.array_equal(sub.get_background_image(), twin.get_background_image())


def assert_same_model(sub, twin, rng, shape, dtype=np.uint8):
    """sub and twin (which never saw the refused calls) agree from here on."""
    assert sub.frame_count == twin.frame_count
    frames = noisy_frames(rng, shape, dtype, 4)
    assert np.array_equal(sub.apply_batch(frames), twin.apply_batch(frames))
    assert np.array_equal(sub.mode_counts(), twin.mode_counts())
    assert np.array_equal(sub.get_background_image(), twin.get_background_image())


def test_batch_bad_input_changes_nothing(rng):
    shape = (24, 32, 3)
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    twin = fastmog.cpu.BackgroundSubtractorMOG2()
    for f in noisy_frames(rng, shape, np.uint8, 3):
        sub.apply(f)
        twin.apply(f)
    good = noisy_frames(rng, shape, np.uint8, 4)
    stack = np.stack(good)
    readonly = np.zeros((4, 24, 32), np.uint8)
    readonly.flags.writeable = False
    bad_known = [None, None, None, np.zeros((23, 32), np.uint8)]
    bad = [
        # frames that are not all of one shape and dtype (the bad one last or first)
        (ValueError, lambda: sub.apply_batch([good[0], good[1], good[2][:, :31]])),
        (ValueError, lambda: sub.apply_batch([good[0][:23], good[1], good[2]])),
        (ValueError, lambda: sub.apply_batch([good[0], good[1][..., 0]])),
        (TypeError, lambda: sub.apply_batch([good[0], good[1].astype(np.float32)])),  # dtype
        # frames apply() refuses
        (TypeError, lambda: sub.apply_batch(stack.astype(np.int16))),
        (ValueError, lambda: sub.apply_batch(np.zeros((4, 24, 32, 5), np.uint8))),
        (ValueError, lambda: sub.apply_batch(np.zeros((4, 0, 32, 3), np.uint8))),
        (TypeError, lambda: sub.apply_batch([good[0], "not a frame"])),
        (TypeError, lambda: sub.apply_batch([f.tolist() for f in good])),
        (TypeError, lambda: sub.apply_batch(5)),
        # masks of the wrong shape, count, type or layout
        (ValueError, lambda: sub.apply_batch(stack, fgmasks=np.zeros((4, 24, 31), np.uint8))),
        (ValueError, lambda: sub.apply_batch(stack, fgmasks=np.zeros((3, 24, 32), np.uint8))),
        (ValueError, lambda: sub.apply_batch(stack, fgmasks=np.zeros((5, 24, 32), np.uint8))),
        ((TypeError, ValueError),
         lambda: sub.apply_batch(stack, fgmasks=np.zeros((4, 24, 32), np.float32))),
        ((TypeError, ValueError), lambda: sub.apply_batch(stack, fgmasks=readonly)),
        ((TypeError, ValueError),
         lambda: sub.apply_batch(stack, fgmasks=np.zeros((4, 24, 64), np.uint8)[:, :, ::2])),
        # known foreground: K mismatch, a wrong-sized entry
        (ValueError, lambda: sub.apply_batch(stack, known_foreground=[None] * 3)),
        (ValueError, lambda: sub.apply_batch(stack, known_foreground=[None] * 5)),
        (ValueError, lambda: sub.apply_batch(stack, known_foreground=bad_known)),
        (ValueError,
         lambda: sub.apply_batch(stack, known_foreground=np.zeros((3, 24, 32), np.uint8))),
        # learning rate, and a keyword only the GPU takes
        (ValueError, lambda: sub.apply_batch(stack, float("nan"))),
        (TypeError, lambda: sub.apply_batch(stack, stream=None)),
    ]
    for error, call in bad:
        with pytest.raises(error):
            call()
    assert_same_model(sub, twin, rng, shape)


def named_argument_cases(sub, mask, **kw):
    """(call, message) pairs: apply and apply_batch (one path in C) must each
    name the argument at fault as the caller wrote it: frame, fgmask and
    known_foreground for apply, frames[k], fgmasks[k] and known_foreground[k]
    for apply_batch."""
    f = np.zeros((8, 8), np.uint8)
    wide = np.zeros((8, 9), np.uint8)
    floats = np.zeros((8, 8), np.float32)
    return [
        (lambda: sub.apply(np.zeros((8, 8, 2), np.uint8), **kw), "frame has shape"),
        (lambda: sub.apply(f, fgmask=mask((8, 9)), **kw), "fgmask has shape 8x9"),
        (lambda: sub.apply(f, known_foreground=floats, **kw), "known_foreground must have"),
        (lambda: sub.apply_batch([f, wide], **kw), r"frames\[1\] has shape 8x9 but frames\[0\]"),
        (lambda: sub.apply_batch([f, f], fgmasks=[mask((8, 8)), mask((8, 9))], **kw),
         r"fgmasks\[1\] has shape 8x9"),
        (lambda: sub.apply_batch([f, f], known_foreground=[None, floats], **kw),
         r"known_foreground\[1\] must have"),
    ]


def test_apply_and_apply_batch_name_the_argument_at_fault():
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    for call, message in named_argument_cases(sub, lambda shape: np.zeros(shape, np.uint8)):
        with pytest.raises((TypeError, ValueError), match=message):
            call()
    assert sub.frame_count == 0


def transient_bytes(call, calls=100):
    """The peak of Python's traced memory above its start while `call` runs
    `calls` times (warmed up first): what the calls allocate, even briefly."""
    for _ in range(10):
        call()
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        for _ in range(calls):
            call()
        return tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()


def test_apply_with_fgmask_allocates_nothing_per_frame():
    # apply shares apply_batch's path but must not pay for it: its one frame
    # needs no sequences, no per-frame arrays. A no-op call with keywords
    # allocates the same few bytes (the loop, the call's keyword dict); the
    # per-frame arrays apply_batch allocates would add some 250 bytes.
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    frame, mask = np.zeros((16, 16), np.uint8), np.zeros((16, 16), np.uint8)

    def nothing(*args, **kwargs):
        return None

    baseline = transient_bytes(lambda: nothing(frame, 0.1, fgmask=mask, known_foreground=mask))
    used = transient_bytes(lambda: sub.apply(frame, 0.1, fgmask=mask, known_foreground=mask))
    assert used <= baseline + 64, f"apply allocated {used} bytes, a no-op call {baseline}"
    assert sub.frame_count == 110


def test_batch_on_a_closed_subtractor_raises(rng):
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    sub.close()
    with pytest.raises(ValueError, match="closed"):
        sub.apply_batch(noisy_frames(rng, (8, 8), np.uint8, 2))


# ---- apply_cameras ----------------------------------------------------------------

# (frame shape, dtype, constructor kwargs): sizes, channel counts, dtypes and
# parameters all differ
CAMERAS = [
    ((30, 40), np.uint8, {}),
    ((25, 61, 3), np.uint8, {"detect_shadows": False}),
    ((48, 20, 4), np.uint8, {"n_mixtures": 4}),
    ((33, 33, 3), np.float32, {"history": 15}),
    ((16, 70), np.float32, {"n_mixtures": 2}),
    ((30, 40, 3), np.uint8, CUSTOM),
]


def camera_frames(rng, rounds):
    """rounds x N frames, one still noisy scene per camera."""
    per_camera = [noisy_frames(rng, shape, dtype, rounds) for shape, dtype, _ in CAMERAS]
    return [[frames[r] for frames in per_camera] for r in range(rounds)]


def test_cameras_equal_apply_calls_and_opencv(rng):
    n = len(CAMERAS)
    subs = [fastmog.cpu.BackgroundSubtractorMOG2(**kw) for _, _, kw in CAMERAS]
    loops = [fastmog.cpu.BackgroundSubtractorMOG2(**kw) for _, _, kw in CAMERAS]
    refs = [opencv_subtractor(kw) for _, _, kw in CAMERAS]
    per_camera = [-1.0, 0.1, 0.0, 1.0, -1.0, 0.02]
    rounds = camera_frames(rng, 30)
    for r, frames in enumerate(rounds):
        # one rate for all, or one per camera (a list or a tuple), rotating
        rate = [-1.0, 0.05, per_camera[r % n:] + per_camera[:r % n],
                tuple(per_camera[::-1])][r % 4]
        rates = rate if isinstance(rate, (list, tuple)) else [rate] * n
        known = (None if r % 3 == 0 else
                 [None if (i + r) % 2 else known_masks(rng, 1, f.shape[:2])[0]
                  for i, f in enumerate(frames)])
        fgmasks = [np.zeros(f.shape[:2], np.uint8) for f in frames] if r % 5 == 4 else None
        got = fastmog.cpu.apply_cameras(subs, frames if r % 2 else tuple(frames), rate,
                                        fgmasks=fgmasks, known_foreground=known)
        assert isinstance(got, list) and len(got) == n
        for i in range(n):
            kf = None if known is None else known[i]
            want = loops[i].apply(frames[i], rates[i], known_foreground=kf)
            if fgmasks is not None:
                assert got[i] is fgmasks[i]
            assert got[i].dtype == np.uint8 and got[i].shape == frames[i].shape[:2]
            assert np.array_equal(got[i], want), f"round {r}, camera {i}"
            if kf is None or opencv_knows_foreground():
                assert np.array_equal(want, opencv_apply(refs[i], frames[i], rates[i], kf))
            assert subs[i].frame_count == loops[i].frame_count
    for i in range(n):
        assert np.array_equal(subs[i].mode_counts(), loops[i].mode_counts())
        assert np.array_equal(subs[i].get_background_image(), loops[i].get_background_image())


def test_cameras_and_batches_mix(rng):
    # a camera's model carries on across apply, apply_batch and apply_cameras
    shape_a, shape_b = (20, 30, 3), (26, 18)
    a, b = fastmog.cpu.BackgroundSubtractorMOG2(), fastmog.cpu.BackgroundSubtractorMOG2()
    ta, tb = fastmog.cpu.BackgroundSubtractorMOG2(), fastmog.cpu.BackgroundSubtractorMOG2()
    fa = noisy_frames(rng, shape_a, np.uint8, 12)
    fb = noisy_frames(rng, shape_b, np.uint8, 12)
    a.apply_batch(fa[:5])
    b.apply(fb[0])
    got = fastmog.cpu.apply_cameras([a, b], [fa[5], fb[1]])
    want = [ta.apply(f) for f in fa[:6]][-1], [tb.apply(f) for f in fb[:2]][-1]
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert (a.frame_count, b.frame_count) == (6, 2)
    assert np.array_equal(a.apply_batch(fa[6:]), np.stack([ta.apply(f) for f in fa[6:]]))
    assert np.array_equal(b.apply_batch(fb[2:]), np.stack([tb.apply(f) for f in fb[2:]]))


def test_no_cameras():
    assert len(fastmog.cpu.apply_cameras([], [])) == 0


def test_cameras_bad_input_changes_nothing(rng):
    shapes = [(24, 32, 3), (20, 20), (16, 40, 4)]
    subs = [fastmog.cpu.BackgroundSubtractorMOG2() for _ in shapes]
    twins = [fastmog.cpu.BackgroundSubtractorMOG2() for _ in shapes]
    for _ in range(3):
        frames = [noisy_frames(rng, s, np.uint8, 1)[0] for s in shapes]
        fastmog.cpu.apply_cameras(subs, frames)
        for t, f in zip(twins, frames):
            t.apply(f)
    frames = [noisy_frames(rng, s, np.uint8, 1)[0] for s in shapes]
    masks = [np.zeros(s[:2], np.uint8) for s in shapes]
    closed = fastmog.cpu.BackgroundSubtractorMOG2()
    closed.close()
    bad = [
        (ValueError, lambda: fastmog.cpu.apply_cameras([subs[0], subs[1], subs[0]], frames)),
        (ValueError, lambda: fastmog.cpu.apply_cameras(subs, frames[:2])),
        (ValueError, lambda: fastmog.cpu.apply_cameras(subs[:2], frames)),
        (ValueError, lambda: fastmog.cpu.apply_cameras(subs, frames, [-1.0, 0.1])),
        (ValueError, lambda: fastmog.cpu.apply_cameras(subs, frames, [-1.0, 0.1, float("nan")])),
        (ValueError, lambda: fastmog.cpu.apply_cameras(subs, frames, float("nan"))),
        # the last camera's frame is bad: the first two must not have run
        (ValueError, lambda: fastmog.cpu.apply_cameras(
            subs, frames[:2] + [np.zeros((16, 40, 5), np.uint8)])),
        (TypeError, lambda: fastmog.cpu.apply_cameras(subs, frames[:2] + ["not a frame"])),
        (TypeError, lambda: fastmog.cpu.apply_cameras(subs[:2] + ["not a subtractor"], frames)),
        (ValueError, lambda: fastmog.cpu.apply_cameras(subs[:2] + [closed], frames)),
        (ValueError, lambda: fastmog.cpu.apply_cameras(subs, frames, fgmasks=masks[:2])),
        (ValueError, lambda: fastmog.cpu.apply_cameras(
            subs, frames, fgmasks=masks[:2] + [np.zeros((16, 41), np.uint8)])),
        ((TypeError, ValueError), lambda: fastmog.cpu.apply_cameras(
            subs, frames, fgmasks=masks[:2] + [np.zeros((16, 40), np.float32)])),
        (ValueError, lambda: fastmog.cpu.apply_cameras(subs, frames, known_foreground=[None])),
        (ValueError, lambda: fastmog.cpu.apply_cameras(
            subs, frames, known_foreground=[None, None, np.zeros((15, 40), np.uint8)])),
        (TypeError, lambda: fastmog.cpu.apply_cameras(subs, frames, stream=None)),
    ]
    for error, call in bad:
        with pytest.raises(error):
            call()
    for sub, twin, shape in zip(subs, twins, shapes):
        assert_same_model(sub, twin, rng, shape)


def test_batch_refuses_one_mask_buffer_for_two_frames(rng):
    frames = noisy_frames(rng, (24, 32, 3), np.uint8, 3)
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    m = np.zeros((24, 32), np.uint8)
    stack = np.zeros((3, 24, 32), np.uint8)
    aliased = [[m, m, m], [np.zeros_like(m), m, m[:, :]], [stack[0], stack[1], stack[0, :, :]],
               [m, None, m.view()]]
    for masks in aliased:
        with pytest.raises(ValueError, match="same output buffer"):
            sub.apply_batch(frames, fgmasks=masks)
    assert sub.frame_count == 0
    got = sub.apply_batch(frames, fgmasks=stack)  # rows of one array are distinct buffers
    assert got is stack and sub.frame_count == 3
