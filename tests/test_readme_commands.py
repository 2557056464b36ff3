"""Every main-job command of the README runs on a fresh clone: its example
names (video.mp4, cdnet/highway, frames/, cam1.mp4, the scheduler address) are
replaced by real test data, and long runs are cut to a few frames; each must
exit 0 and write what it says."""
import glob
import os
import pathlib
import re
import shlex
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _block(heading):
    section = README.split(heading, 1)[1]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def _commands(heading):
    lines = []
    for line in _block(heading).splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("python -m fastmog"):
            lines.append(shlex.split(line)[3:])
    return lines


def _run(args, cwd):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    r = subprocess.run([sys.executable, "-m", "fastmog", *args], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"fastmog {' '.join(args)}\n{r.stderr}"
    return r


def _substitute(args, names):
    return [names.get(a, a) for a in args]


def test_main_job_commands(data_dir, tmp_path):
    names = {
        "video.mp4": str(data_dir / "opencv_samples_video" / "vtest.avi"),
        "cdnet/highway": str(data_dir / "cdnet_subset_fall"),
        "frames/": str(data_dir / "cdnet_subset_traffic" / "input"),
    }
    commands = _commands("## The main job")
    assert len(commands) == 5
    for args in commands:
        short = [] if "cdnet/highway" in args else ["--frames", "3"]  # scored whole
        _run(_substitute(args, names) + short, tmp_path)
    assert (tmp_path / "masks.mkv").stat().st_size > 0
    assert (tmp_path / "preview.png").stat().st_size > 0
    assert len(list((tmp_path / "masks").glob("mask_*.png"))) == 3
    assert (tmp_path / "trace.json").stat().st_size > 0


def test_several_sources_commands(data_dir, tmp_path):
    pytest.importorskip("distributed")
    from distributed import LocalCluster

    cv2 = pytest.importorskip("cv2")
    cams = tmp_path / "cams"
    cams.mkdir()
    rng = np.random.default_rng(3)
    for k in range(2):
        w = cv2.VideoWriter(str(cams / f"cam{k}.mkv"), cv2.VideoWriter_fourcc(*"FFV1"), 25,
                            (64, 48))
        for _ in range(5):
            w.write(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8))
        w.release()
    first, second = _commands("## Many sources on a Dask cluster")
    names = {
        "cam1.mp4": str(data_dir / "opencv_samples_video" / "vtest.avi"),
        "cam2.mp4": str(data_dir / "opencv_samples_video" / "tree.avi"),
        "frames/": str(data_dir / "cdnet_subset_traffic" / "input"),
    }
    _run(_substitute(first, names) + ["--frames", "3"], tmp_path)
    assert len([p for p in (tmp_path / "masks").iterdir() if p.is_dir()]) == 3
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        args = []
        for a in second:
            if a == "cams/*.mkv":
                args += sorted(glob.glob(str(cams / "*.mkv")))
            elif a.startswith("tcp://"):
                args.append(cluster.scheduler_address)
            elif a == "/shared/masks":
                args.append(str(tmp_path / "shared_masks"))
            else:
                args.append(a)
        _run(args, tmp_path)
    assert len([p for p in (tmp_path / "shared_masks").iterdir() if p.is_dir()]) == 2
