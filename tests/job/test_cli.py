"""The main job, `python -m fastmog`, as a user runs it: inputs, outputs,
the report, options generated from the parameter table, the decoder wiring."""
import math
import os
import pathlib
import pty
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import fastmog
from fastmog.app import _cvio
from fastmog.app._errors import UserError
from cli_helpers import one_error_line, run, write_cdnet, write_gapped_mkv
from conftest import GPU_OK

cv2 = pytest.importorskip("cv2")


def read_video(path):
    cap = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        frames.append(frame)
    fps = cap.get(cv2.CAP_PROP_FPS)
    cap.release()
    return frames, fps


def test_default_run_on_the_builtin_scene(tmp_path):
    # the README's command, shortened
    r = run("--frames", "12", "--size", "640x360", "--preview", tmp_path / "p.png",
            "--out", tmp_path / "masks")
    assert r.returncode == 0, r.stderr
    assert "frames/s" in r.stdout and "megapixels/s" in r.stdout
    # rendering is reported on its own line, apart from the processing time
    assert "rendered the built-in scene in" in r.stdout
    assert len(list((tmp_path / "masks").glob("mask_*.png"))) == 12
    preview = cv2.imread(str(tmp_path / "p.png"))
    assert preview.shape == (360, 3 * 640, 3)
    mask = cv2.imread(str(tmp_path / "masks" / "mask_000011.png"), cv2.IMREAD_GRAYSCALE)
    assert set(np.unique(mask)) <= {0, 127, 255} and (mask == 255).any()
    if not GPU_OK:
        assert "running the host reference" in r.stderr


def test_no_arguments_runs():
    """The exact README command: without a GPU the host default is short
    (10 frames of 4K grey)."""
    r = run(timeout=600)
    assert r.returncode == 0, r.stderr
    assert "built-in scene, 3840x2160 grey" in r.stdout
    if not GPU_OK:
        assert "processed 10 frames" in r.stdout


def host_reference_score(seq, frames):
    from fastmog.scoring import GroundTruth, frame_number_of

    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    truth = GroundTruth(seq, lambda p: cv2.imread(str(p), cv2.IMREAD_GRAYSCALE))
    for f in sorted((seq / "input").iterdir())[:frames]:
        truth.add(frame_number_of(f), sub.apply(cv2.imread(str(f), cv2.IMREAD_COLOR)))
    return truth.score


@pytest.mark.parametrize("form", ["input_and_ground_truth", "cdnet_folder"])
def test_ground_truth_matches_the_host_reference(data_dir, form):
    seq = data_dir / "cdnet_subset_traffic"
    args = (seq / "input", "--ground-truth", seq) if form == "input_and_ground_truth" else (seq,)
    r = run(*args, "--cpu", "--frames", "20")
    assert r.returncode == 0, r.stderr
    score = host_reference_score(seq, 20)
    assert score.frames == 20
    assert f"F-measure {score.f_measure:.4f} over 20 frames" in r.stdout
    if form == "cdnet_folder":
        # recognised and said so; ROI.bmp / ROI.jpg beside input/ are not frames
        assert "is a CDnet sequence: frames from input/" in r.stdout
        assert "processed 20 frames" in r.stdout


def test_roi_file_in_a_frame_folder_is_not_a_frame(tmp_path):
    seq = write_cdnet(tmp_path / "seq", n=3)
    for f in (seq / "input").iterdir():
        (tmp_path / "frames").mkdir(exist_ok=True)
        (tmp_path / "frames" / f.name).write_bytes(f.read_bytes())
    (tmp_path / "frames" / "ROI.bmp").write_bytes((seq / "ROI.bmp").read_bytes())
    r = run(tmp_path / "frames", "--cpu")
    assert r.returncode == 0, r.stderr
    assert "(3 frames)" in r.stdout and "processed 3 frames" in r.stdout


@pytest.mark.parametrize("suffix", [".mkv", ".avi"])
def test_mask_video_is_lossless_at_the_source_frame_rate(data_dir, tmp_path, suffix):
    video = data_dir / "opencv_samples_video" / "tree.avi"
    out = tmp_path / f"masks{suffix}"
    r = run(video, "--out", out, "--frames", "15", "--cpu")
    assert r.returncode == 0, r.stderr
    assert "(read back: exact)" in r.stdout
    frames, fps = read_video(out)
    source_fps = cv2.VideoCapture(str(video)).get(cv2.CAP_PROP_FPS)
    assert fps == pytest.approx(source_fps, rel=1e-3) and abs(fps - 25.0) > 1
    # the very masks the host reference computes, no value lost
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    cap = cv2.VideoCapture(str(video))
    assert len(frames) == 15
    for written in frames:
        expected = sub.apply(cap.read()[1])
        for c in range(3):
            np.testing.assert_array_equal(written[..., c], expected)
    values = set(np.unique(np.array(frames)))
    assert values <= {0, 127, 255} and {0, 255} <= values


