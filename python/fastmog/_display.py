"""Images for notebooks: fastmog.Image(array) shows a downloaded frame, mask or
background as a PNG in Jupyter. It takes host arrays only, so displaying never
synchronizes or copies from the GPU behind your back: download first."""
import struct
import zlib

import numpy as np


def encode_png(array):
    """PNG bytes of a uint8 H x W (grey) or H x W x 3/4 (BGR/BGRA, as OpenCV
    stores colour) array."""
    a = np.asarray(array)
    if a.dtype != np.uint8:
        raise TypeError(f"expected uint8 pixels, got {a.dtype}")
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.ndim == 2:
        colour_type, rows = 0, a
    elif a.ndim == 3 and a.shape[2] in (3, 4):
        order = [2, 1, 0] if a.shape[2] == 3 else [2, 1, 0, 3]
        colour_type, rows = (2 if a.shape[2] == 3 else 6), a[:, :, order]
    else:
        raise ValueError(f"expected H x W or H x W x 3/4, got shape {a.shape}")
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
    """Wraps a host image so notebooks display it: ``fastmog.Image(mask)``."""

    def __init__(self, array):
        self.array = np.asarray(array)

    def _repr_png_(self):
        return encode_png(self.array)

    def __repr__(self):
        return f"<fastmog.Image {self.array.shape} {self.array.dtype}>"
