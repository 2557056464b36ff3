"""The host reference against OpenCV's CPU MOG2 (no GPU needed), and the
subtractor API that does not touch CUDA."""
import threading
import time

import numpy as np
import pytest

import fastmog
from conftest import parity_params, random_image
from fastmog.testing import CASES, SEQUENCES, compare_host_with_opencv, opencv_subtractor

cv2 = pytest.importorskip("cv2")


@pytest.mark.parametrize(("sequence", "case"), parity_params(CASES, SEQUENCES))
def test_host_reference_matches_opencv(data_dir, sequence, case):
    n, same, total, bg = compare_host_with_opencv(data_dir, sequence, case)
    print(f"{sequence} {case}: {n} frames, {100.0 * same / total:.6f} % identical, "
          f"background max diff {bg}")
    assert n > 0
    assert same == total, f"{total - same} of {total} mask pixels differ"
    assert bg in (None, 0.0)


def test_known_foreground_matches_opencv(rng):
    probe = cv2.createBackgroundSubtractorMOG2()
    frame = np.zeros((8, 8), np.uint8)
    try:
        probe.apply(frame, knownForegroundMask=frame, learningRate=-1)
    except cv2.error:
        pytest.skip(f"OpenCV {cv2.__version__} has no known-foreground apply (4.13+)")
    ours = fastmog.cpu.BackgroundSubtractorMOG2()
    ref = cv2.createBackgroundSubtractorMOG2()
    base = rng.integers(60, 200, (96, 128, 3), dtype=np.uint8)
    for i in range(60):
        frame = np.clip(base.astype(int) + rng.integers(-6, 7, base.shape), 0, 255).astype(np.uint8)
        frame[20:40, 2 * i:2 * i + 20] = 250  # a moving object
        known = np.zeros(frame.shape[:2], np.uint8)
        known[10:30, (3 * i) % 100:(3 * i) % 100 + 25] = 1 + i % 200
        a = ours.apply(frame, known_foreground=known)
        b = ref.apply(frame, knownForegroundMask=known, learningRate=-1)
        assert np.array_equal(a, b), f"frame {i}"
        assert (a[known > 0] == 255).all()
    assert np.array_equal(ours.get_background_image(), ref.getBackgroundImage())


def test_random_frames_match_opencv_with_every_setting(rng):
    kwargs = dict(history=30, var_threshold=9.0, n_mixtures=8, background_ratio=0.7,
                  var_threshold_gen=4.0, var_init=10.0, var_min=1.0, var_max=30.0,
                  complexity_reduction_threshold=0.0, shadow_value=99, shadow_threshold=0.3)
    ours = fastmog.cpu.BackgroundSubtractorMOG2(**kwargs)
    ref = opencv_subtractor(kwargs)
    for i in range(40):
        frame = rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)
        lr = [-1.0, 0.05, 0.0, 0.5][i % 4]
        assert np.array_equal(ours.apply(frame, lr), ref.apply(frame, learningRate=lr)), i
    assert np.array_equal(ours.get_background_image(), ref.getBackgroundImage())


def test_parameters_are_validated_properties():
    sub = fastmog.cpu.BackgroundSubtractorMOG2(100, 20.0, False, n_mixtures=3)
    assert (sub.history, sub.var_threshold, sub.detect_shadows, sub.n_mixtures) == (100, 20.0, False, 3)
    assert sub.getHistory() == 100
    sub.setHistory(7)
    assert sub.history == 7
    sub.background_ratio = 0.1
    assert sub.background_ratio == np.float32(0.1)  # stored as float, as in OpenCV
    bad = [("history", -1), ("history", 0), ("history", 1.5), ("n_mixtures", 0),
           ("n_mixtures", 9), ("var_min", 1000.0), ("var_max", 1.0), ("shadow_value", 256),
           ("background_ratio", 1.5), ("var_threshold", float("nan")),
           ("var_threshold", -1.0), ("shadow_threshold", float("inf"))]
    for name, value in bad:
        before = getattr(sub, name)
        with pytest.raises((ValueError, TypeError)):
            setattr(sub, name, value)
        assert getattr(sub, name) == before
    with pytest.raises(ValueError, match="var_min"):
        fastmog.cpu.BackgroundSubtractorMOG2(var_min=10.0, var_max=5.0)
    with pytest.raises(TypeError):
        fastmog.cpu.BackgroundSubtractorMOG2(unknown=1)
    with pytest.raises(TypeError):
        fastmog.cpu.BackgroundSubtractorMOG2(1, 2, 3, 4)


