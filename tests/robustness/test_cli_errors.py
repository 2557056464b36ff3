"""The main job under hostile or mistaken input: each case ends with one line
on stderr and exit status 2, before the run wherever it can be found then;
nothing crashes, hangs or prints a traceback."""
import os

import numpy as np
import pytest

import fastmog

from cli_helpers import one_error_line, run, run_in_process, write_cdnet
from conftest import GPU_OK

cv2 = pytest.importorskip("cv2")

SMALL = ("--size", "64x48", "--frames", "3")


def not_run(result):
    """True when the error came before any frame was processed."""
    return "processed" not in result.stdout and "rendered" not in result.stdout


def test_missing_input():
    assert "no such file" in one_error_line(run("/nonexistent/nope.mp4"))


def test_unreadable_video(tmp_path):
    bad = tmp_path / "broken.avi"
    bad.write_bytes(b"not a video at all" * 100)
    assert "cannot read video" in one_error_line(run(bad))


def test_empty_frame_folder(tmp_path):
    (tmp_path / "frames").mkdir()
    (tmp_path / "frames" / "notes.txt").write_text("x")
    assert "holds no frames" in one_error_line(run(tmp_path / "frames"))


def test_frames_of_changing_size(tmp_path):
    d = tmp_path / "frames"
    d.mkdir()
    cv2.imwrite(str(d / "in000001.png"), np.full((20, 30), 9, np.uint8))
    cv2.imwrite(str(d / "in000002.png"), np.full((21, 30), 9, np.uint8))
    line = one_error_line(run(d))
    assert "frame 1 is 30x21x3 but the first was 30x20x3" in line