def test_fps_option_sets_the_mask_video_rate(tmp_path):
    out = tmp_path / "m.mkv"
    r = run("--size", "64x48", "--frames", "3", "--out", out, "--fps", "12.5")
    assert r.returncode == 0, r.stderr
    frames, fps = read_video(out)
    assert len(frames) == 3 and fps == pytest.approx(12.5)


def test_out_folder_needs_overwrite_which_keeps_user_files(tmp_path):
    out = tmp_path / "masks"
    assert run("--size", "64x48", "--frames", "5", "--out", out).returncode == 0
    (out / "notes.txt").write_text("mine")
    (out / "mask_old.png").write_bytes(b"mine too")
    line = one_error_line(run("--size", "64x48", "--frames", "3", "--out", out))
    assert "not empty" in line and "--overwrite" in line
    assert len(list(out.glob("mask_*.png"))) == 6             # nothing touched
    r = run("--size", "64x48", "--frames", "3", "--out", out, "--overwrite")
    assert r.returncode == 0, r.stderr
    # the stale masks 3 and 4 of the longer run are gone, the user's files stay
    assert sorted(p.name for p in out.iterdir()) == [
        "mask_000000.png", "mask_000001.png", "mask_000002.png", "mask_old.png", "notes.txt"]


def test_existing_mask_video_needs_overwrite(tmp_path):
    out = tmp_path / "m.mkv"
    out.write_bytes(b"someone's video")
    line = one_error_line(run("--size", "64x48", "--frames", "2", "--out", out))
    assert "exists" in line and "--overwrite" in line
    assert out.read_bytes() == b"someone's video"
    assert run("--size", "64x48", "--frames", "2", "--out", out, "--overwrite").returncode == 0
    assert len(read_video(out)[0]) == 2


def test_learning_rate_minus_inf_parses_and_is_automatic(tmp_path):
    auto = run("--size", "64x48", "--frames", "6", "--out", tmp_path / "auto")
    minus_inf = run("--size", "64x48", "--frames", "6", "--out", tmp_path / "inf",
                    "--learning-rate", "-inf")
    assert auto.returncode == 0 and minus_inf.returncode == 0, minus_inf.stderr
    for i in range(6):
        a = cv2.imread(str(tmp_path / "auto" / f"mask_{i:06d}.png"), cv2.IMREAD_GRAYSCALE)
        b = cv2.imread(str(tmp_path / "inf" / f"mask_{i:06d}.png"), cv2.IMREAD_GRAYSCALE)
        np.testing.assert_array_equal(a, b)


