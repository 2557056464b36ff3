"""Many sources on a Dask cluster (fastmog.process_sources and the main job's
--workers): a local cluster of two worker processes on the host reference,
masks identical to each source run alone, a worker lost mid-run."""
import concurrent.futures
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import fastmog
from cli_helpers import masks_digest, one_error_line, run
from fastmog.app import _dask
from fastmog.testing import find_test_data

distributed = pytest.importorskip("distributed", reason="needs dask[distributed] "
                                  "(pip install 'fastmog[dask]')")
cloudpickle = pytest.importorskip("cloudpickle")
cv2 = pytest.importorskip("cv2")

# the callable sources below run on the workers, which cannot import this file
cloudpickle.register_pickle_by_value(sys.modules[__name__])

MOG2 = {"history": 20, "var_threshold": 12.0}


def write_source(folder, rng, n, shape=(36, 52, 3)):
    """A folder of PNG frames: noise around a grey level, and a bright block
    that moves, so masks hold background, foreground and shadow."""
    folder.mkdir(parents=True)
    level = int(rng.integers(60, 160))
    for i in range(n):
        frame = rng.integers(level - 12, level + 12, shape, dtype=np.uint8)
        x = (3 * i) % (shape[1] - 8)
        frame[8:20, x:x + 8] = 250
        frame[22:30, x:x + 8] = frame[22:30, x:x + 8] // 2        # a shadow-like patch
        assert cv2.imwrite(str(folder / f"frame_{i:04d}.png"), frame)
    return folder


def alone(folder, learning_rate=-1.0):
    """The source run alone, in this process: its masks by the host reference."""
    sub = fastmog.cpu.BackgroundSubtractorMOG2(**MOG2)
    files = sorted(folder.iterdir())
    return [sub.apply(cv2.imread(str(f), cv2.IMREAD_COLOR), learning_rate) for f in files]


@pytest.fixture(scope="module")
def client():
    with fastmog.local_client(2) as c:
        c.wait_for_workers(2, timeout=60)
        # the workers import this fastmog (PYTHONPATH is inherited), not another
        assert set(c.run(lambda: fastmog.__file__).values()) == {fastmog.__file__}
        yield c


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    root = tmp_path_factory.mktemp("sources")
    # different lengths, so the workers free up at different times
    return [write_source(root / f"cam{k}", rng, n) for k, n in enumerate((14, 9, 12, 7))]


def test_masks_identical_to_single_runs(client, sources, tmp_path):
    out_dirs = [tmp_path / f"out{k}" for k in range(len(sources))]
    seen = []
    results = fastmog.process_sources(sources, client=client, out_dirs=out_dirs,
                                      mog2_kwargs=MOG2, device_policy="cpu",
                                      on_result=seen.append)
    assert [r.source for r in results] == sources
    assert sorted(map(id, seen)) == sorted(map(id, results))
    assert {r.worker for r in results} == set(client.scheduler_info()["workers"])
    for folder, out, r in zip(sources, out_dirs, results):
        expected = alone(folder)
        assert r.status == "done", r.error
        assert (r.frames, r.shape, r.device) == (len(expected), expected[0].shape, None)
        assert r.digest == masks_digest(expected)
        written = sorted(out.iterdir())
        assert [p.name for p in written] == [f"mask_{i:06d}.png" for i in range(len(expected))]
        for i, (p, mask) in enumerate(zip(written, expected)):
            back = cv2.imread(str(p), cv2.IMREAD_UNCHANGED)
            assert np.array_equal(back, mask), f"{folder.name} frame {i}: " \
                f"{int((back != mask).sum())} pixels differ"
        assert {0, 255} <= set(np.unique(np.stack(expected)).tolist())


def test_learning_rate_and_frames_reach_the_workers(client, sources):
    r, = fastmog.process_sources(sources[:1], client=client, mog2_kwargs=MOG2,
                                 learning_rate=0.3, frames=5, device_policy="cpu")
    assert r.status == "done" and r.frames == 5
    assert r.digest == masks_digest(alone(sources[0], 0.3)[:5])
    assert r.digest != masks_digest(alone(sources[0])[:5])


