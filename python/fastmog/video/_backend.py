"""What VideoReader asks of a decoder backend (the interface, written down
once), and the interruptible open every backend uses."""
import threading
import time
from collections.abc import Iterator
from typing import Protocol

import numpy as np

from ._errors import DecodeError

# One decoded frame as a backend yields it: NVDEC's luma and chroma planes (or
# None, None), the host ring buffer (or None), and the presentation time in
# seconds (or None).
Planes = tuple[object, object, np.ndarray | None, float | None]


class Backend(Protocol):
    """A decoder behind fastmog.VideoReader: the host's (FFmpeg through OpenCV)
    or NVDEC's, one session or several. It is open once constructed; the
    reader asks for `frames()` once and closes it once."""

    name: str                   # "cpu" or "nvdec": VideoReader.backend
    width: int
    height: int
    codec: str | None
    declared: int               # the frame count the container declares, 0 if unknown
    fps: float | None           # the container's frame rate, None if unknown

    def frames(self) -> Iterator[Planes]:
        """The frames in order; DecodeError (with frame_index) where the
        stream breaks, after every frame before it."""
        ...

    def close(self) -> None:
        """Releases the decoder; frames handed out are invalid after it."""
        ...


def open_interruptibly(opener, timeout, what):
    """Runs a blocking open (a FIFO without a writer, a camera that does not
    answer) in a daemon thread and waits in short steps, so Ctrl-C raises
    KeyboardInterrupt at once and `timeout` seconds raise DecodeError. The
    abandoned open is left to finish (or block) in its thread."""
    result = {}

    def run():
        try:
            result["value"] = opener()
        except BaseException as e:          # handed to the waiting thread
            result["error"] = e

    worker = threading.Thread(target=run, name=f"fastmog open {what}", daemon=True)
    worker.start()
    deadline = None if timeout is None else time.monotonic() + timeout
    while worker.is_alive():
        worker.join(0.05)
        if deadline is not None and time.monotonic() > deadline and worker.is_alive():
            raise DecodeError(f"cannot open {what}: no answer within {timeout:g} s")
    if "error" in result:
        raise result["error"]
    return result["value"]
