"""fastmog.morphology on the GPU against the host face (itself equal to
cv2.morphologyEx, tests/motion/test_motion_host.py): every op, element shape
and size 1-31, iterations, in place, borders; bad input refused before any
work."""
import numpy as np
import pytest

import fastmog
from fastmog.motion import SHAPES

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
