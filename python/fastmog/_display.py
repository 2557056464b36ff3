"""Images for notebooks: fastmog.Image(array) shows a downloaded frame, mask or
background as a PNG in Jupyter. It takes host arrays only, so displaying never
synchronizes or copies from the GPU behind your back: download first."""
import struct
import zlib

import numpy as np


def _image_array(array):
    """The host array as a displayable image: uint8, H x W or H x W x 1/3/4,
    not empty. Anything else is refused here, not when a notebook displays it:
    TypeError for other pixel types (no silent scaling or clipping of floats),
    ValueError for other shapes."""
    if hasattr(type(array), "__cuda_array_interface__"):  # the class: no getter runs
        raise TypeError("fastmog.Image takes host arrays: download the GpuMat first "
                        "(displaying never copies from the GPU behind your back)")
    a = np.asarray(array)
    if a.dtype != np.uint8:
        raise TypeError(f"fastmog.Image takes uint8 pixels (a frame, mask or background), "
                        f"got {a.dtype}: convert first, e.g. "
                        f"np.clip(a, 0, 255).astype(np.uint8)")
    if not (a.ndim == 2 or (a.ndim == 3 and a.shape[2] in (1, 3, 4))):
        raise ValueError(f"fastmog.Image takes H x W or H x W x 1/3/4 pixels, got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"fastmog.Image takes a non-empty image, got shape {a.shape}")
    return a


def encode_png(array):
    """PNG bytes of a uint8 H x W (grey) or H x W x 3/4 (BGR/BGRA, as OpenCV
    stores colour) array."""
    a = _image_array(array)
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.ndim == 2:
        colour_type, rows = 0, a
    else:
        order = [2, 1, 0] if a.shape[2] == 3 else [2, 1, 0, 3]
        colour_type, rows = (2 if a.shape[2] == 3 else 6), a[:, :, order]
    h, w = a.shape[:2]
    raw = np.ascontiguousarray(rows).reshape(h, -1)
    body = b"".join(b"\x00" + raw[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 8, colour_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(body, 6)) + chunk(b"IEND", b""))


class Image:
    """Wraps a host image so notebooks display it: ``fastmog.Image(mask)``.

    Takes what fastmog produces once downloaded: uint8, H x W (grey) or
    H x W x 3/4 (BGR/BGRA). Anything else raises here, at construction
    (TypeError for another dtype, such as a float array, or a GpuMat;
    ValueError for another shape or an empty image), not later when displayed."""

    def __init__(self, array):
        self.array = _image_array(array)

    def _repr_png_(self):
        return encode_png(self.array)

    def __repr__(self):
        return f"<fastmog.Image {self.array.shape} {self.array.dtype}>"