def test_a_bad_source_fails_alone(client, sources, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    bad, good = fastmog.process_sources([empty, sources[1]], client=client,
                                        mog2_kwargs=MOG2, device_policy="cpu")
    assert bad.status == "failed" and "holds no frames" in bad.error
    assert good.status == "done" and good.digest == masks_digest(alone(sources[1]))


def test_bad_arguments_fail_before_any_work(client, sources):
    with pytest.raises(TypeError, match="histroy"):
        fastmog.process_sources(sources, client=client, mog2_kwargs={"histroy": 3})
    with pytest.raises(ValueError, match="device_policy"):
        fastmog.process_sources(sources, client=client, device_policy="gpu0")
    with pytest.raises(ValueError, match="out_dirs"):
        fastmog.process_sources(sources, client=client, out_dirs=["a"])
    with pytest.raises(TypeError, match="source"):
        fastmog.process_sources([3], client=client)


@pytest.mark.parametrize("policy", ["cpu", pytest.param("spread", marks=pytest.mark.gpu)])
def test_each_source_gets_its_own_motion_detector(client, sources, tmp_path, policy):
    """motion=: each source's events are fastmog.cpu.MotionDetector's on
    its own masks, with the events file beside; on a GPU the masks never
    leave it (no digest) unless out_dirs asks for them."""
    options = {"morphology": None, "min_area": 2, "threshold": 0.02, "gap_frames": 2}
    events = [tmp_path / f"e{k}.jsonl" for k in range(2)]
    results = fastmog.process_sources(sources[:2], client=client, mog2_kwargs=MOG2,
                                      device_policy=policy, motion=options,
                                      events_paths=events)
    for folder, r, path in zip(sources, results, events):
        assert r.status == "done", r.error
        det = fastmog.cpu.MotionDetector(fps=25.0, **options)
        for mask in alone(folder):
            det.update(mask)
        det.finish()
        assert det.events, "the scene must hold events for this test to mean anything"
        assert [(e.zone, e.start_frame, e.end_frame, e.box) for e in r.events] == \
            [(e.zone, e.start_frame, e.end_frame, e.box) for e in det.events]
        assert len(path.read_text().splitlines()) == len(det.events)
        assert (r.digest is None) == (policy == "spread")
        assert r.shape == alone(folder)[0].shape
    plain, = fastmog.process_sources(sources[:1], client=client, mog2_kwargs=MOG2,
                                     device_policy=policy)
    assert plain.events is None and plain.digest == masks_digest(alone(sources[0]))


def test_bad_motion_arguments_fail_before_any_work(client, sources, tmp_path):
    with pytest.raises(TypeError, match="dict"):
        fastmog.process_sources(sources, client=client, motion="open")
    with pytest.raises(TypeError, match="fps"):
        fastmog.process_sources(sources, client=client, motion={"fps": 5})
    with pytest.raises(ValueError, match="threshold"):
        fastmog.process_sources(sources, client=client, motion={"threshold": 2})
    with pytest.raises(ValueError, match="give motion too"):
        fastmog.process_sources(sources, client=client, events_paths=["e"] * len(sources))
    with pytest.raises(ValueError, match="regions_paths has 1 entries"):
        fastmog.process_sources(sources, client=client, motion={}, regions_paths=["r"])
    with pytest.raises(ValueError, match="checkpoints"):
        fastmog.process_sources(sources, client=client, motion={},
                                checkpoints=tmp_path / "c", checkpoint_every=2)
    assert not (tmp_path / "c").exists()


def test_cli_workers_several_sources(sources, tmp_path):
    twin = tmp_path / "again" / sources[0].name      # same folder name: a unique subfolder
    twin.parent.mkdir()
    os.symlink(sources[0], twin)
    out = tmp_path / "masks"
    started = time.perf_counter()
    result = run(*sources[:3], twin, "--workers", "2", "--out", out, "--cpu",
                 "--history", "20", "--var-threshold", "12", timeout=120)
    assert result.returncode == 0, result.stderr
    print(f"CLI with a 2-worker cluster: {time.perf_counter() - started:.1f} s")
    assert "4 sources on a local cluster of 2 Dask workers" in result.stdout
    assert "processed 4 of 4 sources" in result.stdout
    names = ["cam0", "cam1", "cam2", "cam0-2"]
    assert sorted(p.name for p in out.iterdir()) == sorted(names)
    for name, folder in zip(names, [*sources[:3], sources[0]]):
        written = sorted((out / name).iterdir())
        expected = alone(folder)
        assert len(written) == len(expected)
        assert all(np.array_equal(cv2.imread(str(p), cv2.IMREAD_UNCHANGED), m)
                   for p, m in zip(written, expected))


def test_cli_several_sources_mistakes(sources, tmp_path):
    assert "--preview is for a single source" in one_error_line(
        run(*sources[:2], "--preview", tmp_path / "p.png"))
    assert "names a video" in one_error_line(run(*sources[:2], "--out", tmp_path / "m.mkv"))
    used = tmp_path / "used"
    (used / "cam1").mkdir(parents=True)
    (used / "cam1" / "keep.txt").write_text("mine")
    assert "is not empty" in one_error_line(run(*sources[:2], "--out", used))
    assert "no such file" in one_error_line(run(sources[0], tmp_path / "nope", "--workers", "2"))
    assert "need sources" in one_error_line(run("--workers", "2"))
    assert "not allowed with argument" in one_error_line(
        run(*sources[:2], "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"))


class Slow:
    """A source whose frames take a while, so it is still running on its worker
    while the client polls the cluster several times."""

    def __init__(self, n, seconds):
        self.n, self.seconds = n, seconds

    def __call__(self):
        rng = np.random.default_rng(1)
        for _ in range(self.n):
            time.sleep(self.seconds)
            yield rng.integers(0, 256, (24, 32), dtype=np.uint8)


def test_an_empty_cached_worker_list_loses_nothing(client, monkeypatch):
    """client.scheduler_info() is a cache that distributed's periodic refresh
    can leave without workers while they are busy and well: a source is lost
    only when the scheduler removes its worker, so healthy sources finish."""
    real, calls = client.scheduler_info, []

    def flaky(*args, **kwargs):
        calls.append(1)
        info = real(*args, **kwargs)
        return info if len(calls) == 1 else {**info, "workers": {}}

    monkeypatch.setattr(client, "scheduler_info", flaky)
    results = fastmog.process_sources([Slow(6, 0.2), Slow(5, 0.2)], client=client,
                                      mog2_kwargs=MOG2, device_policy="cpu")
    assert len(calls) > 2                    # it was asked while the sources ran
    assert [r.status for r in results] == ["done", "done"], [r.error for r in results]
    assert [r.frames for r in results] == [6, 5]


class KillsItsWorker:
    """A source that yields a few frames, then kills the worker process it
    runs in (as a crashing decoder would)."""

    def __init__(self, after):
        self.after = after

    def __call__(self):
        rng = np.random.default_rng(0)
        for _ in range(self.after):
            yield rng.integers(0, 256, (24, 32), dtype=np.uint8)
        time.sleep(0.5)                    # the other worker is busy with its source by now
        os.kill(os.getpid(), signal.SIGKILL)
        yield None                         # never reached


def test_a_lost_worker_is_reported_and_the_others_finish(client, sources):
    # last in this file: the cluster has a restarted worker afterwards
    killer = KillsItsWorker(after=4)
    # a lost source that is never reported would wait forever: fail instead
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        results = pool.submit(fastmog.process_sources, [killer, *sources[:3]], client=client,
                              mog2_kwargs=MOG2, device_policy="cpu").result(timeout=60)
    lost = results[0]
    assert lost.status == "lost", lost
    assert lost.source is killer and lost.worker and lost.worker in lost.error
    assert "was lost while processing" in lost.error
    for folder, r in zip(sources[:3], results[1:]):
        assert r.status == "done", r.error
        assert r.worker != lost.worker
        assert r.digest == masks_digest(alone(folder))


class KillsOnce:
    """A folder's frames that kill the worker once, after `after` frames, the
    first time they are read (a marker file says it happened)."""

    def __init__(self, folder, marker, after):
        self.folder, self.marker, self.after = str(folder), str(marker), after

    def __call__(self):
        for i, f in enumerate(sorted(pathlib.Path(self.folder).iterdir())):
            if i == self.after and not os.path.exists(self.marker):
                open(self.marker, "w").close()
                os.kill(os.getpid(), signal.SIGKILL)
            yield cv2.imread(str(f), cv2.IMREAD_COLOR)


def test_a_lost_source_resumes_from_its_checkpoint(client, sources, tmp_path):
    """Killed after 12 frames, checkpointed every 5: run again elsewhere from
    frame 10, its masks are those of the source run alone, every one."""
    folder = sources[0]                                   # 14 frames
    out = tmp_path / "out"
    killer = KillsOnce(folder, tmp_path / "killed", after=12)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        results = pool.submit(fastmog.process_sources, [killer, sources[1]], client=client,
                              out_dirs=[out, None], mog2_kwargs=MOG2, device_policy="cpu",
                              checkpoints=tmp_path / "ck", checkpoint_every=5
                              ).result(timeout=120)
    r = results[0]
    assert (tmp_path / "killed").exists()                 # it was killed, and run again
    assert r.status == "done", r.error
    assert r.resumed_from == 10 and r.frames == 4
    written = [cv2.imread(str(p), cv2.IMREAD_UNCHANGED) for p in sorted(out.iterdir())]
    expected = alone(folder)
    assert len(written) == len(expected) == 14
    for k, (w, e) in enumerate(zip(written, expected)):
        np.testing.assert_array_equal(w, e, err_msg=f"mask {k}")
    assert results[1].status == "done" and results[1].resumed_from == 0


def test_checkpoint_options_are_checked_before_the_cluster(tmp_path):
    with pytest.raises(ValueError, match="no checkpoints folder"):
        fastmog.process_sources([lambda: iter(())], checkpoint_every=5)
    with pytest.raises(ValueError, match="checkpoint_every must be"):
        fastmog.process_sources([lambda: iter(())], checkpoints=tmp_path)


def test_cli_terminal_holds_only_fastmogs_lines(sources, tmp_path):
    """A source that fails mid-run: its one line, and none of distributed's
    (no worker error block, no "Port 8787 is already in use" warning, which a
    listener on 8787 would otherwise bring)."""
    import socket

    broken = tmp_path / "broken"
    broken.mkdir()
    for f in sorted(sources[1].iterdir()):
        (broken / f.name).write_bytes(f.read_bytes())
    (broken / "frame_0004.png").write_bytes(b"not a png")
    listener = socket.socket()
    try:
        listener.bind(("", 8787))
        listener.listen()
    except OSError:
        pass                                  # taken already: the same case
    try:
        r = run(sources[0], broken, "--workers", "2", "--cpu", timeout=120)
    finally:
        listener.close()
    assert r.returncode == 4
    assert r.stderr.splitlines() == [f"fastmog: error: {broken}: cannot read image "
                                     f"{broken / 'frame_0004.png'}: not an image OpenCV can "
                                     f"decode"], r.stderr


def _catches_sigterm(pid):
    """Whether the process has its own SIGTERM handler yet (fastmog installs it
    first thing; before it, Python itself would print the interrupt)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            caught = next(int(l.split()[1], 16) for l in f if l.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return True                      # no /proc: the delay alone must do
    return bool(caught & (1 << (signal.SIGTERM - 1)))


@pytest.mark.parametrize("after", [0.0, 0.4])
def test_cli_ctrl_c_while_the_cluster_starts_is_one_line(sources, after):
    """Ctrl-C from a terminal reaches fastmog and its worker processes alike."""
    p = subprocess.Popen([sys.executable, "-m", "fastmog", *sources, "--workers", "2",
                          "--cpu"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    deadline = time.monotonic() + 20
    while not _catches_sigterm(p.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(after)
    os.killpg(p.pid, signal.SIGINT)
    _, stderr = p.communicate(timeout=90)
    if p.returncode == 0:
        pytest.skip("the run ended before Ctrl-C")
    assert p.returncode == 130, stderr
    assert stderr.splitlines() == ["fastmog: interrupted (Ctrl-C)"], stderr


def test_a_cdnet_sequence_among_several_is_scored(sources, tmp_path):
    """As alone: its own groundtruth/ scores it, in its source's line."""
    from cli_helpers import write_cdnet

    seq = write_cdnet(tmp_path / "seq", n=6, roi_text="2 6")
    alone_run = run(seq, "--cpu", "--history", "20", "--var-threshold", "12")
    assert alone_run.returncode == 0, alone_run.stderr
    expected = alone_run.stdout.split("precision ")[1].split(" over")[0]
    r = run(seq, sources[1], "--workers", "2", "--cpu", "--history", "20", "--var-threshold",
            "12", timeout=120)
    assert r.returncode == 0, r.stderr
    line, = [l for l in r.stdout.splitlines() if l.startswith(f"fastmog: {seq}:")]
    assert f"CDnet ground truth: precision {expected} over 5 frames" in line, (line, expected)


def test_cli_progress_line_for_several_sources_on_a_terminal(tmp_path):
    """Frames done per source, redrawn while they run, only on a terminal."""
    import pty
    import threading

    videos = []
    for k in range(2):
        path = tmp_path / f"clip{k}.avi"
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 25, (160, 120))
        rng = np.random.default_rng(k)
        for _ in range(150):
            writer.write(rng.integers(0, 256, (120, 160, 3), dtype=np.uint8))
        writer.release()
        videos.append(path)
    leader, follower = pty.openpty()
    seen = []

    def drain():
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                return
            if not chunk:
                return
            seen.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        p = subprocess.Popen([sys.executable, "-m", "fastmog", *videos, "--workers", "2",
                              "--cpu"], stdout=subprocess.PIPE, stderr=follower, text=True)
        os.close(follower)
        out, _ = p.communicate(timeout=120)
        reader.join(10)
    finally:
        os.close(leader)
    assert p.returncode == 0, out
    shown = b"".join(seen).decode(errors="replace")
    assert "fastmog: processing: clip" in shown and "frames/s" in shown, shown
    assert "processed 2 of 2 sources" in out
    # not a terminal: no progress line
    r = run(*videos, "--workers", "2", "--cpu", "--frames", "5", timeout=120)
    assert r.returncode == 0 and "processing:" not in r.stderr, r.stderr