def test_host_bad_input_changes_nothing(rng):
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    ref = fastmog.cpu.BackgroundSubtractorMOG2()
    frame = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
    sub.apply(frame)
    ref.apply(frame)
    bad_calls = [
        (ValueError, lambda: sub.apply(frame[:, :, :2])),
        (ValueError, lambda: sub.apply(np.zeros((24, 32, 5), np.uint8))),
        (TypeError, lambda: sub.apply(frame.astype(np.int16))),
        (TypeError, lambda: sub.apply(frame.astype(np.float64))),
        (ValueError, lambda: sub.apply(np.zeros((0, 32, 3), np.uint8))),
        (ValueError, lambda: sub.apply(np.zeros(32, np.uint8))),
        (ValueError, lambda: sub.apply(np.zeros((24, 64, 3), np.uint8)[:, ::2])),
        (ValueError, lambda: sub.apply(frame, fgmask=np.zeros((24, 31), np.uint8))),
        (TypeError, lambda: sub.apply(frame, fgmask=np.zeros((24, 32), np.float32))),
        (ValueError, lambda: sub.apply(frame, known_foreground=np.zeros((23, 32), np.uint8))),
        (ValueError, lambda: sub.apply(frame, float("nan"))),
        (TypeError, lambda: sub.apply(frame.tolist())),
        # apply reads its arguments itself (METH_FASTCALL): what Python's parser did
        (TypeError, lambda: sub.apply()),
        (TypeError, lambda: sub.apply(frame, 0.1, None)),
        (TypeError, lambda: sub.apply(frame, 0.1, learning_rate=0.2)),
        (TypeError, lambda: sub.apply(frame, fgmasks=None)),
        (TypeError, lambda: sub.apply(frame, stream=None)),
        (TypeError, lambda: sub.apply_batch([frame], fgmask=None)),
    ]
    for error, call in bad_calls:
        with pytest.raises(error):
            call()
    assert sub.frame_count == 1
    nxt = rng.integers(0, 256, frame.shape, dtype=np.uint8)
    assert np.array_equal(sub.apply(nxt), ref.apply(nxt))
    assert np.array_equal(sub.get_background_image(), ref.get_background_image())


def test_size_change_restarts_the_model(rng):
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    for _ in range(5):
        sub.apply(rng.integers(0, 256, (20, 30), dtype=np.uint8))
    assert sub.frame_count == 5
    sub.apply(rng.integers(0, 256, (21, 30), dtype=np.uint8))
    assert sub.frame_count == 1
    sub.apply(rng.integers(0, 256, (21, 30, 3), dtype=np.uint8))
    assert sub.frame_count == 1
    sub.n_mixtures = 2
    sub.apply(rng.integers(0, 256, (21, 30, 3), dtype=np.uint8))
    assert sub.frame_count == 1
    sub.reset()
    assert sub.frame_count == 0
    with pytest.raises(ValueError, match="no model|closed"):
        fastmog.cpu.BackgroundSubtractorMOG2().get_background_image()


def in_thread(fn):
    """Starts fn in a thread; returns (thread, results, errors)."""
    results, errors = [], []

    def run():
        try:
            results.append(fn())
        except BaseException as e:  # noqa: BLE001 - reported to the test
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    return t, results, errors


