"""The main job on live streams (issue 24): a URL is read as a stream with
no end, its masks are those of the same frames from the file, drops are
reconnected with one line each, latency is reported, a stream that never
opens is one line, and Ctrl-C or SIGTERM end a stalled run at once."""
import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import fastmog
from cli_helpers import one_error_line, run
from live_servers import TcpServer, frame_boundary, ts_clip, unused_port

cv2 = pytest.importorskip("cv2")

MOG2 = ["--history", "20", "--var-threshold", "12"]


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return ts_clip(tmp_path_factory.mktemp("live"))


def _host_masks(frames):
    sub = fastmog.cpu.BackgroundSubtractorMOG2(history=20, var_threshold=12.0)
    return [sub.apply(f).copy() for f in frames]


def test_live_masks_equal_the_files(clip, tmp_path):
    path, data, expected = clip
    out = tmp_path / "masks"
    with TcpServer([("send", data, "hold")]) as server:
        r = run(server.url, "--cpu", *MOG2, "--frames", "40", "--out", out, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"{server.url} (live stream)" in r.stdout
    assert "live stream: 0 reconnects, about 0 frames lost; latency from a frame's arrival " \
           "to its mask: median" in r.stdout
    written = [cv2.imread(str(p), cv2.IMREAD_UNCHANGED) for p in sorted(out.iterdir())]
    want = _host_masks(expected[:40])
    assert len(written) == 40
    for k, (w, e) in enumerate(zip(written, want)):
        np.testing.assert_array_equal(w, e, err_msg=f"mask {k}")


def test_a_drop_is_one_line_and_the_run_goes_on(clip):
    path, data, expected = clip
    cut = frame_boundary(data, 0.5)
    with TcpServer([("send", data[:cut], "close"), ("send", data, "hold")]) as server:
        r = run(server.url, "--cpu", "--frames", "45", "--stall-timeout", "1", timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    dropped = [l for l in lines if "the stream dropped after" in l]
    back = [l for l in lines if "reconnected after" in l]
    assert len(dropped) == len(back) == 1, r.stdout
    assert "processed 45 frames" in r.stdout
    assert "live stream: 1 reconnect," in r.stdout


def test_a_stream_that_never_opens_is_one_line(clip):
    with TcpServer([("silent",)]) as server:
        started = time.monotonic()
        line = one_error_line(run(server.url, "--cpu", "--open-timeout", "1", timeout=60))
        assert time.monotonic() - started < 20
    assert f"cannot open {server.url}" in line


def test_an_rtsp_url_is_kept_whole():
    """The URL once lost a slash ("rtsp:/127.0.0.1..."), read as a path."""
    url = f"rtsp://127.0.0.1:{unused_port()}/cam"
    line = one_error_line(run(url, "--cpu", "--open-timeout", "2", timeout=60))
    assert url in line and "no such file" not in line


def test_a_url_fastmog_does_not_read(tmp_path):
    line = one_error_line(run("ftp://127.0.0.1/x.mp4", "--cpu"))
    assert "is a URL fastmog does not read" in line and "rtsp://" in line


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stalled_live_run_stops_at_once(clip, tmp_path, signum, status):
    path, data, expected = clip
    out = tmp_path / "masks"
    with TcpServer([("send", data[:frame_boundary(data, 0.3)], "hold")]) as server:
        p = subprocess.Popen([sys.executable, "-m", "fastmog", server.url, "--cpu",
                              "--stall-timeout", "60", "--out", str(out)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(list(out.glob("mask_*.png"))) < 5:
            time.sleep(0.05)
        time.sleep(0.5)                     # the stream is stalled now: no frame for 60 s
        p.send_signal(signum)
        started = time.monotonic()
        stdout, stderr = p.communicate(timeout=30)
        took = time.monotonic() - started
    assert p.returncode == status, stderr
    assert took < 3, took
    assert "interrupted after" in stdout and "Traceback" not in stderr
    assert len(list(out.glob("mask_*.png"))) >= 5


def test_an_rtsp_run_over_tcp_equals_the_files_masks(clip, tmp_path):
    from live_servers import RtspServer

    path, data, expected = clip
    out = tmp_path / "masks"
    with RtspServer(data) as server:
        r = run(server.url, "--cpu", *MOG2, "--rtsp-transport", "tcp", "--frames", "30",
                "--out", out, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "TCP" in server.transports[0]
    written = [cv2.imread(str(p), cv2.IMREAD_UNCHANGED) for p in sorted(out.iterdir())]
    for k, (w, e) in enumerate(zip(written, _host_masks(expected[:30]))):
        np.testing.assert_array_equal(w, e, err_msg=f"mask {k}")
    assert len(written) == 30
    assert "is for rtsp:// streams" in one_error_line(run(path, "--cpu", "--rtsp-transport",
                                                          "udp"))
    assert "--low-latency is for live streams" in one_error_line(run(path, "--low-latency"))


def test_the_profile_gives_the_live_latency(clip):
    path, data, expected = clip
    with TcpServer([("send", data, "hold")]) as server:
        r = run(server.url, "--cpu", "--frames", "20", "--profile", timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Latency:\n  live frame, arrival to mask: median " in r.stdout
    assert "over 20 samples" in r.stdout


@pytest.mark.gpu
def test_an_nvdec_stream_gives_the_files_masks(clips, nvdec, tmp_path):
    """NVDEC decodes the stream FFmpeg demuxes: the masks are those of the
    same H.264 pictures read from a file with NVDEC, and the profile gives
    the latency from each packet's arrival."""
    ts, mkv = clips / "vtest_h264.ts", clips / "vtest_h264.mkv"
    if not ts.is_file():
        pytest.skip(f"no vtest_h264.ts in {clips}: run python benchmarks/make_clips.py")
    live, from_file = tmp_path / "live", tmp_path / "file"
    with TcpServer([("send", ts.read_bytes(), "hold")]) as server:
        r = run(server.url, "--decode", "nvdec", "--grey", *MOG2, "--frames", "100",
                "--out", live, "--profile", timeout=120)
    assert r.returncode == 0, r.stderr
    assert "fastmog: decoding with NVDEC" in r.stdout
    assert "Latency:\n  live frame, arrival to mask: median " in r.stdout
    f = run(mkv, "--decode", "nvdec", "--grey", *MOG2, "--frames", "100", "--out", from_file,
            timeout=120)
    assert f.returncode == 0, f.stderr
    got, want = sorted(live.iterdir()), sorted(from_file.iterdir())
    assert len(got) == len(want) == 100
    for g, w in zip(got, want):
        np.testing.assert_array_equal(cv2.imread(str(g), cv2.IMREAD_UNCHANGED),
                                      cv2.imread(str(w), cv2.IMREAD_UNCHANGED), err_msg=g.name)


def test_with_the_motion_step_the_latency_ends_at_the_motion_result(clip, tmp_path):
    path, data, expected = clip
    with TcpServer([("send", data, "hold")]) as server:
        r = run(server.url, "--cpu", *MOG2, "--frames", "20", "--events",
                tmp_path / "events.jsonl", "--profile", timeout=60)
    assert r.returncode == 0, r.stderr
    assert "latency from a frame's arrival to its motion result: median " in r.stdout
    assert "Latency:\n  live frame, arrival to motion result: median " in r.stdout
    assert "over 20 samples" in r.stdout


@pytest.mark.gpu
def test_an_nvdec_stream_with_motion_on_the_gpu_gives_the_files_events(clips, nvdec,
                                                                         tmp_path):
    ts, mkv = clips / "vtest_h264.ts", clips / "vtest_h264.mkv"
    if not ts.is_file():
        pytest.skip(f"no vtest_h264.ts in {clips}: run python benchmarks/make_clips.py")
    motion = ["--min-area", "30", "--threshold", "0.002"]
    live, from_file = tmp_path / "live.jsonl", tmp_path / "file.jsonl"
    with TcpServer([("send", ts.read_bytes(), "hold")]) as server:
        r = run(server.url, "--decode", "nvdec", "--grey", *MOG2, *motion, "--frames", "100",
                "--events", live, "--profile", timeout=120)
    assert r.returncode == 0, r.stderr
    assert "on the GPU)" in r.stdout
    assert "latency from a frame's arrival to its motion result: median " in r.stdout
    f = run(mkv, "--decode", "nvdec", "--grey", *MOG2, *motion, "--frames", "100",
            "--events", from_file, timeout=120)
    assert f.returncode == 0, f.stderr
    assert live.read_text() == from_file.read_text() and live.read_text()


@pytest.mark.parametrize("where", ["host", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_several_live_streams_through_dask_each_give_their_motion(clip, tmp_path, where):
    """Two live streams on Dask workers with motion options: each stream's
    regions, frame by frame, and events are fastmog.cpu's for its frames."""
    pytest.importorskip("distributed", reason="needs dask[distributed]")
    path, data, expected = clip
    events, regions = tmp_path / "events", tmp_path / "regions"
    device = ["--cpu"] if where == "host" else []
    with TcpServer([("send", data, "hold")]) as a, TcpServer([("send", data, "hold")]) as b:
        r = run(a.url, b.url, "--workers", "2", *device, *MOG2, "--frames", "40",
                "--morphology", "none", "--min-area", "2", "--threshold", "0.002",
                "--events", events, "--regions", regions, timeout=180)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "processed 2 of 2 sources" in r.stdout
    sub = fastmog.cpu.BackgroundSubtractorMOG2(history=20, var_threshold=12.0)
    # the block walks a pixel a frame: a 3x3 opening would leave nothing
    det = fastmog.cpu.MotionDetector(morphology=None, min_area=2, threshold=0.002)
    want = [det.update(sub.apply(f)).zones[0].regions.stats.tolist() for f in expected[:40]]
    det.finish()
    assert any(want) and det.events, "the clip must hold motion for this test to mean anything"
    files = sorted(regions.iterdir())
    assert len(files) == 2 and len(sorted(events.iterdir())) == 2
    for f in files:
        lines = [json.loads(l) for l in f.read_text().splitlines()]
        assert [line["zones"][0]["regions"] for line in lines] == want, f.name
    for f in sorted(events.iterdir()):
        got = [json.loads(l) for l in f.read_text().splitlines()]
        assert [(e["start_frame"], e["end_frame"], e["box"]) for e in got] == \
            [(e.start_frame, e.end_frame, None if e.box is None else list(e.box))
             for e in det.events], f.name
