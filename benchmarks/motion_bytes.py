"""What leaves the GPU per camera-frame when only motion results are wanted:
MOG2 and fastmog.MotionDetector on the GPU over a real video, the bytes each
frame's calls copied to the host counted by the timer (CallRecord
bytes_written of the calls that read back: connected_components and any
download), beside the regions found. The issue's target: at most 1 KB per
camera-frame for a scene with up to 32 regions.

    python benchmarks/motion_bytes.py [VIDEO] [--frames N] [--zones]

VIDEO defaults to ../shared/data/opencv_samples_video/vtest.avi (or
.testdata/...); --zones splits the frame into two zones. Needs a GPU and
OpenCV to read the video.
"""
import argparse
import pathlib

import cv2
import numpy as np

import fastmog

ROOT = pathlib.Path(__file__).resolve().parents[1]
READ_BACK = {"connected_components", "GpuMat.download"}


def default_video():
    for base in (ROOT.parent / "shared" / "data", ROOT / ".testdata"):
        path = base / "opencv_samples_video" / "vtest.avi"
        if path.is_file():
            return path
    raise SystemExit("no vtest.avi in ../shared/data or .testdata: name a video")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("video", nargs="?", type=pathlib.Path)
    p.add_argument("--frames", type=int, default=300)
    p.add_argument("--zones", action="store_true")
    args = p.parse_args()
    video = args.video or default_video()
    cap = cv2.VideoCapture(str(video))
    ok, frame = cap.read()
    if not ok:
        raise SystemExit(f"cannot read {video}")
    h, w = frame.shape[:2]
    zones = None
    if args.zones:
        zones = [[[0, 0], [w // 2 - 1, 0], [w // 2 - 1, h - 1], [0, h - 1]],
                 [[w // 2, 0], [w - 1, 0], [w - 1, h - 1], [w // 2, h - 1]]]
    s = fastmog.Stream()
    sub = fastmog.BackgroundSubtractorMOG2()
    det = fastmog.MotionDetector(zones=zones, min_area=30)
    rows = []                       # (regions, bytes) per frame
    for _ in range(args.frames):
        mask = sub.apply(fastmog.GpuMat.from_array(frame, stream=s), stream=s)
        t = fastmog.Timer(nvtx=False)
        m = det.update(mask, stream=s, timer=t)
        sent = sum(r.bytes_written for r in t.records if r.name in READ_BACK)
        rows.append((sum(z.regions.count for z in m.zones), sent))
        ok, frame = cap.read()
        if not ok:
            break
    regions = np.array([r for r, _ in rows])
    sent = np.array([b for _, b in rows])
    print(f"{video.name} {w}x{h}, {len(rows)} frames, {fastmog.device_properties()['name']}, "
          f"{'two zones' if zones else 'the whole frame'}")
    print(f"regions per frame: median {np.median(regions):.0f}, max {regions.max()}")
    print(f"bytes to the host per frame: median {np.median(sent):.0f}, max {sent.max()}")
    small = regions <= 32
    if small.any():
        print(f"frames with at most 32 regions: {small.sum()}, their bytes at most "
              f"{sent[small].max()} (target 1024)")


if __name__ == "__main__":
    main()
