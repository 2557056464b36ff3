"""A short, steady MOG2 workload for Nsight Compute: 4K grey and BGR frames of
a real scene (vtest.avi tiled), 40 warm-up applies then 4 more of each.

    ncu --clock-control none -k regex:mog2_apply --launch-skip 40 --launch-count 2 \\
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \\
        python benchmarks/profile_kernel.py --data DIR
"""
import sys

import numpy as np

import fastmog
from run import find_test_data, real_frames


def main():
    data = sys.argv[sys.argv.index("--data") + 1] if "--data" in sys.argv else find_test_data()
    with fastmog.Stream() as s:
        for colour in ("grey", "bgr"):
            frames = [fastmog.GpuMat.from_array(f, stream=s)
                      for f in real_frames(data, 2160, 3840, colour, 40)]
            sub = fastmog.BackgroundSubtractorMOG2()
            mask = fastmog.GpuMat((2160, 3840), np.uint8)
            for i in range(44):
                sub.apply(frames[i % 40], stream=s, fgmask=mask)
            s.synchronize()
            print(colour, "mean modes", sub.mode_counts().download(stream=s).mean())


if __name__ == "__main__":
    main()
