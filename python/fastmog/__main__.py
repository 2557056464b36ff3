"""python -m fastmog: a short smoke demo of the foundation.

Prints what CUDA sees; with a GPU, moves a synthetic 4K frame to the device
and back on an explicit stream and reports the transfer times."""
import sys
import time

import numpy as np

import fastmog


def main(argv=None):
    report = fastmog.diagnose()
    if not report["devices"]:
        print("Nothing to run on the GPU here; fastmog imported fine.")
        return 0
    rng = np.random.default_rng(0)
    frame = fastmog.pinned_empty((2160, 3840), np.uint8)
    frame[:] = rng.integers(0, 256, frame.shape, dtype=np.uint8)
    with fastmog.Stream() as stream:
        image = fastmog.GpuMat(frame.shape, np.uint8)
        image.upload(frame, stream=stream)     # warm-up: first use loads the kernels
        image.download(stream=stream)
        start, end = fastmog.Event(), fastmog.Event()
        start.record(stream=stream)
        image.upload(frame, stream=stream)
        back = image.download(stream=stream)   # blocking: waits for the copy
        end.record(stream=stream)
        end.synchronize()
        ok = np.array_equal(back, frame)
        ms = start.elapsed_time(end)
        print(f"4K grey frame up and down on {stream!r}: {ms:.3f} ms GPU time, "
              f"round trip {'exact' if ok else 'WRONG'}")
        image.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
