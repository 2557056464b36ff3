"""The host backend of VideoReader: FFmpeg through OpenCV, into a ring of
pinned buffers."""
import os

import numpy as np

from .. import _fastmog
from ._backend import open_interruptibly
from ._errors import DecodeError, truncated


class HostDecoder:
    """FFmpeg through cv2.VideoCapture, decoding into a ring of `depth`
    pinned buffers (plain numpy buffers where pinned memory is unavailable)."""

    name = "cpu"

    def __init__(self, source, grey, depth, open_timeout):
        try:
            import cv2
        except ImportError:
            raise DecodeError("host decoding needs OpenCV, which is not installed: "
                              "pip install opencv-python-headless") from None
        self.cv2, self.source, self.grey, self.depth = cv2, source, grey, depth
        # bytes: OpenCV's binding crashes on a str that is not valid UTF-8
        self.cap = open_interruptibly(lambda: cv2.VideoCapture(os.fsencode(source)),
                                       open_timeout, source)
        if not self.cap.isOpened():
            raise DecodeError(f"cannot read video {source}: not a video OpenCV can open")
        self.width = int(self.cap.get(cv2.CAP_PROP_FRAME_WIDTH))
        self.height = int(self.cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        fourcc = int(self.cap.get(cv2.CAP_PROP_FOURCC))
        self.codec = fourcc.to_bytes(4, "little").decode("ascii", "replace").strip("\0 ") or None
        self.declared = (max(int(self.cap.get(cv2.CAP_PROP_FRAME_COUNT)), 0)
                         if os.path.isfile(source) else 0)
        fps = self.cap.get(cv2.CAP_PROP_FPS)
        self.fps = fps if fps > 0 else None
        self.ring, self.scratch = None, None
        self.pinned, self.pinned_reason = None, None
        self.in_place = None         # whether OpenCV wrote the last frame into the ring
        self.copies = 0              # frames copied into the ring because it did not
        if self.width > 0 and self.height > 0:
            self._allocate((self.height, self.width, 3))

    def _allocate(self, bgr_shape):
        shape = bgr_shape[:2] if self.grey else bgr_shape
        try:
            self.ring = [_fastmog.pinned_empty(shape, np.uint8) for _ in range(self.depth)]
            self.pinned = True
        except (_fastmog.CudaError, MemoryError) as e:
            # no usable GPU (or no page-locked memory): ordinary buffers still work
            self.ring = [np.empty(shape, np.uint8) for _ in range(self.depth)]
            self.pinned, self.pinned_reason = False, str(e).split(";")[0]
        self.height, self.width = bgr_shape[:2]
        if self.grey:
            self.scratch = np.empty(bgr_shape, np.uint8)   # BGR, converted into the ring

    def frames(self):
        cv2, i = self.cv2, 0
        while True:
            slot = self.ring[i % self.depth] if self.ring is not None else None
            ok, image = self.cap.read(image=self.scratch if self.grey else slot)
            if not ok:
                break
            if self.ring is None:            # a stream that told its size only now
                self._allocate(image.shape)
                slot = self.ring[0]
            if image.shape[:2] != (self.height, self.width):
                raise DecodeError(f"{self.source}: frame {i} is {image.shape[1]}x{image.shape[0]},"
                                  f" the first was {self.width}x{self.height}", frame_index=i)
            if self.grey:
                image = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY, dst=slot)
            self.in_place = image.ctypes.data == slot.ctypes.data
            if not self.in_place:
                np.copyto(slot, image)       # one copy into the ring
                self.copies += 1
            msec = self.cap.get(cv2.CAP_PROP_POS_MSEC)
            yield None, None, slot, (msec / 1000.0 if msec >= 0 else None)
            i += 1
        if self.declared and i < self.declared:
            raise truncated(self.source, i, self.declared)

    def close(self):
        self.cap.release()
