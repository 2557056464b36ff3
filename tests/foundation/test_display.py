"""fastmog.Image, the notebook display of a downloaded frame, mask or
background: what it cannot show is refused when it is made, not later when
Jupyter calls _repr_png_ (where the error is easy to miss)."""
import numpy as np
import pytest

import fastmog


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint16, np.int64, bool])
def test_other_pixel_types_are_refused_at_construction(dtype):
    with pytest.raises(TypeError, match=f"uint8 pixels.*got {np.dtype(dtype)}"):
        fastmog.Image(np.zeros((4, 6), dtype))


@pytest.mark.parametrize("shape", [(6,), (4, 6, 2), (4, 6, 5), (1, 4, 6, 3), (0, 6), (4, 0, 3)])
def test_other_shapes_are_refused_at_construction(shape):
    with pytest.raises(ValueError, match="fastmog.Image takes"):
        fastmog.Image(np.zeros(shape, np.uint8))


def test_device_arrays_are_refused_download_first():
    class DeviceArray:  # any CUDA-array-interface producer, as a GpuMat is
        @property
        def __cuda_array_interface__(self):
            raise AssertionError("Image must not touch device memory")

    with pytest.raises(TypeError, match="download"):
        fastmog.Image(DeviceArray())


@pytest.mark.parametrize("shape", [(4, 6), (4, 6, 1), (4, 6, 3), (4, 6, 4)])
def test_uint8_images_display(shape):
    image = fastmog.Image(np.arange(np.prod(shape), dtype=np.uint8).reshape(shape))
    png = image._repr_png_()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert repr(image) == f"<fastmog.Image {shape} uint8>"