def test_unwritable_out(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run(*SMALL, "--out", blocker / "masks")
    assert "cannot write" in one_error_line(r) and not_run(r)


def test_bad_option(capsys):
    assert "--size" in one_error_line(run_in_process(capsys, "--size", "huge"))


@pytest.mark.parametrize("value", ["0", "fast", "2.5"])
def test_bad_batch(capsys, value):
    assert "--batch" in one_error_line(run_in_process(capsys, *SMALL, "--batch", value))


def test_bad_parameter_is_named(capsys):
    line = one_error_line(run_in_process(capsys, *SMALL, "--n-mixtures", "12"))
    assert "--n-mixtures" in line


def test_no_opencv_says_what_to_install(tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "cv2.py").write_text("raise ImportError('hidden for the test')\n")
    env = dict(os.environ, PYTHONPATH=str(shim) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    d = tmp_path / "frames"
    d.mkdir()
    (d / "a.png").write_bytes(b"")
    line = one_error_line(run(d, env=env))
    assert "pip install opencv-python-headless" in line


def test_file_names_that_are_not_utf8(tmp_path):
    """OpenCV's binding segfaults on str paths holding lone surrogates: frame
    names, --out, --preview and a video input that are not UTF-8 all work."""
    base = os.fsencode(tmp_path)
    frames = base + b"/fr\xffmes"
    os.mkdir(frames)
    rng = np.random.default_rng(3)
    for i in range(3):
        ok, data = cv2.imencode(".png", rng.integers(0, 255, (24, 32, 3), dtype=np.uint8))
        with open(frames + b"/in%06d\xfe.png" % i, "wb") as f:
            f.write(data.tobytes())
    out = base + b"/m\xe9sks"
    r = run(frames, "--cpu", "--out", out, "--preview", base + b"/pr\xfeview.png")
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert sorted(os.listdir(out)) == [b"mask_000000.png", b"mask_000001.png",
                                       b"mask_000002.png"]
    assert os.path.getsize(base + b"/pr\xfeview.png") > 0
    assert "\\x" in r.stdout                     # the odd bytes are shown escaped
    video = base + b"/v\xff.mkv"
    r = run(frames, "--cpu", "--out", video)
    assert r.returncode == 0, (r.returncode, r.stderr)
    r = run(video, "--cpu")                      # and read back as input
    assert r.returncode == 0 and "processed 3 frames" in r.stdout, r.stderr
    assert "decoding on the CPU" in r.stdout       # VideoReader hands OpenCV bytes


def test_fifo_as_input_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "video.mp4"
    os.mkfifo(fifo)
    line = one_error_line(run(fifo, timeout=30))
    assert "not a regular file" in line


def test_fifo_in_a_frame_folder_is_skipped(tmp_path):
    d = tmp_path / "frames"
    d.mkdir()
    cv2.imwrite(str(d / "in000001.png"), np.full((24, 32), 9, np.uint8))
    os.mkfifo(d / "in000002.png")
    r = run(d, "--cpu", timeout=30)
    assert r.returncode == 0 and "processed 1 frames" in r.stdout, r.stderr


@pytest.mark.parametrize("rate", ["nan", "2", "inf", "fast"])
def test_bad_learning_rate(rate, capsys):
    line = one_error_line(run_in_process(capsys, *SMALL, "--learning-rate", rate))
    assert "--learning-rate" in line


def test_unwritable_trace_is_found_before_the_run(tmp_path, capsys):
    r = run_in_process(capsys, *SMALL, "--trace", tmp_path / "no" / "such" / "folder" / "t.json")
    assert "the trace" in one_error_line(r) and not_run(r)


@pytest.mark.parametrize("suffix", [".unknown", ""])
def test_preview_with_an_unknown_extension_is_found_before_the_run(tmp_path, suffix, capsys):
    r = run_in_process(capsys, *SMALL, "--preview", tmp_path / f"preview{suffix}")
    assert "--preview" in one_error_line(r) and not_run(r)


@pytest.mark.parametrize("suffix", [".mp4", ".mov", ".png"])
def test_lossy_or_image_out_is_refused(tmp_path, suffix, capsys):
    r = run_in_process(capsys, *SMALL, "--out", tmp_path / f"masks{suffix}")
    assert "--out" in one_error_line(r) or "lossless" in r.stderr
    assert not_run(r) and not (tmp_path / f"masks{suffix}").exists()


def test_frames_too_big_for_memory():
    r = run("--size", "100000x100000", "--frames", "2", timeout=60)
    line = one_error_line(r)
    assert "GiB" in line and not_run(r)


@pytest.mark.parametrize("text", ["", "abc def", "12", "40 10"])
def test_bad_temporal_roi(tmp_path, text, capsys):
    seq = write_cdnet(tmp_path / "seq", roi_text=text)
    r = run_in_process(capsys, seq, "--cpu")
    assert "temporalROI.txt" in one_error_line(r) and not_run(r)


def test_ground_truth_of_another_size(tmp_path, capsys):
    seq = write_cdnet(tmp_path / "seq", truth_shape=(12, 16))
    r = run_in_process(capsys, seq / "input", "--ground-truth", seq, "--cpu")
    assert "16x12" in one_error_line(r) and not_run(r)


def test_unreadable_ground_truth(tmp_path, capsys):
    seq = write_cdnet(tmp_path / "seq")
    (seq / "groundtruth" / "gt000003.png").write_bytes(b"\x89PNG broken")
    line = one_error_line(run_in_process(capsys, seq, "--cpu"))
    assert "gt000003.png" in line


def test_ground_truth_that_labels_no_frame(tmp_path, capsys):
    seq = write_cdnet(tmp_path / "seq", roi_text="100 200")
    r = run_in_process(capsys, seq, "--cpu")
    assert "labels none" in one_error_line(r) and not_run(r)


def test_ground_truth_for_the_builtin_scene_is_a_mistake(tmp_path, capsys):
    seq = write_cdnet(tmp_path / "seq")
    assert "--ground-truth" in one_error_line(run_in_process(capsys, *SMALL, "--ground-truth", seq))


@pytest.mark.skipif(GPU_OK, reason="needs a machine without a usable GPU")
def test_device_without_a_gpu():
    r = run(*SMALL, "--device", "3")
    assert "--device 3" in one_error_line(r) and not_run(r)


def test_device_and_cpu_contradict(capsys):
    assert "--cpu" in one_error_line(run_in_process(capsys, *SMALL, "--device", "0", "--cpu"))


def test_decode_nvdec_where_it_cannot_be_used(data_dir):
    video = data_dir / "opencv_samples_video" / "tree.avi"
    assert "nvdec" in one_error_line(run(video, "--decode", "nvdec", "--cpu")).lower()


@pytest.mark.parametrize("args", [("--grey",), ("--decode", "cpu"), ("--fps", "10")])
def test_options_that_do_not_apply_to_the_builtin_scene(args, capsys):
    assert args[0] in one_error_line(run_in_process(capsys, *SMALL, *args))


def test_size_with_file_input(tmp_path, capsys):
    d = tmp_path / "frames"
    d.mkdir()
    cv2.imwrite(str(d / "in000001.png"), np.full((24, 32), 9, np.uint8))
    assert "--size" in one_error_line(run_in_process(capsys, d, "--size", "64x64"))


def _mask_folder(folder, n=3):
    folder.mkdir()
    for i in range(n):
        cv2.imwrite(str(folder / f"mask_{i:06d}.png"), np.full((24, 32), 40 * i, np.uint8))
    return folder


def test_out_that_is_the_input_folder_is_refused_and_kept(tmp_path, capsys):
    masks = _mask_folder(tmp_path / "masks")
    link = tmp_path / "link"
    os.symlink(masks, link)
    for out in (masks, link, masks / "sub"):
        r = run_in_process(capsys, masks, "--cpu", "--out", out, "--overwrite")
        assert "input" in one_error_line(r) and not_run(r)
    assert sorted(p.name for p in masks.iterdir()) == [f"mask_{i:06d}.png" for i in range(3)]


def test_out_that_is_the_input_video_is_refused_and_kept(tmp_path, capsys):
    video = tmp_path / "video.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 25, (32, 24))
    for i in range(3):
        writer.write(np.full((24, 32, 3), 30 * i, np.uint8))
    writer.release()
    size = video.stat().st_size
    for flag in ("--out", "--preview", "--trace"):
        r = run_in_process(capsys, video, "--cpu", flag, video, "--overwrite")
        assert f"{flag} " in one_error_line(r) and "is the input" in r.stderr and not_run(r)
    assert video.stat().st_size == size


def test_several_sources_out_subfolder_that_is_an_input_is_refused(tmp_path, capsys):
    a, b = _mask_folder(tmp_path / "a"), _mask_folder(tmp_path / "b")
    r = run_in_process(capsys, a, b, "--cpu", "--out", tmp_path, "--overwrite")
    assert "is the input" in one_error_line(r)
    assert len(list(a.iterdir())) == 3 and len(list(b.iterdir())) == 3


def test_every_output_needs_overwrite_to_replace_a_file(tmp_path, capsys):
    for flag, name in (("--preview", "p.png"), ("--trace", "t.json")):
        existing = tmp_path / name
        existing.write_text("mine")
        r = run_in_process(capsys, *SMALL, "--cpu", flag, existing)
        assert "pass --overwrite" in one_error_line(r) and not_run(r)
        assert existing.read_text() == "mine"
    r = run_in_process(capsys, *SMALL, "--cpu", "--preview", tmp_path / "x.png",
                       "--trace", tmp_path / "x.png")
    assert "name the same file" in one_error_line(r)


def test_an_error_mid_run_names_the_partial_output(tmp_path):
    d = tmp_path / "frames"
    d.mkdir()
    for i, h in enumerate((20, 20, 21)):
        cv2.imwrite(str(d / f"in{i:06d}.png"), np.full((h, 30), 9, np.uint8))
    out = tmp_path / "masks"
    line = one_error_line(run(d, "--cpu", "--out", out))
    assert "frame 2 is 30x21x3" in line and f"{out} is partial: 2 masks written" in line
    assert len(list(out.glob("mask_*.png"))) == 2


def test_self_looping_symlink_in_a_frame_folder(tmp_path, capsys):
    d = tmp_path / "frames"
    d.mkdir()
    cv2.imwrite(str(d / "in000001.png"), np.full((24, 32), 9, np.uint8))
    os.symlink("loop.png", d / "loop.png")
    line = one_error_line(run_in_process(capsys, d, "--cpu"))
    assert "loop.png" in line and "symbolic links" in line


def test_a_png_too_large_to_decode(tmp_path, capsys):
    import struct
    import zlib

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    d = tmp_path / "frames"
    d.mkdir()
    header = struct.pack(">IIBBBBB", 100000, 100000, 8, 0, 0, 0, 0)
    (d / "big.png").write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                                + chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + chunk(b"IEND", b""))
    assert "too large to decode" in one_error_line(run_in_process(capsys, d, "--cpu"))


def test_a_fifo_among_the_ground_truth_labels_does_not_hang(tmp_path):
    seq = write_cdnet(tmp_path / "seq")
    label = seq / "groundtruth" / "gt000001.png"
    label.unlink()
    os.mkfifo(label)
    line = one_error_line(run(seq, "--cpu", timeout=60))
    assert "gt000001.png" in line and "not a regular file" in line


@pytest.mark.parametrize("name", ["masks.gif", "masks.txt"])
def test_out_with_an_unknown_extension_is_refused(tmp_path, name, capsys):
    r = run_in_process(capsys, *SMALL, "--cpu", "--out", tmp_path / name)
    assert "writes no" in one_error_line(r) and not_run(r)
    assert not (tmp_path / name).exists()


def test_an_empty_input_path_is_refused(capsys):
    r = run_in_process(capsys, "", "--cpu")
    assert "empty path" in one_error_line(r) and not_run(r)


@pytest.mark.parametrize("scheme", ["rtsp", "http", "tcp"])
def test_a_url_that_does_not_answer_is_one_line_naming_it_whole(scheme, capsys):
    """A live stream's URL is kept as given (never folded as a path) and one
    that cannot open is one line (loopback, a port nobody listens on)."""
    from live_servers import unused_port

    url = f"{scheme}://127.0.0.1:{unused_port()}/stream"
    line = one_error_line(run_in_process(capsys, url, "--cpu", "--open-timeout", "2"))
    assert f"cannot open {url}" in line, line


def test_a_url_of_a_kind_fastmog_does_not_read(capsys):
    line = one_error_line(run_in_process(capsys, "ftp://127.0.0.1/v.mp4", "--cpu"))
    assert "ftp://127.0.0.1/v.mp4 is a URL fastmog does not read" in line


def test_an_unreadable_video_names_itself_once(tmp_path, capsys):
    bad = tmp_path / "broken.avi"
    bad.write_bytes(b"not a video at all" * 100)
    line = one_error_line(run_in_process(capsys, bad, "--cpu"))
    assert line.count(str(bad)) == 1 and line.count("cannot read video") == 1, line


@pytest.mark.skipif(GPU_OK, reason="needs a machine without a usable GPU")
def test_the_no_gpu_notice_speaks_plainly():
    r = run(*SMALL)
    assert r.returncode == 0
    notice = r.stderr.splitlines()[0]
    assert "cudaError" not in notice and "running the host reference" in notice
    if fastmog._fastmog._cuda_status()[0] == "cudaErrorInsufficientDriver" \
            and not os.path.exists("/proc/driver/nvidia/version"):
        assert "no NVIDIA driver found" in notice


def test_the_preview_is_scaled_down_unless_asked(tmp_path):
    small, full = tmp_path / "small.png", tmp_path / "full.png"
    r = run("--size", "2560x96", "--frames", "2", "--cpu", "--preview", small)
    assert r.returncode == 0, r.stderr
    assert cv2.imread(str(small)).shape == (48, 3 * 1280, 3)
    r = run("--size", "2560x96", "--frames", "2", "--cpu", "--preview", full,
            "--preview-full-size")
    assert r.returncode == 0, r.stderr
    assert cv2.imread(str(full)).shape == (96, 3 * 2560, 3)
    mask = cv2.imread(str(small), cv2.IMREAD_GRAYSCALE)[:, 1280:2560]
    assert set(np.unique(mask)) <= {0, 127, 255}
