"""The one frame loop (fastmog.app._loop): a Dask worker opens and processes
a video exactly as the command line does, on the host and with a GPU
stand-in (a Dask worker that has a GPU once failed every video file), with
the same --batch and --nvdec-sessions."""
import sys

import numpy as np
import pytest

import fastmog
from cli_helpers import masks_digest, run_in_process
from fastmog.app import _dask, _loop, _multi, _sources, _writers, cli
from fastmog._auto_batch import AutoBatch
from fastmog.app._sources import SourceOptions

cv2 = pytest.importorskip("cv2")

MOG2 = {"history": 20, "var_threshold": 12.0}


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    """24 colour frames of noise and a moving block, in a Motion JPEG .avi."""
    path = tmp_path_factory.mktemp("clip") / "clip.avi"
    video = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 25.0, (64, 48))
    assert video.isOpened()
    rng = np.random.default_rng(5)
    for i in range(24):
        frame = rng.integers(90, 110, (48, 64, 3), dtype=np.uint8)
        frame[10:26, 2 * i:2 * i + 12] = 240
        video.write(frame)
    video.release()
    return path


@pytest.fixture(scope="module")
def cli_digest(clip, tmp_path_factory):
    """The masks of `python -m fastmog clip.avi --cpu --out DIR`, as the
    Dask worker digests them."""
    out = tmp_path_factory.mktemp("cli") / "masks"
    status = cli.main([str(clip), "--cpu", "--out", str(out), "--history", "20",
                       "--var-threshold", "12"])
    assert status == 0
    masks = [cv2.imread(str(p), cv2.IMREAD_UNCHANGED) for p in sorted(out.iterdir())]
    assert len(masks) == 24
    return masks_digest(masks)


class HostAsGpu:
    """A GPU subtractor stand-in: the host reference under the GPU type's
    calling convention (device=, stream=, timer=)."""

    def __init__(self, *args, device=None, **kwargs):
        self.host = fastmog.cpu.BackgroundSubtractorMOG2(*args, **kwargs)
        self.device = device

    def __getattr__(self, name):
        return getattr(self.host, name)

    def apply(self, frame, learning_rate=-1.0, *, stream=None, timer=None):
        return self.host.apply(frame, learning_rate)


class NoStream:
    """A stream stand-in: nothing is queued on it."""

    def __init__(self, device=None):
        self.device = device

    def close(self):
        pass


def host_stages(sub, frames, streams, depth, batch, learning_rate, copy, timer, download):
    """The pipeline's stand-in: each frame applied in turn, its mask handed
    out as the host mask of a (host, device) pair."""
    assert len(streams) == 3 and download
    for frame in frames:
        yield sub.apply(frame, learning_rate), None


@pytest.fixture
def gpu_stand_in(monkeypatch):
    """A worker that believes it has one GPU, with no CUDA call made. NVDEC
    is refused (no PyNvVideoCodec), so the reader falls back to the host
    decoder, as on a GPU whose NVDEC lacks the codec."""
    for where in (fastmog._fastmog, fastmog):     # the extension, and its re-exports
        monkeypatch.setattr(where, "cuda_available", lambda: True)
        monkeypatch.setattr(where, "device_count", lambda: 1)
        monkeypatch.setattr(where, "mem_get_info", lambda device=None: (1 << 40, 1 << 40))
        monkeypatch.setattr(where, "BackgroundSubtractorMOG2", HostAsGpu)
        monkeypatch.setattr(where, "Stream", NoStream)
        monkeypatch.setattr(where, "device_properties", lambda device=None: {"name": "none"})
    monkeypatch.setattr(fastmog._pipeline, "_stages", host_stages)
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", None)


def worker_job(policy):
    return _dask.Job(dict(MOG2), -1.0, policy, SourceOptions())


def test_a_dask_worker_opens_a_video_as_the_cli_does(clip, cli_digest, tmp_path):
    result = _dask._run_source(str(clip), None, 0, worker_job("cpu"))
    assert (result["frames"], result["shape"], result["device"]) == (24, (48, 64), None)
    assert result["digest"] == cli_digest


