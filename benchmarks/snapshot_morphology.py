"""Two GPU measurements the open issues ask for, side by side in one run:
the time to snapshot and to restore a 1080p BGR MOG2 model (issue 24: a
restore within 50 ms on the H200), against the bytes' PCIe bound; and
fastmog.morphology on a 4K mask against the MOG2 kernel it follows and
OpenCV's CPU morphologyEx (issue 23: the motion step adds at most 25 % to
the MOG2 kernel's time). Every result is checked against the host before it
is timed. Best of 5, ms.

    python benchmarks/snapshot_morphology.py

Needs a GPU and OpenCV.
"""
import cv2
import numpy as np

import fastmog
from motion_host import best_ms         # benchmarks/ is on the path of a script here


def snapshot_rows(stream, rng):
    h, w = 1080, 1920
    sub = fastmog.BackgroundSubtractorMOG2()
    host = fastmog.cpu.BackgroundSubtractorMOG2()
    for _ in range(30):                  # several modes per pixel
        frame = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        sub.apply(frame, stream=stream)
        host.apply(frame)
    snap = sub.snapshot(stream=stream)
    for k in ("weight", "variance", "mean", "mode_count"):
        assert np.array_equal(snap[k].view(np.uint8), host.snapshot()[k].view(np.uint8)), k
    nbytes = sum(snap[k].nbytes for k in ("weight", "variance", "mean", "mode_count"))

    def restore():
        fastmog.BackgroundSubtractorMOG2.restore(snap, stream=stream)
        stream.synchronize()

    rows = -(-nbytes // 8192)            # as an image 8192 bytes wide: a width is limited
    probe = fastmog.pinned_empty((rows, 8192), np.uint8)
    dev = fastmog.GpuMat((rows, 8192), np.uint8)

    def pinned_upload():
        dev.upload(probe, stream=stream)
        stream.synchronize()

    return [("snapshot 1080p BGR (download)", best_ms(lambda: sub.snapshot(stream=stream))),
            ("restore 1080p BGR (upload)", best_ms(restore)),
            (f"PCIe bound: {nbytes / 1e6:.0f} MB pinned upload", best_ms(pinned_upload))]


def morphology_rows(stream, rng):
    h, w = 2160, 3840
    sub = fastmog.BackgroundSubtractorMOG2()
    frames = [fastmog.GpuMat.from_array(rng.integers(0, 256, (h, w), dtype=np.uint8),
                                        stream=stream) for _ in range(2)]
    sub.apply(frames[0], stream=stream)
    mask = sub.apply(frames[1], stream=stream)
    host_mask = mask.download(stream=stream)
    out, timed_mask = fastmog.GpuMat((h, w), np.uint8), fastmog.GpuMat((h, w), np.uint8)
    rows = []

    def mog2():                          # into a mask of its own: `mask` stays what was checked
        sub.apply(frames[1], stream=stream, fgmask=timed_mask)
        stream.synchronize()

    rows.append(("MOG2 apply, 4K grey", best_ms(mog2)))
    for op, kernel, shape in (("open", 3, "rect"), ("open", 5, "ellipse"),
                              ("open", 31, "rect")):
        want = fastmog.cpu.morphology(host_mask, op, kernel, shape=shape)
        got = fastmog.morphology(mask, op, kernel, shape=shape, stream=stream, out=out)
        assert np.array_equal(got.download(stream=stream), want), (op, kernel, shape)

        def gpu():
            fastmog.morphology(mask, op, kernel, shape=shape, stream=stream, out=out)
            stream.synchronize()

        element = fastmog.motion.structuring_element(kernel, shape)
        code = {"open": cv2.MORPH_OPEN}[op]
        rows.append((f"morphology {op} {shape} {kernel}x{kernel}, 4K", best_ms(gpu)))
        rows.append(("  OpenCV CPU morphologyEx, same",
                     best_ms(lambda: cv2.morphologyEx(host_mask, code, element))))
    return rows


def main():
    rng = np.random.default_rng(0)
    props = fastmog.device_properties()
    print(f"fastmog {fastmog.__version__} on {props['name']}, OpenCV {cv2.__version__} with "
          f"{cv2.getNumThreads()} threads; best of 5")
    with fastmog.Stream() as stream:
        for name, ms in snapshot_rows(stream, rng) + morphology_rows(stream, rng):
            print(f"{name:48s} {ms:9.3f} ms")


if __name__ == "__main__":
    main()
