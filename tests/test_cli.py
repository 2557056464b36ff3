"""The main job, `python -m fastmog`, as a user runs it."""
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import fastmog
from conftest import GPU_OK

cv2 = pytest.importorskip("cv2")


def run(*args, timeout=300, cwd=None):
    return subprocess.run([sys.executable, "-m", "fastmog", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)


def one_error_line(result):
    lines = [l for l in result.stderr.splitlines() if l.startswith("fastmog: error:")]
    assert result.returncode != 0
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_default_run_on_the_builtin_scene(tmp_path):
    # the README's command, shortened on the host by default
    r = run("--frames", "12", "--size", "640x360", "--preview", tmp_path / "p.png",
            "--out", tmp_path / "masks")
    assert r.returncode == 0, r.stderr
    assert "frames/s" in r.stdout and "megapixels/s" in r.stdout
    assert len(list((tmp_path / "masks").glob("mask_*.png"))) == 12
    preview = cv2.imread(str(tmp_path / "p.png"))
    assert preview.shape == (360, 3 * 640, 3)
    mask = cv2.imread(str(tmp_path / "masks" / "mask_000011.png"), cv2.IMREAD_GRAYSCALE)
    assert set(np.unique(mask)) <= {0, 127, 255} and (mask == 255).any()
    if not GPU_OK:
        assert "running the host reference" in r.stderr


def test_no_arguments_runs(tmp_path):
    """The exact README command: on a machine without a GPU the host default
    is short (20 frames of 4K grey)."""
    r = run(timeout=600)
    assert r.returncode == 0, r.stderr
    assert "built-in scene, 3840x2160 grey" in r.stdout


def test_ground_truth_matches_the_host_reference(data_dir, tmp_path):
    seq = data_dir / "cdnet_subset_traffic"
    r = run(seq / "input", "--ground-truth", seq, "--cpu")
    assert r.returncode == 0, r.stderr
    from fastmog.scoring import GroundTruth, frame_number_of

    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    truth = GroundTruth(seq, lambda p: cv2.imread(str(p), cv2.IMREAD_GRAYSCALE))
    for f in sorted((seq / "input").iterdir()):
        truth.add(frame_number_of(f), sub.apply(cv2.imread(str(f), cv2.IMREAD_COLOR)))
    assert f"F-measure {truth.score.f_measure:.4f}" in r.stdout


def test_video_in_video_out(data_dir, tmp_path):
    out = tmp_path / "masks.avi"
    r = run(data_dir / "opencv_samples_video" / "tree.avi", "--out", out, "--frames", "30")
    assert r.returncode == 0, r.stderr
    cap = cv2.VideoCapture(str(out))
    n = 0
    while cap.read()[0]:
        n += 1
    assert n == 30


@pytest.mark.parametrize("case", ["missing", "unreadable", "empty_dir", "changing_size",
                                  "unwritable_out", "bad_option", "bad_parameter", "no_cv2_dir"])
def test_user_errors_give_one_line(tmp_path, case):
    if case == "missing":
        line = one_error_line(run(tmp_path / "nope.mp4"))
        assert "no such file" in line
    elif case == "unreadable":
        bad = tmp_path / "broken.avi"
        bad.write_bytes(b"not a video at all" * 100)
        line = one_error_line(run(bad))
        assert "cannot read video" in line
    elif case == "empty_dir":
        (tmp_path / "frames").mkdir()
        (tmp_path / "frames" / "notes.txt").write_text("x")
        line = one_error_line(run(tmp_path / "frames"))
        assert "holds no frames" in line
    elif case == "changing_size":
        d = tmp_path / "frames"
        d.mkdir()
        cv2.imwrite(str(d / "in000001.png"), np.full((20, 30), 9, np.uint8))
        cv2.imwrite(str(d / "in000002.png"), np.full((21, 30), 9, np.uint8))
        line = one_error_line(run(d))
        assert "one size" in line
    elif case == "unwritable_out":
        blocker = tmp_path / "file"
        blocker.write_text("x")
        line = one_error_line(run("--size", "64x64", "--frames", "2", "--out", blocker / "masks"))
        assert "cannot write" in line
    elif case == "bad_option":
        line = one_error_line(run("--size", "huge"))
        assert "--size" in line
    elif case == "bad_parameter":
        line = one_error_line(run("--size", "64x64", "--n-mixtures", "12"))
        assert "n_mixtures" in line
    elif case == "no_cv2_dir":
        # with OpenCV hidden, reading files says what to install
        shim = tmp_path / "shim"
        shim.mkdir()
        (shim / "cv2.py").write_text("raise ImportError('hidden for the test')\n")
        env = dict(os.environ, PYTHONPATH=str(shim) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        d = tmp_path / "frames"
        d.mkdir()
        (d / "a.png").write_bytes(b"")
        r = subprocess.run([sys.executable, "-m", "fastmog", str(d)], capture_output=True,
                           text=True, env=env)
        line = one_error_line(r)
        assert "pip install opencv-python-headless" in line


def test_ctrl_c_stops_cleanly_and_keeps_what_was_written(tmp_path):
    out = tmp_path / "masks"
    p = subprocess.Popen([sys.executable, "-m", "fastmog", "--size", "320x240", "--frames",
                          "100000", "--out", str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and len(list(out.glob("mask_*.png"))) < 5:
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == 130, stderr
    assert "interrupted after" in stdout and "Traceback" not in stderr
    written = sorted(out.glob("mask_*.png"))
    assert len(written) >= 5
    assert all(cv2.imread(str(f), cv2.IMREAD_GRAYSCALE) is not None for f in written)


@pytest.mark.gpu
def test_gpu_main_job_profile_and_parity(data_dir, tmp_path):
    r = run("--frames", "60", "--profile")
    assert r.returncode == 0, r.stderr
    assert "on GPU" in r.stdout and "BackgroundSubtractorMOG2.apply" in r.stdout
    seq = data_dir / "sbi2015_CAVIAR2"
    gpu = run(seq / "input", "--ground-truth", seq)
    host = run(seq / "input", "--ground-truth", seq, "--cpu")
    assert gpu.returncode == 0 and host.returncode == 0
    f_gpu = [l for l in gpu.stdout.splitlines() if "F-measure" in l][0].split("F-measure ")[1]
    f_host = [l for l in host.stdout.splitlines() if "F-measure" in l][0].split("F-measure ")[1]
    assert f_gpu == f_host
    print(gpu.stdout)
    out = tmp_path / "vtest_masks.avi"
    r = run(data_dir / "opencv_samples_video" / "vtest.avi", "--out", out)
    assert r.returncode == 0, r.stderr
    cap = cv2.VideoCapture(str(out))
    n = 0
    while cap.read()[0]:
        n += 1
    assert n == 795