def test_a_dask_worker_with_a_gpu_opens_a_video_as_the_cli_does(clip, cli_digest, tmp_path,
                                                                 gpu_stand_in):
    # the worker's video path on a GPU: VideoReader with decode "auto", a
    # stream, the pipeline; it once raised AttributeError: 'Namespace' object
    # has no attribute 'nvdec_sessions'
    out = tmp_path / "masks"
    result = _dask._run_source(str(clip), str(out), 0, worker_job("spread"))
    assert (result["frames"], result["device"]) == (24, 0)
    assert result["digest"] == cli_digest
    written = [cv2.imread(str(p), cv2.IMREAD_UNCHANGED) for p in sorted(out.iterdir())]
    assert masks_digest(written) == cli_digest


def test_the_cli_on_a_gpu_takes_the_same_loop(clip, cli_digest, tmp_path, gpu_stand_in,
                                              capsys):
    out = tmp_path / "masks"
    r = run_in_process(capsys, clip, "--out", out, "--history", "20", "--var-threshold", "12")
    assert r.returncode == 0, r.stderr
    assert "decoding on the CPU (PyNvVideoCodec is not usable" in r.stdout
    written = [cv2.imread(str(p), cv2.IMREAD_UNCHANGED) for p in sorted(out.iterdir())]
    assert masks_digest(written) == cli_digest


def test_a_dask_job_takes_batch_and_sessions_to_the_worker(clip, cli_digest, gpu_stand_in,
                                                           monkeypatch):
    """--batch and --nvdec-sessions reach the worker's loop and opener, as in a
    single run (with several sources they were once dropped without a word)."""
    seen = {}

    def recording_stages(sub, frames, streams, depth, batch, *rest):
        seen["batch"] = batch
        return host_stages(sub, frames, streams, depth, batch, *rest)

    opener = _sources.open_source

    def recording_open(found, options, **kwargs):
        seen["sessions"] = options.nvdec_sessions
        return opener(found, options, **kwargs)

    monkeypatch.setattr(fastmog._pipeline, "_stages", recording_stages)
    monkeypatch.setattr(_sources, "open_source", recording_open)
    job = _dask.Job(dict(MOG2), -1.0, "spread", SourceOptions(nvdec_sessions=3), batch=4)
    result = _dask._run_source(str(clip), None, 0, job)
    assert seen == {"batch": 4, "sessions": 3}
    assert result["digest"] == cli_digest


def test_the_main_job_measures_its_batch_by_default(clip, gpu_stand_in, monkeypatch, capsys):
    """Without --batch a file's host frames on a GPU go to the pipeline with
    an AutoBatch, whose choice the summary states; --batch K is passed as
    it is."""
    seen = []

    def recording_stages(sub, frames, streams, depth, batch, *rest):
        seen.append(batch)
        return host_stages(sub, frames, streams, depth, batch, *rest)

    monkeypatch.setattr(fastmog._pipeline, "_stages", recording_stages)
    r = run_in_process(capsys, clip)
    assert r.returncode == 0, r.stderr
    assert isinstance(seen[-1], AutoBatch)
    # the stand-in times nothing, and the summary says so
    assert ("fastmog: --batch auto: 1 frame a launch, not measured to the end (the frames "
            "ended first, or checkpoints cut every launch short)") in r.stdout
    r = run_in_process(capsys, clip, "--batch", "2")
    assert r.returncode == 0 and seen[-1] == 2 and "--batch auto" not in r.stdout


