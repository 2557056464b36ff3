"""fastmog.DevicePointer: device memory known only by its address (a
DeepStream NvBufSurface plane, a pointer from another library's C API),
described well enough for fastmog to view it without copying."""
import numpy as np


class DevicePointer:
    """Device memory at address `ptr`: `shape` is (H, W) or (H, W, C), rows
    `pitch` bytes apart (default: packed). `owner` is kept alive as long as any
    view of this memory exists, so the memory must live as long as `owner`
    does. `stream` is the raw handle of the stream that last wrote the memory
    (fastmog orders its work after it), or None when the memory is ready now.

    It offers the CUDA Array Interface, so ``fastmog.asgpumat(p, stream=s)``,
    ``apply(p, ...)`` and ``nv12_to_bgr(p, ...)`` all take it.
    """

    def __init__(self, ptr, shape, dtype=np.uint8, *, pitch=None, owner=None, readonly=False,
                 stream=None):
        if not isinstance(ptr, int) or isinstance(ptr, bool) or ptr <= 0:
            raise ValueError(f"ptr must be a device address (a positive int), got {ptr!r}")
        self.shape = tuple(int(n) for n in shape)
        if len(self.shape) not in (2, 3):
            raise ValueError(f"shape must be (H, W) or (H, W, C), got {shape!r}")
        self.dtype = np.dtype(dtype)
        row = self.shape[1] * (self.shape[2] if len(self.shape) == 3 else 1) * self.dtype.itemsize
        if pitch is not None and (not isinstance(pitch, int) or pitch < row):
            raise ValueError(f"pitch must be an int of at least {row} bytes (one row), got {pitch!r}")
        if stream is not None and (not isinstance(stream, int) or stream < 0):
            raise ValueError(f"stream must be None or a raw stream handle (int), got {stream!r}")
        self.ptr, self.pitch, self.owner = ptr, pitch, owner
        self.readonly, self.stream = bool(readonly), stream

    @property
    def __cuda_array_interface__(self):
        strides = None
        if self.pitch is not None:
            item = self.dtype.itemsize
            inner = (self.shape[2] * item, item) if len(self.shape) == 3 else (item,)
            strides = (self.pitch,) + inner
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, self.readonly),
                "strides": strides, "stream": self.stream, "version": 3}

    def __repr__(self):
        return (f"fastmog.DevicePointer(0x{self.ptr:x}, shape={self.shape}, dtype={self.dtype}, "
                f"pitch={self.pitch})")