def test_a_video_with_a_hole_among_several_is_not_complete(sources, tmp_path):
    """As alone: its line names the missing frames and the status is 3, unless
    --accept-short; the other sources are reported as usual."""
    from cli_helpers import write_gapped_mkv

    video = write_gapped_mkv(tmp_path / "hole.mkv", [*range(6), *range(20, 24)])
    r = run(video, sources[1], "--workers", "2", "--cpu", timeout=120)
    assert r.returncode == 3, r.stderr
    assert r.stderr.splitlines() == [f"fastmog: error: {video}: read 10 frames of the 24 its "
                                     f"container announces: frames 6-19 are missing (corrupt "
                                     f"video); pass --accept-short to accept it"], r.stderr
    assert "processed 2 of 2 sources" in r.stdout
    r = run(video, sources[1], "--workers", "2", "--cpu", "--accept-short", timeout=120)
    assert r.returncode == 0 and "frames 6-19 are missing" in r.stdout, r.stderr


def test_the_clients_own_event_handler_still_gets_events(client, sources):
    seen = []
    client.subscribe_topic("all", seen.append)
    try:
        r, = fastmog.process_sources(sources[:1], client=client, mog2_kwargs=MOG2,
                                     device_policy="cpu")
        assert r.status == "done"
        assert client._event_handlers.get("all") == seen.append   # put back
        client.log_event("all", {"action": "fastmog-test"})
        deadline = time.monotonic() + 10
        while not any(m.get("action") == "fastmog-test" for _, m in seen) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any(m.get("action") == "fastmog-test" for _, m in seen)
    finally:
        client.unsubscribe_topic("all")