def truncated_video(tmp_path, frames=40):
    """An FFV1 .mkv whose container announces `frames` frames, cut to a third."""
    full = tmp_path / "full.mkv"
    w = cv2.VideoWriter(str(full), cv2.VideoWriter_fourcc(*"FFV1"), 30.0, (64, 48), True)
    rng = np.random.default_rng(1)
    for _ in range(frames):
        w.write(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
    w.release()
    data = full.read_bytes()
    cut = tmp_path / "cut.mkv"
    cut.write_bytes(data[:len(data) // 3])
    read = len(read_video(cut)[0])
    assert 0 < read < frames
    return cut, read


def test_short_video_says_how_much_was_read_and_exits_3(tmp_path):
    cut, read = truncated_video(tmp_path)
    r = run(cut, "--cpu")
    line = one_error_line(r, status=3)        # also: no FFmpeg noise on stderr
    assert f"read {read} frames of the 40" in line and "--accept-short" in line
    if getattr(fastmog, "VideoReader", None) is not None:
        assert "truncated or corrupt" in line
    assert line.count("truncated or corrupt") == 1 and str(cut) not in line, line
    assert f"processed {read} frames" in r.stdout
    r = run(cut, "--cpu", "--accept-short")
    assert r.returncode == 0, r.stderr
    assert f"read {read} frames of the 40" in r.stdout
    assert all(l.startswith("fastmog: ") for l in r.stderr.splitlines()), r.stderr


def test_repeated_frames_stored_as_empty_chunks_are_not_short_input(data_dir):
    """tree.avi announces 444 frames and decodes 68 (the others repeat their
    predecessor as empty chunks): the stream reaches its end, so exit 0."""
    r = run(data_dir / "opencv_samples_video" / "tree.avi", "--cpu")
    assert r.returncode == 0, r.stderr
    assert "processed 68 frames" in r.stdout
    assert "the 68 decoded reach the end of its timeline" in r.stdout


def test_progress_lines_on_a_terminal(tmp_path):
    """Rendering and processing each draw a progress line when stderr is a
    terminal; the report stays on stdout."""
    leader, follower = pty.openpty()
    try:
        p = subprocess.Popen([sys.executable, "-m", "fastmog", "--size", "64x48", "--frames",
                              "40"], stdout=subprocess.PIPE, stderr=follower, text=True)
        os.close(follower)
        out, _ = p.communicate(timeout=120)
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(leader)
    assert p.returncode == 0
    assert b"rendering the built-in scene [" in seen and b"32/32" in seen
    assert b"processing [" in seen and b"40/40" in seen
    assert "processed 40 frames" in out


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



@pytest.mark.parametrize("stop", [KeyboardInterrupt, OSError(28, "No space left on device")])
def test_an_image_write_cut_short_leaves_no_truncated_file(tmp_path, monkeypatch, stop):
    # Ctrl-C (or a full disk) can land while a mask's bytes are being
    # written; the real name must then not exist rather than hold half a PNG
    class HalfWritten:
        def __init__(self, path, mode):
            self.f = open(path, mode)

        def write(self, data):
            self.f.write(bytes(data)[:len(data) // 2])
            raise stop

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(_cvio, "open", HalfWritten, raising=False)
    mask = np.full((24, 32), 255, np.uint8)
    with pytest.raises(KeyboardInterrupt if stop is KeyboardInterrupt else UserError):
        _cvio.write_image(tmp_path / "mask_000000.png", mask, "mask")
    assert os.listdir(tmp_path) == []

# ---- options from the parameter table ------------------------------------------------


def test_mog2_options_are_generated_from_the_table(monkeypatch):
    from fastmog.app import cli

    table = (
        dict(name="alpha_beta", type=int, default=3, min=1.0, max=9.0, opencv="AlphaBeta",
             positional=True, doc="Alpha of the beta."),
        dict(name="gain", type=float, default=0.25, min=0.0, max=math.inf, opencv="Gain",
             positional=False, doc="How much gain."),
        dict(name="flag_on", type=bool, default=True, min=0.0, max=1.0, opencv="FlagOn",
             positional=False, doc="Whether the flag is on."),
    )
    monkeypatch.setattr(fastmog._fastmog, "_mog2_parameters", lambda: table, raising=False)
    parser = cli.build_parser()
    text = parser.format_help()
    assert "Alpha of the beta. (default: 3)" in text
    assert "How much gain. (default: 0.25)" in text
    assert "--flag-on" in text and "--no-flag-on" in text
    args = parser.parse_args(["--alpha-beta", "7", "--gain", "1e9", "--no-flag-on"])
    assert cli.mog2_kwargs(args) == {"alpha_beta": 7, "gain": 1e9, "flag_on": False}
    assert cli.mog2_kwargs(parser.parse_args([])) == {"alpha_beta": 3, "gain": 0.25,
                                                      "flag_on": True}
    for bad in (["--alpha-beta", "10"], ["--alpha-beta", "0"], ["--gain", "-1"],
                ["--gain", "nan"], ["--alpha-beta", "2.5"]):
        with pytest.raises(SystemExit) as e:
            parser.parse_args(bad)
        assert e.value.code == 2


def test_help_explains_every_option_with_its_default():
    from fastmog.app import cli

    parser = cli.build_parser()
    for action in parser._actions:
        if action.dest == "help":
            continue
        assert action.help and "default" in action.help, action.option_strings
    table = fastmog._fastmog._mog2_parameters()
    flags = {s for a in parser._actions for s in a.option_strings}
    for param in table:
        assert "--" + param["name"].replace("_", "-") in flags
    assert "--no-shadows" in flags                       # the README's spelling
    r = run("--help")
    assert r.returncode == 0 and "exit status" in r.stdout
    assert all(p["doc"].split()[0] in r.stdout for p in table)


def test_no_shadows_alias():
    from fastmog.app import cli

    assert cli.build_parser().parse_args(["--no-shadows"]).detect_shadows is False


# ---- video decoding through fastmog.VideoReader ---------------------------------------


def test_video_reader_decodes_and_says_so(data_dir, tmp_path):
    """Host decoding through fastmog.VideoReader: the decoder is named, and
    the masks are those of OpenCV's frames (grey here)."""
    video = data_dir / "opencv_samples_video" / "tree.avi"
    out = tmp_path / "m.mkv"
    r = run(video, "--cpu", "--grey", "--frames", "8", "--out", out)
    assert r.returncode == 0, r.stderr
    assert "fastmog: decoding on the CPU (the host reference runs here)" in r.stdout
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    cap = cv2.VideoCapture(str(video))
    frames, _ = read_video(out)
    assert len(frames) == 8
    for written in frames:
        grey = cv2.cvtColor(cap.read()[1], cv2.COLOR_BGR2GRAY)
        np.testing.assert_array_equal(written[..., 0], sub.apply(grey))


# ---- the GPU -------------------------------------------------------------------------


@pytest.mark.gpu
def test_gpu_main_job_profile_and_parity(data_dir, tmp_path):
    r = run("--frames", "60", "--profile")
    assert r.returncode == 0, r.stderr
    assert "on GPU" in r.stdout and "BackgroundSubtractorMOG2.apply" in r.stdout
    # NVML sampled during the run (or the report saying why it could not be)
    assert "\nNVML (" in r.stdout or "\nNVML: absent (" in r.stdout, r.stdout
    assert "\nverdict: bound by " in r.stdout
    seq = data_dir / "sbi2015_CAVIAR2"
    gpu = run(seq / "input", "--ground-truth", seq)
    host = run(seq / "input", "--ground-truth", seq, "--cpu")
    assert gpu.returncode == 0 and host.returncode == 0
    f_gpu = [l for l in gpu.stdout.splitlines() if "F-measure" in l][0].split("F-measure ")[1]
    f_host = [l for l in host.stdout.splitlines() if "F-measure" in l][0].split("F-measure ")[1]
    assert f_gpu == f_host
    out = tmp_path / "vtest_masks.mkv"
    r = run(data_dir / "opencv_samples_video" / "vtest.avi", "--out", out)
    assert r.returncode == 0, r.stderr
    assert "(read back: exact)" in r.stdout
    assert len(read_video(out)[0]) == 795


@pytest.mark.gpu
def test_gpu_device_that_does_not_exist():
    line = one_error_line(run("--size", "64x48", "--frames", "2", "--device", "99"))
    assert "--device 99 does not exist" in line


@pytest.mark.gpu
def test_gpu_decoder_choice_is_said(data_dir, tmp_path):
    """vtest.avi is MS-MPEG4 v3, which NVDEC cannot decode: auto falls back to
    the CPU and says why; nvdec is refused in one line."""
    if getattr(fastmog, "VideoReader", None) is None:
        pytest.skip("this build has no fastmog.VideoReader")
    video = data_dir / "opencv_samples_video" / "vtest.avi"
    r = run(video, "--frames", "20", "--out", tmp_path / "m.mkv")
    assert r.returncode == 0, r.stderr
    line = [l for l in r.stdout.splitlines() if "decoding" in l][0]
    assert line.startswith("fastmog: decoding on the CPU (") and line.endswith(")")
    assert "nvdec" in one_error_line(run(video, "--decode", "nvdec", "--frames", "2")).lower()


def test_factories_take_their_defaults_from_the_table():
    import inspect

    table = {p["name"]: p["default"] for p in fastmog._fastmog._mog2_parameters()}
    for factory in (fastmog.createBackgroundSubtractorMOG2,
                    fastmog.cpu.createBackgroundSubtractorMOG2):
        params = inspect.signature(factory).parameters
        assert [params[n].default for n in ("history", "varThreshold", "detectShadows")] == \
            [table["history"], table["var_threshold"], table["detect_shadows"]]
    sub = fastmog.cpu.createBackgroundSubtractorMOG2()
    assert (sub.history, sub.var_threshold, sub.detect_shadows) == \
        (table["history"], table["var_threshold"], table["detect_shadows"])


def test_a_video_with_a_hole_exits_3_naming_it(tmp_path):
    """A damaged video whose decoder skips frames in the middle is not
    complete: exit 3 names the missing frames; --accept-short accepts it."""
    video = write_gapped_mkv(tmp_path / "hole.mkv", [*range(10), *range(25, 30)])
    line = one_error_line(run(video, "--cpu"), status=3)
    assert "frames 10-24 are missing" in line and "--accept-short" in line
    r = run(video, "--cpu", "--accept-short")
    assert r.returncode == 0 and "frames 10-24 are missing" in r.stdout, r.stderr


def test_the_corrupt_clip_is_not_complete():
    clips = pathlib.Path(__file__).resolve().parents[2] / ".testdata" / "clips"
    if not (clips / "vtest_h264_corrupt.mkv").is_file():
        pytest.skip("no test clips: run python benchmarks/make_clips.py")
    line = one_error_line(run(clips / "vtest_h264_corrupt.mkv", "--cpu"), status=3)
    assert "frames 55-56, 58-89 are missing" in line


def _frames_in(video):
    cap, n = cv2.VideoCapture(str(video)), 0
    while cap.read()[0]:
        n += 1
    cap.release()
    return n


@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_stop_like_ctrl_c(tmp_path, name):
    """What schedulers and closing terminals send: the run stops cleanly, the
    mask video is closed whole, the summary is printed, status 128 + signal."""
    out = tmp_path / "masks.mkv"
    number = getattr(signal, name)
    # the run starts with the signal at its default, as from a terminal, whatever
    # the test runner inherited (under nohup SIGHUP is ignored, and stays so)
    p = subprocess.Popen([sys.executable, "-m", "fastmog", "--size", "320x240", "--frames",
                          "100000", "--out", str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(number, signal.SIG_DFL))
    deadline = time.time() + 60
    while time.time() < deadline and (not out.exists() or out.stat().st_size < 4096):
        time.sleep(0.1)
    p.send_signal(number)
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == 128 + number, stderr
    assert "interrupted after" in stdout and f"stopped by {name}" in stdout
    assert "Traceback" not in stderr
    wrote = int(stdout.split("fastmog: wrote ")[1].split()[0])
    assert "(not read back: interrupted)" in stdout
    assert wrote == _frames_in(out) > 0


def test_interrupted_mask_video_counts_what_it_holds(tmp_path, monkeypatch, capsys):
    """Ctrl-C arriving while a mask is written: the count reported is what the
    file holds, and no read-back is claimed."""
    from cli_helpers import run_in_process
    from fastmog.app import _writers

    opened = _writers.LosslessVideo._open

    class Interrupting:
        def __init__(self, video):
            self.video, self.n = video, 0

        def write(self, frame):
            self.video.write(frame)
            self.n += 1
            if self.n == 5:               # the signal lands as OpenCV returns
                os.kill(os.getpid(), signal.SIGINT)

        def release(self):
            self.video.release()

    def interrupting_open(self, path, *args):
        video = opened(self, path, *args)
        return Interrupting(video) if path == self.path and video is not None else video

    monkeypatch.setattr(_writers.LosslessVideo, "_open", interrupting_open)
    out = tmp_path / "masks.mkv"
    r = run_in_process(capsys, "--size", "64x48", "--frames", "20", "--cpu", "--out", out)
    assert r.returncode == 130, r.stderr
    assert "interrupted after 5 frames" in r.stdout
    assert "wrote 5 masks" in r.stdout and "(not read back: interrupted)" in r.stdout
    assert _frames_in(out) == 5


def test_a_full_disk_stops_the_mask_video_at_once(tmp_path, monkeypatch, capsys):
    """FFmpeg's writer reports no failed write: a file that stops growing on a
    disk with no room left stops the run there, naming ENOSPC."""
    from cli_helpers import run_in_process
    from fastmog.app import _writers

    monkeypatch.setattr(_writers, "_file_size", lambda path: 0, raising=False)
    monkeypatch.setattr(_writers, "_free_bytes", lambda folder: 0, raising=False)
    out = tmp_path / "masks.mkv"
    r = run_in_process(capsys, "--size", "64x48", "--frames", "20", "--cpu", "--out", out)
    line = one_error_line(r)
    assert "no space left on device (ENOSPC) after 1 masks" in line
    assert "is partial: 1 masks written" in line and "processed" not in r.stdout


def test_a_trace_on_a_full_disk_leaves_no_file(tmp_path, monkeypatch, capsys):
    import errno

    from cli_helpers import run_in_process
    from fastmog.profiling import _timer as _timing

    def full(self, path):
        with open(path, "w"):             # created, then the disk is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(_timing.Timer, "to_chrome_trace", full)
    trace = tmp_path / "trace.json"
    r = run_in_process(capsys, "--size", "64x48", "--frames", "3", "--cpu", "--trace", trace)
    line = one_error_line(r)
    assert "cannot write the trace" in line and "No space left on device" in line
    assert list(tmp_path.iterdir()) == []


def test_nohup_keeps_sighup_ignored(tmp_path):
    """A run started with SIGHUP ignored (nohup) goes on when it comes."""
    p = subprocess.Popen([sys.executable, "-m", "fastmog", "--size", "64x48", "--frames",
                          "400", "--out", str(tmp_path / "m")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    deadline = time.time() + 60
    while time.time() < deadline and not list((tmp_path / "m").glob("mask_*.png")):
        time.sleep(0.05)
    p.send_signal(signal.SIGHUP)
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 0 and "processed 400 frames" in stdout, stderr
