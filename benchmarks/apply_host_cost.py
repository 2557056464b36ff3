"""Host time per call of apply and apply_batch on 64x64 device frames, where
the GPU work is negligible: what a build adds on the host, with the timer
off, with NVTX ranges only, and with the timer on (a profile() block), beside
CuPy's in-place add on a 64x64 array as the reference of a library call that
queues one kernel, and above the floor: an empty kernel queued by a one-line
Python extension (launch_floor.cu, built here with nvcc), and the same launch
in a C loop (the driver's share alone). For comparing two builds in one run:
PYTHONPATH=<other build>/python python benchmarks/apply_host_cost.py old

Targets (issue 22): timer off <= 4 us per apply, NVTX only <= 6, timer on <= 8."""
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time

import numpy as np

import fastmog


# Calls per burst in the host-cost rows: the stream is drained (untimed)
# before each burst, so the launch queue never fills and a call is never
# timed waiting for the GPU to free a slot. A sustained loop of 20000 calls
# measures the slower of the host and the GPU's rate of back-to-back tiny
# kernels instead; both are printed.
BURST = 200


def per_call_us(call, calls, sync, before=None, burst=None):
    """Best and median of 5 timed loops of `calls` calls, in microseconds;
    `before()` runs ahead of each loop, untimed (a timer's reset). With
    `burst`, each loop is timed in bursts of that many calls with the stream
    drained before each, untimed."""
    for _ in range(200):
        call()
    sync()
    burst = burst or calls
    loops = []
    for _ in range(5):
        if before is not None:
            before()
        elapsed = 0
        for _ in range(calls // burst):
            sync()
            start = time.perf_counter_ns()
            for _ in range(burst):
                call()
            elapsed += time.perf_counter_ns() - start
        loops.append(elapsed / (calls // burst * burst) / 1e3)
        sync()
    return min(loops), sorted(loops)[2]


def build_floor():
    """Imports launch_floor.cu built with nvcc into a temporary folder; None
    (having said why) where there is no nvcc or the build fails."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        print("no nvcc: no floor rows")
        return None
    folder = tempfile.mkdtemp(prefix="fastmog-floor-")
    target = os.path.join(folder, "_launch_floor" + sysconfig.get_config_var("EXT_SUFFIX"))
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch_floor.cu")
    # PTX only: the driver compiles the empty kernel for whatever GPU this is
    cmd = [nvcc, "-shared", "-Xcompiler", "-fPIC", "-O2",
           "-I" + sysconfig.get_paths()["include"],
           "-gencode", "arch=compute_75,code=compute_75", source, "-o", target]
    built = subprocess.run(cmd, capture_output=True, text=True)
    if built.returncode != 0:
        print(f"the floor did not build: {built.stderr.strip()[-300:]}")
        return None
    sys.path.insert(0, folder)
    import _launch_floor
    return _launch_floor


def floor_rows(floor, stream):
    """The floor's rows: a Python call that queues an empty kernel, and the
    same launch in a C loop."""
    handle = stream.handle
    for pace, burst in (("burst", BURST), ("sustained", None)):
        best, median = per_call_us(lambda: floor.launch(handle), 20000, stream.synchronize,
                                   burst=burst)
        print(f"{'floor':5s} {pace:9s} {'Python + launch':18s} {'empty kernel':15s} "
              f"best {best:6.2f} us  median {median:6.2f} us")
        for label, driver in (("C loop, runtime", False), ("C loop, driver", True)):
            loops = []
            for _ in range(5):
                n, total = 0, 0.0
                while n < 20000:
                    stream.synchronize()
                    count = burst or 20000
                    total += floor.launch_loop(handle, count, driver) * count
                    n += count
                loops.append(total / n / 1e3)
                stream.synchronize()
            loops.sort()
            print(f"{'floor':5s} {pace:9s} {label:18s} {'empty kernel':15s} "
                  f"best {loops[0]:6.2f} us  median {loops[2]:6.2f} us")


def main():
    tag = sys.argv[1] if len(sys.argv) > 1 else "this"
    s = fastmog.Stream()
    frames = [fastmog.GpuMat.from_array(np.full((64, 64), 9 + i, np.uint8), stream=s)
              for i in range(16)]
    masks = [fastmog.GpuMat((64, 64)) for _ in range(16)]
    sub = fastmog.BackgroundSubtractorMOG2()
    rows = (("apply fgmask", 20000, lambda: sub.apply(frames[0], stream=s, fgmask=masks[0])),
            ("apply own mask", 20000, lambda: sub.apply(frames[0], stream=s)),
            ("apply_batch 1", 20000, lambda: sub.apply_batch(frames[:1], stream=s,
                                                             fgmasks=masks[:1])),
            ("apply_batch 16", 4000, lambda: sub.apply_batch(frames, stream=s, fgmasks=masks)))
    print(f"{fastmog.__file__} on {fastmog.device_properties()['name']}")
    # the modes take turns, three rounds: whichever ran first would otherwise
    # pay for a cold CPU (clock ramp, caches) alone
    modes = ("timer off", "NVTX only", "timer on", "timer on, no NVTX")
    results = {}
    for _ in range(3):
        for mode in modes:
            timer = None
            fastmog.set_nvtx(mode == "NVTX only")
            if mode.startswith("timer on"):
                timer = fastmog.Timer(nvtx=mode == "timer on")
                token = fastmog._fastmog._profile_enter(timer)
            try:
                for name, calls, call in rows:
                    for pace, burst in (("burst", BURST), ("sustained", None)):
                        results.setdefault((mode, pace, name), []).append(
                            per_call_us(call, calls, s.synchronize,
                                        timer.reset if timer is not None else None, burst))
            finally:
                if timer is not None:
                    fastmog._fastmog._profile_exit(token)
                fastmog.set_nvtx(False)
    for (mode, pace, name), runs in results.items():
        best = min(b for b, _ in runs)
        median = sorted(m for _, m in runs)[len(runs) // 2]
        print(f"{tag:5s} {pace:9s} {mode:18s} {name:15s} best {best:6.2f} us  "
              f"median {median:6.2f} us")
    floor = build_floor()
    if floor is not None:
        floor_rows(floor, s)
    try:
        import cupy
    except ImportError:
        print("CuPy not installed: no reference row")
        return
    a = cupy.zeros((64, 64), cupy.uint8)

    def add():
        a.__iadd__(1)

    for pace, burst in (("burst", BURST), ("sustained", None)):
        best, median = per_call_us(add, 20000, cupy.cuda.get_current_stream().synchronize,
                                   burst=burst)
        print(f"{'ref':5s} {pace:9s} {'CuPy a += 1':18s} {'64x64 uint8':15s} "
              f"best {best:6.2f} us  median {median:6.2f} us")


if __name__ == "__main__":
    main()
