"""fastmog.morphology on the GPU against the host face (itself equal to
cv2.morphologyEx, tests/motion/test_motion_host.py): every op, element shape
and size 1-31, iterations, in place, borders, many masks in one stack; bad
input refused before any work."""
import numpy as np
import pytest

import fastmog
from fastmog._morphology import morphology_stack
from fastmog.motion import SHAPES

from test_motion_host import random_mask

pytestmark = pytest.mark.gpu


def _gpu(mask, stream, *args, **kwargs):
    dev = fastmog.GpuMat.from_array(mask, stream=stream)
    return fastmog.morphology(dev, *args, stream=stream, **kwargs).download(stream=stream)


@pytest.mark.parametrize("op", ["erode", "dilate", "open", "close"])
@pytest.mark.parametrize("shape", SHAPES)
def test_every_op_shape_and_size_equals_the_host(rng, stream, op, shape):
    mask = np.where(rng.random((67, 131)) < 0.3, 255, 0).astype(np.uint8)
    mask[rng.random(mask.shape) < 0.05] = 127           # shadows: values, not just 0/255
    for side in (1, 2, 3, 4, 5, 8, 15, 30, 31):
        for kernel in (side, (side, max(1, side // 2 + 1))):
            want = fastmog.cpu.morphology(mask, op, kernel, shape=shape)
            got = _gpu(mask, stream, op, kernel, shape=shape)
            np.testing.assert_array_equal(got, want, err_msg=f"{op} {kernel} {shape}")


def test_arbitrary_elements_iterations_and_random_values(rng, stream):
    values = rng.integers(0, 256, (40, 53), dtype=np.uint8)
    for _ in range(20):
        kh, kw = rng.integers(1, 32, 2)
        element = (rng.random((kh, kw)) < 0.4).astype(np.uint8)
        element[kh // 2, kw // 2] = 1
        for op in ("erode", "dilate", "open", "close"):
            iterations = int(rng.integers(1, 4))
            want = fastmog.cpu.morphology(values, op, element, iterations=iterations)
            got = _gpu(values, stream, op, element, iterations=iterations)
            np.testing.assert_array_equal(got, want, err_msg=f"{op} {element.shape}")


def test_in_place_and_out(rng, stream):
    mask = np.where(rng.random((64, 96)) < 0.5, 255, 0).astype(np.uint8)
    want = fastmog.cpu.morphology(mask, "open", 5, iterations=3)
    dev = fastmog.GpuMat.from_array(mask, stream=stream)
    result = fastmog.morphology(dev, "open", 5, iterations=3, stream=stream, out=dev)
    assert result is dev
    np.testing.assert_array_equal(dev.download(stream=stream), want)
    out = fastmog.GpuMat((64, 96), np.uint8)
    fastmog.morphology(mask, "open", 5, iterations=3, stream=stream, out=out)
    np.testing.assert_array_equal(out.download(stream=stream), want)


def test_views_that_start_between_words(rng, stream):
    # a view at an odd column starts off a 4-byte boundary: its rows are
    # read and written a byte at a time, with the same result
    values = rng.integers(0, 256, (61, 203), dtype=np.uint8)
    dev = fastmog.GpuMat.from_array(values, stream=stream)
    for x0, x1 in ((1, 200), (3, 202), (5, 6), (2, 11)):
        view, host = dev[4:57, x0:x1], values[4:57, x0:x1]
        for op in ("erode", "dilate", "open", "close"):
            got = fastmog.morphology(view, op, (5, 3), stream=stream).download(stream=stream)
            np.testing.assert_array_equal(got, fastmog.cpu.morphology(host, op, (5, 3)),
                                          err_msg=f"{op} columns {x0}-{x1}")
            got = fastmog.morphology(view, op, 3, foreground=int(values[5, 7]), stream=stream)
            binary = np.where(host == values[5, 7], 255, 0).astype(np.uint8)
            np.testing.assert_array_equal(got.download(stream=stream),
                                          fastmog.cpu.morphology(binary, op, 3))


def test_binary_3x3_openings_and_closings_across_lanes_warps_and_bands(rng, stream):
    # the 3x3 opening or closing of a mask made binary works on bits: 8
    # pixels a lane, 240 columns a warp, 8 rows a band; sizes on each side
    # of those edges, and views that start 8 bytes in (still on bits) or 1
    # byte in (bytes), equal the host
    def check(dev, host, label):
        binary = np.where(host == 255, 255, 0).astype(np.uint8)
        for op in ("open", "close"):
            got = fastmog.morphology(dev, op, 3, foreground=255, stream=stream)
            np.testing.assert_array_equal(got.download(stream=stream),
                                          fastmog.cpu.morphology(binary, op, 3),
                                          err_msg=f"{op} {label}")

    for h, w in ((1, 1), (3, 5), (8, 240), (9, 241), (7, 239), (17, 256), (16, 481),
                 (33, 960), (25, 1000), (70, 1921)):
        mask = random_mask(rng, (h, w))
        check(fastmog.GpuMat.from_array(mask, stream=stream), mask, f"{h}x{w}")
    mask = random_mask(rng, (41, 530))
    dev = fastmog.GpuMat.from_array(mask, stream=stream)
    for x0 in (8, 1, 16):
        check(dev[3:39, x0:x0 + 500], mask[3:39, x0:x0 + 500], f"from column {x0}")


def test_small_openings_and_closings_read_and_write_the_mask_once(rng, stream):
    # up to 5x5, once: both passes in one launch (the timer counts the bytes
    # the GPU work moves); larger elements or more iterations: pass by pass.
    # Equal to the host either way, at the borders of odd sizes too
    mask = np.where(rng.random((45, 77)) < 0.5, 255, 0).astype(np.uint8)
    mask[rng.random(mask.shape) < 0.1] = 127
    dev = fastmog.GpuMat.from_array(mask, stream=stream)
    for op in ("open", "close"):
        for kernel, iterations, passes in ((3, 1, 1), ((5, 1), 1, 1), ((3, 5), 1, 1),
                                           (5, 1, 1), (7, 1, 2), (3, 2, 4)):
            for foreground in (None, 255):
                t = fastmog.Timer(nvtx=False)
                got = fastmog.morphology(dev, op, kernel, iterations=iterations, timer=t,
                                         stream=stream, foreground=foreground)
                host = mask if foreground is None else np.where(mask == 255, 255, 0).astype(np.uint8)
                np.testing.assert_array_equal(
                    got.download(stream=stream),
                    fastmog.cpu.morphology(host, op, kernel, iterations=iterations),
                    err_msg=f"{op} {kernel} x{iterations} foreground {foreground}")
                record, = [r for r in t.records if r.name == "morphology"]
                assert (record.bytes_read, record.bytes_written) == (passes * mask.size,) * 2


def test_4k_mask_of_the_subtractor(rng, stream):
    frame = rng.integers(0, 256, (2160, 3840), dtype=np.uint8)
    sub = fastmog.BackgroundSubtractorMOG2()
    sub.apply(frame, stream=stream)
    mask = sub.apply(rng.integers(0, 256, frame.shape, dtype=np.uint8), stream=stream)
    host = mask.download(stream=stream)
    got = fastmog.morphology(mask, "open", 3, stream=stream).download(stream=stream)
    np.testing.assert_array_equal(got, fastmog.cpu.morphology(host, "open", 3))


def test_bad_input_is_refused_before_any_work(stream):
    mask = fastmog.GpuMat((8, 8), np.uint8)
    with pytest.raises(ValueError, match="op must be one of"):
        fastmog.morphology(mask, "blur", 3, stream=stream)
    with pytest.raises(ValueError, match="from 1 to 31"):
        fastmog.morphology(mask, "open", 33, stream=stream)
    with pytest.raises(TypeError, match="stream= is required"):
        fastmog.morphology(mask, "open", 3, stream=None)
    with pytest.raises(TypeError):
        fastmog.morphology(fastmog.GpuMat((8, 8), np.float32), "open", 3, stream=stream)
    with pytest.raises(ValueError):
        fastmog.morphology(mask, "open", 3, stream=stream, out=fastmog.GpuMat((8, 9), np.uint8))


def _stack_of(masks, stream, *args, **kwargs):
    devs = [fastmog.GpuMat.from_array(m, stream=stream) for m in masks]
    return morphology_stack(devs, *args, stream=stream, **kwargs).download(stream=stream)


@pytest.mark.parametrize("op", ["erode", "dilate", "open", "close"])
def test_a_stack_is_each_masks_own_morphology(rng, stream, op):
    # 70 masks: three launches of at most 32, each mask its own image (its
    # top and bottom rows never see a neighbour's); odd heights and widths
    for h, w, n in ((37, 51, 70), (1, 9, 3), (64, 64, 33)):
        masks = [np.where(rng.random((h, w)) < 0.4, 255, 0).astype(np.uint8)
                 for _ in range(n)]
        for m in masks:
            m[0], m[-1] = 255, 0                  # what a shared border would spread
        for kernel, shape, iterations in ((3, "rect", 2), (3, "rect", 1), ((5, 3), "cross", 1),
                                          ((5, 9), "ellipse", 2), (7, "cross", 2)):
            got = _stack_of(masks, stream, op, kernel, shape=shape, iterations=iterations)
            for k, m in enumerate(masks):
                want = fastmog.cpu.morphology(m, op, kernel, shape=shape, iterations=iterations)
                np.testing.assert_array_equal(got[k * h:(k + 1) * h], want,
                                              err_msg=f"{op} {kernel} {shape} x{iterations} "
                                                      f"mask {k} of {n}")


def test_a_stack_makes_masks_binary_into_a_given_stack(rng, stream):
    masks = [rng.choice(np.array([0, 127, 255], np.uint8), (24, 40)) for _ in range(5)]
    out = fastmog.GpuMat((5 * 24, 40), np.uint8)
    t = fastmog.Timer(nvtx=False)
    devs = [fastmog.GpuMat.from_array(m, stream=stream) for m in masks]
    assert morphology_stack(devs, "open", 3, stream=stream, foreground=127, out=out,
                            timer=t) is out
    got = out.download(stream=stream)
    for k, m in enumerate(masks):
        want = fastmog.cpu.morphology(np.where(m == 127, 255, 0).astype(np.uint8), "open", 3)
        np.testing.assert_array_equal(got[k * 24:(k + 1) * 24], want)
    assert [r.name for r in t.records if r.name == "morphology"] == ["morphology"]


def test_a_bad_stack_is_refused_before_any_work(stream):
    a, b = fastmog.GpuMat((8, 8), np.uint8), fastmog.GpuMat((8, 8), np.uint8)
    stack = fastmog.GpuMat((16, 8), np.uint8)
    stack.upload(np.full((16, 8), 7, np.uint8), stream=stream)
    cases = [
        (ValueError, "one shape", dict(masks=[a, fastmog.GpuMat((9, 8), np.uint8)])),
        (TypeError, "uint8", dict(masks=[a, fastmog.GpuMat((8, 8), np.float32)])),
        (TypeError, "GpuMat", dict(masks=[a, np.zeros((8, 8), np.uint8)])),
        (ValueError, "at least one", dict(masks=[])),
        (ValueError, "stack", dict(masks=[a, b], out=fastmog.GpuMat((17, 8), np.uint8))),
        (ValueError, "overlaps", dict(masks=[stack[0:8], b], out=stack)),
    ]
    for error, match, kwargs in cases:
        kwargs.setdefault("out", None)
        masks, out = kwargs["masks"], kwargs["out"]
        with pytest.raises(error, match=match):
            morphology_stack(masks, "open", 3, stream=stream, out=out)
    # nothing was queued: the stack still holds what was uploaded
    np.testing.assert_array_equal(stack.download(stream=stream), 7)