def test_host_apply_waiting_for_the_lock_does_not_outlive_close():
    """mog2_host.c: apply() checked `closed` before taking the lock, so an
    apply that passed the check and then waited for the lock behind a close()
    built a new model after the close and returned a mask of it. The fix
    checks under the lock (mog2_base.c fm_mog2_lock_open). Order: A's apply
    holds the lock (a frame sized to take ~0.3 s), then close() waits for
    the lock, then B's apply (same frame) waits behind it; the lock is handed
    on in that order. B must now raise; if B ever ran first its mask is that of
    a second identical frame (all zeros), while the old build's B returns the
    mask of a fresh model (no zeros)."""
    rng = np.random.default_rng()
    probe = random_image(rng, (512, 1024), np.uint8)
    cal = fastmog.cpu.BackgroundSubtractorMOG2()
    cal.apply(probe)
    t0 = time.perf_counter()
    cal.apply(probe)
    per_row = (time.perf_counter() - t0) / probe.shape[0]
    rows = int(min(max(0.3 / per_row, 512), 16384))
    frame = random_image(rng, (rows, 1024), np.uint8)

    late = 0
    for _ in range(2):
        sub = fastmog.cpu.BackgroundSubtractorMOG2()
        a, _, a_errors = in_thread(lambda: sub.apply(frame))
        time.sleep(0.02)                                  # A holds the lock
        c, _, c_errors = in_thread(sub.close)
        time.sleep(0.02)                                  # close() waits for it
        b, b_masks, b_errors = in_thread(lambda: sub.apply(frame))
        for t in (a, c, b):
            t.join()
        assert not a_errors and not c_errors, (a_errors, c_errors)
        assert sub.closed
        if b_errors:
            assert isinstance(b_errors[0], ValueError) and "closed" in str(b_errors[0]), b_errors
            late += 1
        else:
            fresh = np.count_nonzero(b_masks[0]) > b_masks[0].size // 2
            assert not fresh, "an apply waiting for the lock built a new model after close()"
    print(f"{late} of 2 applies came after close() and were refused")


def test_gpu_subtractor_validates_before_touching_cuda():
    with pytest.raises(ValueError):
        fastmog.BackgroundSubtractorMOG2(history=0)
    with pytest.raises(ValueError):
        fastmog.BackgroundSubtractorMOG2(n_mixtures=9)
    with pytest.raises(TypeError):
        fastmog.BackgroundSubtractorMOG2(nonsense=True)
    assert callable(fastmog.createBackgroundSubtractorMOG2)
    assert isinstance(fastmog.cpu.createBackgroundSubtractorMOG2(), fastmog.cpu.BackgroundSubtractorMOG2)


def test_host_apply_and_apply_batch_take_their_documented_arguments(rng):
    """The argument table both subtractors parse with: the frame positional
    only, learning_rate positional or keyword, the rest keyword only, and
    each method's own mask keyword (fgmask / fgmasks), no stream."""
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    frame = rng.integers(0, 256, (6, 8), dtype=np.uint8)
    mask = np.empty((6, 8), np.uint8)
    known = np.zeros((6, 8), np.uint8)
    timer = fastmog.Timer()
    assert sub.apply(frame, 0.5, fgmask=mask, known_foreground=known, timer=timer) is mask
    assert sub.apply(frame, learning_rate=0.5).shape == (6, 8)
    masks = np.empty((2, 6, 8), np.uint8)
    assert sub.apply_batch([frame, frame], 0.5, fgmasks=masks, known_foreground=[known, None],
                           timer=timer) is masks
    assert sub.apply_batch(np.stack([frame, frame]), learning_rate=0.5).shape == (2, 6, 8)
    refused = [
        (r"apply\(\)", lambda: sub.apply(frame=frame)),
        (r"apply\(\)", lambda: sub.apply(frame, 0.5, mask)),
        (r"apply\(\)", lambda: sub.apply(frame, fgmasks=mask)),
        (r"apply\(\)", lambda: sub.apply(frame, stream=None)),
        (r"apply\(\)", lambda: sub.apply()),
        (r"apply_batch\(\)", lambda: sub.apply_batch([frame], fgmask=masks)),
        (r"apply_batch\(\)", lambda: sub.apply_batch([frame], 0.5, masks)),
        (r"apply_batch\(\)", lambda: sub.apply_batch(frames=[frame])),
        (r"apply_batch\(\)", lambda: sub.apply_batch([frame], stream=None)),
    ]
    for message, call in refused:
        with pytest.raises(TypeError, match=message):
            call()
    for call in (lambda: sub.apply(frame, "fast"), lambda: sub.apply_batch([frame], "fast")):
        with pytest.raises(TypeError, match="learning_rate must be a number"):
            call()
    # The rate is checked before the frames.
    with pytest.raises(ValueError, match="learning_rate"):
        sub.apply_batch("not frames", float("inf"))