def test_several_sources_pass_batch_and_sessions_on(clip, tmp_path, monkeypatch, capsys):
    """The main job with several sources hands its --batch and --nvdec-sessions
    to process_sources, whose Job carries them (no cluster started here)."""
    asked = {}

    class Cluster:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def recording_process_sources(sources, **kwargs):
        asked.update(kwargs)
        return []

    monkeypatch.setattr(_multi, "_client", lambda args: (Cluster(), "a stand-in cluster"))
    monkeypatch.setattr(_multi, "live_workers", lambda client: [])
    monkeypatch.setattr(_multi, "process_sources", recording_process_sources)
    other = tmp_path / "other.avi"
    other.write_bytes(clip.read_bytes())
    status = cli.main([str(clip), str(other), "--workers", "1", "--batch", "5",
                       "--nvdec-sessions", "3"])
    capsys.readouterr()
    assert status == 0
    assert (asked["batch"], asked["nvdec_sessions"]) == (5, 3)
    assert cli.main([str(clip), str(other), "--workers", "1"]) == 0
    capsys.readouterr()
    assert asked["batch"] == "auto"              # the measured choice, as in a single run
    for bad in ({"batch": 0}, {"nvdec_sessions": 0}, {"batch": 2.0}, {"batch": True},
                {"batch": "fast"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            fastmog.process_sources([str(clip)], **bad)


def test_masks_left_on_the_gpu_need_a_gpu_path_and_still_close_everything():
    """download=False on the host path is refused, and the writer and the
    source are closed all the same."""
    closed = []

    class Writer(_writers.NoMasks):
        def close(self):
            closed.append("writer")

    class Source:
        fps, on_device, reader = 25.0, False, None

        def __iter__(self):
            return iter(())

        def close(self):
            closed.append("source")

    with pytest.raises(ValueError, match="GPU path"):
        _loop.process(fastmog.cpu.BackgroundSubtractorMOG2(), Source(), Writer(), streams=[],
                      download=False)
    assert closed == ["writer", "source"]


class RingSource:
    """A source whose reader hands out a ring of `depth` buffers."""

    def __init__(self, depth):
        self.reader = type("Reader", (), {"depth": depth})()


def passed_as_they_are(frames, handed):
    return [h is f for f, h in zip(frames, handed)]


def test_a_readers_ring_is_uploaded_as_it_is_only_while_it_outlasts_the_ring_of_slots():
    frames = [np.full((4, 4), i, np.uint8) for i in range(6)]
    deep = RingSource(_loop.PIPELINE_DEPTH + 1)
    assert all(passed_as_they_are(frames, list(_loop._host_frames(deep, iter(frames), 1))))
    copied = list(_loop._host_frames(deep, iter(frames), 2))
    assert not any(passed_as_they_are(frames, copied))
    assert all(np.array_equal(f, c) for f, c in zip(frames, copied))


def test_an_automatic_batch_judges_each_frame_by_the_largest_k_a_launch_may_yet_hold():
    # While K = 1 is measured the next slots may take 2 frames each (a frame
    # pulled now waits behind them); after a choice, the largest K asked for.
    frames = [np.full((4, 4), i, np.uint8) for i in range(7)]
    auto = AutoBatch()
    handed = []
    ring = RingSource(2 * _loop.PIPELINE_DEPTH + 1)
    for i, f in enumerate(_loop._host_frames(ring, iter(frames), auto)):
        handed.append(f)
        if i == 2:
            auto.batch = auto.largest = 2         # the measurement moved on to K = 2: 4 may come
        if i == 4:
            auto.batch = auto.chosen = 1          # and chose 1: slots of 2 may still be in flight
    assert passed_as_they_are(frames, handed) == [True] * 3 + [False] * 2 + [True] * 2
    shallow = RingSource(2 * _loop.PIPELINE_DEPTH)
    assert not any(passed_as_they_are(frames, list(_loop._host_frames(shallow, iter(frames),
                                                                      AutoBatch()))))


def test_the_main_job_reads_a_video_into_a_ring_deeper_than_its_slots(clip):
    """One frame a launch (a live stream's, and a file's automatic batch when
    the kernel is faster than the copies) passes the decoder's pinned frames
    as they are: the ring must outlast the pipeline's slots."""
    source = _sources.open_source(_sources.find_input(str(clip)), SourceOptions(decode="cpu"),
                                  on_gpu=False, stream=None, timer=None,
                                  check_memory=lambda *a, **k: None)
    try:
        # one frame a launch, chosen or measured (the next slots may take two)
        assert source.reader.depth > _loop.PIPELINE_DEPTH * 2
    finally:
        source.close()


@pytest.mark.parametrize("live", [False, True])
def test_an_automatic_batch_is_one_frame_a_launch_for_a_live_stream(live, monkeypatch):
    """"auto" (the several-sources path's default, or asked for) measures a
    file's K; a live stream's frames go one a launch, its masks at once."""
    seen = []

    def recording_stages(sub, frames, streams, depth, batch, *rest):
        seen.append(batch)
        return host_stages(sub, frames, streams, depth, batch, *rest)

    class Source:
        fps, on_device, reader = 25.0, False, None
        arrivals = {} if live else None

        def __iter__(self):
            return iter([np.zeros((8, 8), np.uint8)] * 3)

        def close(self):
            pass

    masks = []
    monkeypatch.setattr(fastmog._pipeline, "_stages", recording_stages)
    done = _loop.process(HostAsGpu(), Source(), _writers.NoMasks(), streams=[NoStream()] * 3,
                         batch="auto", on_mask=lambda i, m: masks.append(m))
    assert len(masks) == 3
    assert (seen[0] == 1) if live else isinstance(seen[0], AutoBatch)
    assert (done.auto_batch is None) if live else done.auto_batch is seen[0]