def _two_videos():
    """Two video files: the H.264 and HEVC test clips where they were made
    (benchmarks/make_clips.py: NVDEC decodes them on a GPU), else OpenCV's two
    sample videos from the test data."""
    root = pathlib.Path(__file__).resolve().parents[2]
    clips = pathlib.Path(os.environ.get("FASTMOG_CLIPS", root / ".testdata" / "clips"))
    if (clips / "vtest_h264.mp4").is_file() and (clips / "vtest_hevc.mkv").is_file():
        return [clips / "vtest_h264.mp4", clips / "vtest_hevc.mkv"]
    data = find_test_data(root)
    if data is None:
        pytest.skip("no test clips and no test data: run python benchmarks/make_clips.py "
                    "or set FASTMOG_TEST_DATA")
    return [data / "opencv_samples_video" / "vtest.avi",
            data / "opencv_samples_video" / "tree.avi"]


def test_two_videos_on_one_worker_equal_single_runs(tmp_path):
    """The documented command, two video files on one worker, on the GPU where
    there is one (a worker with a GPU once failed every video file): exit 0,
    each source's masks equal to its single run's."""
    videos = _two_videos()
    out = tmp_path / "masks"
    r = run(*videos, "--workers", "1", "--frames", "40", "--out", out, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "processed 2 of 2 sources" in r.stdout
    assert r.stdout.count(" on GPU 0 of worker ") == (2 if fastmog.cuda_available() else 0), \
        r.stdout
    for video, name in zip(videos, _dask.unique_names(videos)):
        single = tmp_path / f"single-{name}"
        alone_run = run(video, "--frames", "40", "--out", single, timeout=300)
        assert alone_run.returncode == 0, alone_run.stderr
        expected = sorted(single.iterdir())
        written = sorted((out / name).iterdir())
        assert [p.name for p in written] == [p.name for p in expected] and len(written) == 40
        for a, b in zip(written, expected):
            assert np.array_equal(cv2.imread(str(a), cv2.IMREAD_UNCHANGED),
                                  cv2.imread(str(b), cv2.IMREAD_UNCHANGED)), (video, a.name)