# Both subtractors share the parameter table; the GPU one needs a device once
# built, but its constructor checks every argument before touching CUDA.
SUBTRACTORS = [fastmog.cpu.BackgroundSubtractorMOG2,
               pytest.param(fastmog.BackgroundSubtractorMOG2, marks=pytest.mark.gpu)]


@pytest.mark.parametrize("make", SUBTRACTORS)
def test_numpy_scalars_are_numbers_and_bools_are_flags(make):
    sub = make(np.int32(50), np.float32(20.0), np.bool_(False), n_mixtures=np.int64(3),
               background_ratio=np.float32(0.5), var_init=np.int16(12))
    assert (sub.history, sub.var_threshold, sub.detect_shadows, sub.n_mixtures) == (50, 20.0, False, 3)
    assert (sub.background_ratio, sub.var_init) == (0.5, 12.0)
    sub.setHistory(np.uint16(7))
    sub.shadow_value = np.uint8(100)
    sub.setShadowThreshold(np.float64(0.25))
    sub.var_max = np.float32(80.5)
    assert (sub.history, sub.shadow_value, sub.shadow_threshold, sub.var_max) == (7, 100, 0.25, 80.5)
    for name in ("var_threshold", "background_ratio", "shadow_threshold", "var_max"):
        for flag in (True, np.bool_(False)):
            with pytest.raises(TypeError, match=f"{name} must be a number"):
                setattr(sub, name, flag)
    for flag in (True, np.bool_(True)):
        with pytest.raises(TypeError, match="history must be an int"):
            sub.setHistory(flag)
    with pytest.raises(TypeError, match="var_threshold must be a number"):
        make(var_threshold=True)
    assert (sub.history, sub.var_max) == (7, 80.5)


@pytest.mark.parametrize("make", SUBTRACTORS)
def test_detect_shadows_takes_a_bool_or_0_or_1(make):
    sub = make()
    for value, want in ((0, False), (1, True), (np.bool_(False), False), (True, True),
                        (np.int8(0), False)):
        sub.setDetectShadows(value)
        assert sub.detect_shadows is want
    for value in (-1, 2, np.int32(-1)):
        with pytest.raises(ValueError, match="detect_shadows must be True or False"):
            sub.setDetectShadows(value)
        with pytest.raises(ValueError, match="detect_shadows"):
            make(detect_shadows=value)
    with pytest.raises(TypeError, match="detect_shadows must be True or False"):
        sub.detect_shadows = 0.5
    assert sub.detect_shadows is False


def test_gpu_constructor_refuses_bools_as_numbers_before_touching_cuda():
    for kwargs in ({"var_threshold": True}, {"history": np.bool_(True)},
                   {"background_ratio": np.bool_(False)}):
        with pytest.raises(TypeError, match="must be a number|must be an int"):
            fastmog.BackgroundSubtractorMOG2(**kwargs)
    for value in (-1, 2, np.int64(3)):
        with pytest.raises(ValueError, match="detect_shadows must be True or False"):
            fastmog.BackgroundSubtractorMOG2(detect_shadows=value)


def test_background_after_n_mixtures_changes_is_the_model_as_it_stands(rng):
    """A changed n_mixtures takes effect at the next apply(); until then the
    background is the old model's, not uninitialised memory."""
    frames = [rng.integers(0, 256, (24, 32, 3), dtype=np.uint8) for _ in range(8)]
    sub = fastmog.cpu.BackgroundSubtractorMOG2(n_mixtures=5)
    for f in frames:
        sub.apply(f)
    before = sub.get_background_image()
    for n in (2, 8, 5):
        sub.n_mixtures = n
        assert np.array_equal(sub.get_background_image(), before)
        out = np.full_like(before, 7)
        sub.get_background_image(out)
        assert np.array_equal(out, before)
    sub.n_mixtures = 2
    sub.apply(frames[0])
    restarted = fastmog.cpu.BackgroundSubtractorMOG2(n_mixtures=2)
    restarted.apply(frames[0])
    assert np.array_equal(sub.get_background_image(), restarted.get_background_image())
