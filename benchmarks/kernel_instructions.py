"""The MOG2 kernel's instruction floor, from Nsight Compute: on each of issue
25's 4K scenes, one `apply` after 200 warm-up frames (profile_kernel.py) is
profiled for its executed warp instructions and the SM clock it ran at; the
floor is the time the schedulers need just to issue them (the busiest
scheduler's average: four per SM, one instruction per cycle each). Written
as JSON for benchmarks/run.py, which prints it beside each kernel figure.

    python benchmarks/kernel_instructions.py [--write benchmarks/kernel_instructions.json]

Needs `ncu` on PATH and a GPU it may profile.
"""
import argparse
import csv
import io
import json
import pathlib
import subprocess
import sys

import fastmog

HERE = pathlib.Path(__file__).resolve().parent
METRICS = ("smsp__inst_executed.sum", "smsp__inst_executed.avg", "smsp__thread_inst_executed.sum",
           "smsp__cycles_elapsed.avg.per_second", "gpu__time_duration.sum")
SCENES = [("grey", False), ("grey", True), ("bgr", False), ("bgr", True)]
PIXELS = 3840 * 2160


def profile(colour, noise):
    """{metric: value} of one apply's kernel on the scene."""
    cmd = ["ncu", "--csv", "--clock-control", "none", "-k", "regex:mog2_apply_kernel",
           "--launch-skip", "200", "--launch-count", "1", "--metrics", ",".join(METRICS),
           sys.executable, str(HERE / "profile_kernel.py"), "--colour", colour]
    if noise:
        cmd.append("--noise")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=HERE).stdout
    start = out.index('"ID"')           # ncu's own lines come before the table
    values = {}
    for row in csv.DictReader(io.StringIO(out[start:])):
        value = float(row["Metric Value"].replace(",", ""))
        unit = row["Metric Unit"]
        # ncu picks its units: rates and times are brought to hertz and seconds
        scale = {"hz": 1, "khz": 1e3, "mhz": 1e6, "ghz": 1e9, "cycle/nsecond": 1e9,
                 "cycle/usecond": 1e6, "cycle/second": 1, "ns": 1e-9, "nsecond": 1e-9,
                 "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3, "s": 1,
                 "second": 1}.get(unit.lower(), 1)
        values[row["Metric Name"]] = value * scale
    missing = [m for m in METRICS if m not in values]
    if missing:
        raise SystemExit(f"ncu reported no {', '.join(missing)} for {colour}")
    return values


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=pathlib.Path, default=None)
    args = parser.parse_args()
    result = {"device": fastmog.device_properties()["name"], "scenes": {}}
    for colour, noise in SCENES:
        v = profile(colour, noise)
        clock = v["smsp__cycles_elapsed.avg.per_second"]
        floor_ms = v["smsp__inst_executed.avg"] / clock * 1e3
        scene = f"{colour} {'noise' if noise else 'real'}"
        result["scenes"][scene] = {
            "warp_instructions_per_32_pixels": 32 * v["smsp__inst_executed.sum"] / PIXELS,
            "thread_instructions_per_pixel": v["smsp__thread_inst_executed.sum"] / PIXELS,
            "clock_ghz": clock / 1e9, "issue_floor_ms": floor_ms,
            "kernel_ms_under_ncu": v["gpu__time_duration.sum"] * 1e3}
        r = result["scenes"][scene]
        print(f"{scene}: {r['thread_instructions_per_pixel']:.0f} instructions per pixel, "
              f"{r['warp_instructions_per_32_pixels']:.0f} per warp of 32, issue floor "
              f"{floor_ms:.3f} ms at {clock / 1e9:.2f} GHz; the kernel "
              f"{r['kernel_ms_under_ncu']:.3f} ms under ncu")
    if args.write is not None:
        args.write.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.write}")


if __name__ == "__main__":
    main()
