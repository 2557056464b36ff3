"""fastmog.VideoReader: host decoding into a pinned ring (runs anywhere), NVDEC
frames straight into MOG2 (GPU and PyNvVideoCodec), truncated and corrupt
streams, interruptible opening, decode timing.

The clips come from `python benchmarks/make_clips.py` (in .testdata/clips or
$FASTMOG_CLIPS); tests that need them skip without them.

NVDEC and the host decoder are compared apples with apples: NVDEC's luma is
the video's Y plane, so the reference is FFmpeg's own decoded Y and UV planes
(H.264 and HEVC decoding is bit-exact), not OpenCV's BGR turned grey.
make_clips.py stores their SHA-256 per frame (read through PyAV), so the GPU
machine needs no PyAV: NVDEC planes equal FFmpeg's when the hashes match, and
masks from NVDEC frames applied on the GPU without a copy must equal the host
reference's masks of the same planes (colour: NV12 -> BGR by OpenCV).
"""
import os
import shutil
import signal
import threading
import time

import numpy as np
import pytest

import fastmog
from fastmog.profiling import _analysis as pa
from cli_helpers import write_gapped_mkv
from clip_helpers import device_array, manifest, sha256

cv2 = pytest.importorskip("cv2")

GOOD = ["vtest_h264.mp4", "vtest_h264.mkv", "vtest_hevc.mp4", "vtest_hevc.mkv"]
DAMAGED = ["vtest_h264_truncated.mp4", "vtest_h264_corrupt.mkv", "vtest_hevc_corrupt.mp4"]


def opencv_frames(path, grey=False):
    cap = cv2.VideoCapture(str(path))
    try:
        while True:
            ok, frame = cap.read()
            if not ok:
                return
            yield cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY) if grey else frame
    finally:
        cap.release()


# ---- host decoding ------------------------------------------------------------------


@pytest.mark.parametrize("name", GOOD)
@pytest.mark.parametrize("grey", [False, True])
def test_host_reader_gives_every_frame_in_order(clips, name, grey):
    expected = list(opencv_frames(clips / name, grey))
    with fastmog.VideoReader(clips / name, decode="cpu", grey=grey) as reader:
        assert reader.backend == "cpu" and reader.fallback_reason
        assert (reader.width, reader.height) == (768, 576)
        assert reader.frame_count == manifest(clips)[name]["frames"] == len(expected)
        pts = []
        for frame, want in zip(reader, expected, strict=True):
            assert not frame.on_device and frame.grey == grey
            assert frame.host.shape == want.shape
            np.testing.assert_array_equal(frame.host, want, err_msg=f"frame {frame.index}")
            pts.append(frame.pts)
    assert frame.index == len(expected) - 1
    assert pts == sorted(pts) and pts[1] > pts[0]


def test_fps_and_frame_count_are_the_containers(tmp_path):
    path = tmp_path / "clip.avi"
    video = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 12.5, (32, 24))
    for i in range(7):
        video.write(np.full((24, 32, 3), 20 * i, np.uint8))
    video.release()
    with fastmog.VideoReader(path, decode="cpu") as reader:
        assert (reader.fps, reader.frame_count) == (12.5, 7)
        assert [round(f.pts * reader.fps) for f in reader] == list(range(7))


def test_host_ring_holds_depth_frames(clips):
    depth = 3
    reader = fastmog.VideoReader(clips / "vtest_h264.mp4", decode="cpu", depth=depth)
    frames = [next(reader) for _ in range(2 * depth + 1)]
    addresses = [f.host.ctypes.data for f in frames]
    assert len(set(addresses)) == depth
    assert all(addresses[i] == addresses[i + depth] for i in range(depth + 1))
    # A frame is intact until depth more frames were read.
    reference = list(opencv_frames(clips / "vtest_h264.mp4"))
    kept = frames[-1]
    for frame in [next(reader) for _ in range(depth - 1)]:
        pass
    np.testing.assert_array_equal(kept.host, reference[kept.index])
    np.testing.assert_array_equal(frame.host, reference[frame.index])
    # OpenCV decodes straight into the ring: no copy was needed.
    assert reader._decoder.in_place and reader._decoder.copies == 0
    reader.close()
    reader.close()
    assert reader.closed
    with pytest.raises(ValueError, match="closed"):
        next(reader)


def test_host_ring_is_pinned_where_it_can_be(clips):
    with fastmog.VideoReader(clips / "vtest_h264.mp4", decode="cpu") as reader:
        frame = next(reader)
        if fastmog.cuda_available():
            assert reader.pinned is True and fastmog.is_pinned(frame.host)
        else:
            assert reader.pinned is False and reader._decoder.pinned_reason


def _read_until_broken(reader, clips, name):
    """Reads a damaged clip: every good frame in order, then DecodeError with
    the index of the first bad one. Returns (indices, error)."""
    got = []
    with pytest.raises(fastmog.DecodeError, match="truncated or corrupt") as info:
        for frame in reader:
            got.append(frame.index)
    assert got == list(range(len(got)))
    assert info.value.frame_index == len(got) < manifest(clips)[name]["frames"]
    return got, info.value


@pytest.mark.parametrize("name", DAMAGED)
def test_broken_stream_stops_at_the_first_bad_frame(clips, name):
    """Every good frame is delivered, then DecodeError names the frame index;
    FFmpeg read through PyAV (independently) decodes the same number."""
    got, error = _read_until_broken(fastmog.VideoReader(clips / name, decode="cpu"), clips, name)
    assert str(len(got)) in str(error)
    assert len(got) == len(manifest(clips)[name]["y_sha256"])   # FFmpeg via PyAV


def test_bad_arguments(clips, tmp_path):
    clip = clips / "vtest_h264.mp4"
    with pytest.raises(ValueError, match="decode"):
        fastmog.VideoReader(clip, decode="gpu")
    with pytest.raises(ValueError, match="depth"):
        fastmog.VideoReader(clip, depth=0)
    with pytest.raises(TypeError, match="stream"):
        fastmog.VideoReader(clip, stream=7)
    with pytest.raises(TypeError, match="timer"):
        fastmog.VideoReader(clip, timer="t")
    with pytest.raises(FileNotFoundError):
        fastmog.VideoReader(tmp_path / "missing.mp4")
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="sessions"):
            fastmog.VideoReader(clip, sessions=bad)
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        with pytest.raises(ValueError, match="sessions=2 needs a video file"):
            fastmog.VideoReader(fifo, sessions=2)
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video" * 100)
    with pytest.raises(fastmog.DecodeError, match="cannot read video"):
        fastmog.VideoReader(junk, decode="cpu")


def nvdec_usable():
    if not fastmog.cuda_available():
        return False
    try:
        import PyNvVideoCodec  # noqa: F401
    except Exception:
        return False
    return True


def test_nvdec_missing_is_an_error_or_a_fallback(clips):
    if nvdec_usable():
        pytest.skip("NVDEC is usable here (the GPU tests cover it)")
    with pytest.raises(fastmog.DecodeError) as info:
        fastmog.VideoReader(clips / "vtest_h264.mp4", decode="nvdec")
    reader = fastmog.VideoReader(clips / "vtest_h264.mp4")
    assert reader.backend == "cpu"
    assert reader.fallback_reason == str(info.value).splitlines()[0]
    assert "\n" not in reader.fallback_reason


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "camera.fifo"
    os.mkfifo(path)
    yield path
    # Release the open abandoned in its daemon thread: a writer appears, then EOF.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
    except OSError:
        pass


def test_silent_source_times_out(fifo):
    started = time.monotonic()
    with pytest.raises(fastmog.DecodeError, match="no answer within 0.3 s"):
        fastmog.VideoReader(fifo, decode="cpu", open_timeout=0.3)
    assert time.monotonic() - started < 5


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signals reach only the main thread")
def test_silent_source_open_stops_on_ctrl_c(fifo):
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            fastmog.VideoReader(fifo, decode="cpu")
    finally:
        timer.cancel()
    assert time.monotonic() - started < 5


# ---- decode timing ----------------------------------------------------------------


class RecordingTimer(fastmog.Timer):
    """Stands in for the C Timer's _decoder_call, the reader's one record of
    each decode (its engine and session beside the host time)."""

    def __init__(self, *args, **kwargs):
        self.calls = []

    def _decoder_call(self, name, start_ns, host_ns, shape, activity, session):
        # the consumer's record: no session of its own, the engine named for NVDEC
        assert session == -1 and activity in (None, "NVDEC")
        self.calls.append((name, start_ns, host_ns, shape))


@pytest.mark.parametrize("how", ["argument", "profile"])
def test_each_decode_is_one_timed_call(clips, how):
    timer = RecordingTimer()
    before = time.perf_counter_ns()
    if how == "argument":
        with fastmog.VideoReader(clips / "vtest_hevc.mkv", decode="cpu", grey=True,
                                 timer=timer) as reader:
            n = sum(1 for _ in reader)
    else:
        with fastmog.profile(timer=timer), \
                fastmog.VideoReader(clips / "vtest_hevc.mkv", decode="cpu") as reader:
            n = sum(1 for _ in reader)
    after = time.perf_counter_ns()
    assert n == 120 and len(timer.calls) == n
    channels = 1 if how == "argument" else 3
    for name, start, host_ns, shape in timer.calls:
        assert name == "VideoReader.decode" and shape == (576, 768, channels)
        assert before <= start and 0 < host_ns and start + host_ns <= after
    starts = [c[1] for c in timer.calls]
    assert starts == sorted(starts)


def test_reader_works_with_a_timer_lacking_host_calls(clips):
    with fastmog.profile() as t, fastmog.VideoReader(clips / "vtest_h264.mp4",
                                                      decode="cpu") as reader:
        assert sum(1 for _ in reader) == 120
    names = {r.name for r in t.records}
    assert ("VideoReader.decode" in names) == hasattr(fastmog.Timer, "_host_call")


def test_colour_device_frame_needs_nv12_to_bgr():
    if hasattr(fastmog._fastmog, "nv12_to_bgr"):
        pytest.skip("this build has nv12_to_bgr")
    frame = fastmog.VideoFrame(0, 0.0, False, luma=object(), chroma=object())
    with pytest.raises(RuntimeError, match="nv12_to_bgr"):
        frame.as_input(None)


# ---- NVDEC (GPU, PyNvVideoCodec) -----------------------------------------------------


def host_planes(frame, stream, info):
    """The frame's NV12 planes on the host, checked equal to FFmpeg's."""
    h, w = info["height"], info["width"]
    y = device_array(frame.luma, stream).reshape(h, w)
    uv = device_array(frame.chroma, stream).reshape(h // 2, w // 2, 2)
    assert sha256(y) == info["y_sha256"][frame.index], f"luma of frame {frame.index}"
    assert sha256(uv) == info["uv_sha256"][frame.index], f"chroma of frame {frame.index}"
    return y, uv


@pytest.mark.gpu
@pytest.mark.parametrize("name", GOOD + ["traffic4k_h264.mp4", "traffic4k_hevc.mkv"])
def test_nvdec_planes_equal_ffmpeg_planes(clips, nvdec, name):
    stream = nvdec
    info = manifest(clips)[name]
    with fastmog.VideoReader(clips / name, stream=stream, decode="nvdec", grey=True) as reader:
        assert reader.backend == "nvdec" and reader.fallback_reason is None
        assert (reader.width, reader.height) == (info["width"], info["height"])
        n = 0
        for frame in reader:
            assert frame.on_device and frame.host is None and frame.index == n
            host_planes(frame, stream, info)
            n += 1
    assert n == info["frames"] == len(info["y_sha256"])


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["vtest_h264.mp4", "vtest_hevc.mkv", "traffic4k_h264.mp4"])
def test_nvdec_grey_masks_equal_host_decode_masks(clips, nvdec, name):
    """NVDEC luma goes into apply as a view of the decoder's buffer (no copy),
    and its masks equal those of the host reference fed FFmpeg's Y planes."""
    stream, info = nvdec, manifest(clips)[name]
    gpu = fastmog.BackgroundSubtractorMOG2()
    host = fastmog.cpu.BackgroundSubtractorMOG2()
    with fastmog.VideoReader(clips / name, stream=stream, decode="nvdec", grey=True) as reader:
        for frame in reader:
            image = frame.as_input(stream)
            assert isinstance(image, fastmog.GpuMat)
            assert image.shape == (info["height"], info["width"], 1)  # the plane, as given
            assert (image.__cuda_array_interface__["data"][0]
                    == frame.luma.__cuda_array_interface__["data"][0])
            mask = gpu.apply(image, stream=stream).download(stream=stream)
            y, _ = host_planes(frame, stream, info)
            bad = np.count_nonzero(mask != host.apply(y))
            assert bad == 0, f"frame {frame.index}: {bad} mask pixels differ"
    assert frame.index == info["frames"] - 1


@pytest.mark.gpu
def test_nvdec_colour_masks_equal_host_decode_masks(clips, nvdec):
    if not hasattr(fastmog._fastmog, "nv12_to_bgr"):
        pytest.skip("this build has no fastmog.nv12_to_bgr yet")
    stream, name = nvdec, "vtest_h264.mkv"
    info = manifest(clips)[name]
    gpu = fastmog.BackgroundSubtractorMOG2()
    host = fastmog.cpu.BackgroundSubtractorMOG2()
    with fastmog.VideoReader(clips / name, stream=stream, decode="nvdec") as reader:
        for frame in reader:
            mask = gpu.apply(frame.as_input(stream), stream=stream).download(stream=stream)
            y, uv = host_planes(frame, stream, info)
            nv12 = np.concatenate([y, uv.reshape(uv.shape[0], -1)], axis=0)
            bgr = cv2.cvtColor(nv12, cv2.COLOR_YUV2BGR_NV12)
            bad = np.count_nonzero(mask != host.apply(bgr))
            assert bad == 0, f"frame {frame.index}: {bad} mask pixels differ"


@pytest.mark.gpu
def test_auto_picks_nvdec_and_times_it(clips, nvdec):
    timer = RecordingTimer()
    with fastmog.VideoReader(clips / "vtest_h264.mp4", stream=nvdec, timer=timer) as reader:
        assert reader.backend == "nvdec" and reader.fallback_reason is None
        n = sum(1 for _ in reader)
    assert n == 120 and len(timer.calls) == n
    assert {c[3] for c in timer.calls} == {(576, 768, 1)}
    # Without a stream, auto cannot order NVDEC's output: it says so and uses the host.
    reader = fastmog.VideoReader(clips / "vtest_h264.mp4")
    assert reader.backend == "cpu" and "stream=" in reader.fallback_reason
    with pytest.raises(TypeError, match="stream="):
        fastmog.VideoReader(clips / "vtest_h264.mp4", decode="nvdec")


@pytest.mark.gpu
@pytest.mark.parametrize("name", DAMAGED)
def test_nvdec_broken_stream_stops_with_the_index(clips, nvdec, name):
    _read_until_broken(fastmog.VideoReader(clips / name, stream=nvdec, decode="nvdec",
                                           grey=True), clips, name)


@pytest.mark.gpu
def test_nvdec_refuses_a_size_it_cannot_decode(clips, nvdec):
    """H.264 wider than NVDEC's 4096: decode='nvdec' names codec and size;
    auto falls back to the host with that reason."""
    path = clips / "wide_h264.mkv"
    with pytest.raises(fastmog.DecodeError, match=r"(?i)h264.*4160x64"):
        fastmog.VideoReader(path, stream=nvdec, decode="nvdec")
    reader = fastmog.VideoReader(path, stream=nvdec)
    assert reader.backend == "cpu" and "4160x64" in reader.fallback_reason
    assert sum(1 for _ in reader) == 3


# ---- several NVDEC sessions over one file ----------------------------------------------


def _nal(kind, hevc):
    header = bytes([kind << 1, 1]) if hevc else bytes([0x60 | kind])
    return b"\0\0\0\1" + header + b"\x88\x84\x21"


@pytest.mark.parametrize("codec", ["H264", "h264"])
def test_cut_points_h264(codec):
    from fastmog.video._nvdec_sessions import _first_picture_is_idr as idr
    sps, pps, sei = _nal(7, False), _nal(8, False), _nal(6, False)
    assert idr(sps + pps + sei + _nal(5, False), codec) is True
    assert idr(sei + _nal(1, False), codec) is False
    assert idr(b"\0\0\0\x10" + bytes(16), codec) is None        # length-prefixed: not Annex-B


@pytest.mark.parametrize("codec", ["HEVC", "hevc"])
def test_cut_points_hevc(codec):
    """HEVC NAL types sit in bits 1-6 of a two-byte header: IDR_W_RADL (19)
    and IDR_N_LP (20) cut; CRA (21) does not (its leading pictures may refer
    to the GOP before); neither does a trailing picture."""
    from fastmog.video._nvdec_sessions import _first_picture_is_idr as idr
    vps, sps, pps, sei = (_nal(k, True) for k in (32, 33, 34, 39))
    for kind, want in ((19, True), (20, True), (21, False), (1, False), (0, False)):
        assert idr(vps + sps + pps + sei + _nal(kind, True), codec) is want, kind


@pytest.mark.parametrize("name,keys", [("vtest_h264.mkv", "idr"), ("vtest_hevc.mkv", "cra")])
def test_cut_points_of_real_packets(clips, name, keys):
    """The encoder's own key frames, as FFmpeg's Annex-B filter hands them to
    NVDEC: x264 makes IDR pictures (cut), x265's open GOPs CRA ones (not cut
    but the first, an IDR)."""
    av = pytest.importorskip("av")
    from fastmog.video._nvdec_sessions import _first_picture_is_idr as idr
    codec = "hevc" if "hevc" in name else "h264"
    cuts, key_frames = [], []
    with av.open(str(clips / name)) as c:
        s = c.streams.video[0]
        annexb = av.bitstream.BitStreamFilterContext(f"{codec}_mp4toannexb", s)
        for i, p in enumerate(c.demux(s)):
            for q in annexb.filter(p):
                if q.is_keyframe:
                    key_frames.append(i)
                if idr(bytes(q), codec):
                    cuts.append(i)
    assert len(key_frames) >= 4
    assert cuts == (key_frames if keys == "idr" else key_frames[:1])


def _sessions_used(reader):
    d = reader._decoder
    return len(d.gops), sum(1 for w in d.workers if w.slots)


@pytest.mark.gpu
@pytest.mark.parametrize("name,sessions", [("vtest_h264.mp4", 3), ("vtest_h264.mkv", 2),
                                           ("vtest_hevc.mkv", 3), ("traffic4k_h264.mp4", 2)])
def test_nvdec_sessions_give_ffmpegs_frames_in_order_and_the_same_masks(clips, nvdec, name,
                                                                          sessions):
    """GOPs decoded by several sessions at once come out in order, each frame
    equal to FFmpeg's, and MOG2 on them (no host copy) equals the host
    reference. The H.264 clips have an IDR every 30 frames, so several
    sessions really decode; x265 cuts open GOPs at CRA pictures, which must
    not be cut: that clip decodes as one GOP."""
    stream, info = nvdec, manifest(clips)[name]
    gpu = fastmog.BackgroundSubtractorMOG2()
    host = fastmog.cpu.BackgroundSubtractorMOG2()
    with fastmog.VideoReader(clips / name, stream=stream, decode="nvdec", grey=True,
                             sessions=sessions) as reader:
        assert reader.backend == "nvdec"
        n = 0
        for frame in reader:
            assert frame.on_device and frame.index == n
            image = frame.as_input(stream)
            assert isinstance(image, fastmog.GpuMat)
            mask = gpu.apply(image, stream=stream).download(stream=stream)
            y, _ = host_planes(frame, stream, info)
            bad = np.count_nonzero(mask != host.apply(y))
            assert bad == 0, f"frame {frame.index}: {bad} mask pixels differ"
            n += 1
        gops, busy = _sessions_used(reader)
    assert n == info["frames"]
    if name.startswith("vtest_h264"):
        assert gops >= 4 and busy == sessions, (gops, busy)
    if name.startswith("vtest_hevc"):
        assert gops == 1 and busy == 1, (gops, busy)


@pytest.mark.gpu
def test_nvdec_sessions_colour_frames_equal_one_session(clips, nvdec):
    stream, name = nvdec, "vtest_h264.mkv"
    if not hasattr(fastmog._fastmog, "nv12_to_bgr"):
        pytest.skip("this build has no fastmog.nv12_to_bgr yet")
    outs = []
    for sessions in (1, 4):
        sub, masks = fastmog.BackgroundSubtractorMOG2(), []
        with fastmog.VideoReader(clips / name, stream=stream, decode="nvdec",
                                 sessions=sessions) as reader:
            for frame in reader:
                masks.append(sub.apply(frame.as_input(stream), stream=stream)
                             .download(stream=stream))
        outs.append(masks)
    assert len(outs[0]) == len(outs[1]) == 120
    for k, (a, b) in enumerate(zip(*outs)):
        assert np.array_equal(a, b), f"frame {k}"
    assert any(m.any() for m in outs[1])


@pytest.mark.gpu
def test_nvdec_sessions_waits_are_timed_and_name_their_decode(clips, nvdec):
    """The main job passes its Timer (no profile() block): the consumer's wait
    for each session's frame is a timed Stream.wait naming the decode it is
    behind, so the queued time of the apply after it, and a download's wait
    on that apply, reach the decoder (issue 22: the chain stopped there)."""
    stream, timer = nvdec, fastmog.Timer()
    sub = fastmog.BackgroundSubtractorMOG2()
    with fastmog.VideoReader(clips / "vtest_h264.mp4", stream=stream, decode="nvdec",
                             grey=True, sessions=3, timer=timer) as reader:
        for frame in reader:
            sub.apply(frame.as_input(stream), stream=stream,
                      timer=timer).download(stream=stream, timer=timer)
    records = timer.records
    waits = [r for r in records if r.name == "Stream.wait"]
    assert len(waits) == 120
    for w in waits:
        assert w.activity == "wait" and w.stream == stream.handle
        assert w.behind is not None, w
        decode = records[w.behind]
        assert decode.name == "VideoReader.decode" and decode.session is not None, decode
    prof = pa.Profile(records)
    for a in (r for r in records if r.name == "BackgroundSubtractorMOG2.apply"):
        assert any(b is not None and pa.is_decode(records[b]) for _, _, b in prof.queued(a)), a


@pytest.mark.gpu
@pytest.mark.parametrize("name", DAMAGED)
def test_nvdec_sessions_broken_stream_stops_with_the_index(clips, nvdec, name):
    _read_until_broken(fastmog.VideoReader(clips / name, stream=nvdec, decode="nvdec",
                                           grey=True, sessions=3), clips, name)


@pytest.mark.gpu
def test_nvdec_sessions_close_early_stops_every_thread(clips, nvdec):
    before = {t.name for t in threading.enumerate()}
    with fastmog.VideoReader(clips / "vtest_h264.mp4", stream=nvdec, decode="nvdec",
                             sessions=4) as reader:
        for frame in reader:
            if frame.index == 40:
                break
    left = {t.name for t in threading.enumerate()} - before
    assert not any(n.startswith("fastmog") for n in left), left
    # dropped without close(): the finalizer stops the threads
    reader = fastmog.VideoReader(clips / "vtest_h264.mp4", stream=nvdec, decode="nvdec",
                                 sessions=2)
    next(reader)
    del reader
    import gc
    gc.collect()
    left = {t.name for t in threading.enumerate()} - before
    assert not any(n.startswith("fastmog") for n in left), left


def test_a_file_name_that_is_not_utf8_is_read(clips, tmp_path):
    """OpenCV's binding crashes on such a str; the reader hands it bytes."""
    name = os.fsdecode(b"clip-\xff.mp4")
    target = tmp_path / name
    shutil.copy(clips / "vtest_h264.mp4", target)
    with fastmog.VideoReader(target, decode="cpu") as reader:
        assert sum(1 for _ in reader) == manifest(clips)["vtest_h264.mp4"]["frames"]


def test_timeline_gaps_rule():
    from fastmog.video._reader import timeline_gaps

    assert timeline_gaps([0, 1, 2, 3]) == []
    assert timeline_gaps([0, 1, 2, 5, 6, 40, 41]) == [(3, 4), (7, 39)]
    # sparser than its rate (repeats stored as empty chunks, tree.avi): steps
    # up to twice the typical one are no gap
    assert timeline_gaps([0, 11, 17, 24, 31, 37, 43, 53, 59]) == []
    assert timeline_gaps([0, 6, 12, 18, 24, 60, 66]) == [(25, 59)]


def test_reader_numbers_frames_and_names_the_gap(tmp_path):
    video = write_gapped_mkv(tmp_path / "gap.mkv", [*range(8), *range(20, 26)])
    numbers = []
    with fastmog.VideoReader(video, decode="cpu") as reader:
        # the container's duration announces 26 frames: the end says so too
        with pytest.raises(fastmog.DecodeError, match="frame 14 could not be decoded"):
            for f in reader:
                numbers.append(f.number)
        assert numbers == [*range(8), *range(20, 26)]
        assert reader.gaps == [(8, 19)]


def test_nvdec_time_base_comes_from_the_container(tmp_path):
    """Where PyNvVideoCodec's demuxer does not report the stream's time base,
    the container's (through PyAV) gives NVDEC frames their timestamps."""
    av = pytest.importorskip("av")
    from fastmog.video._nvdec import _stream_time_base

    video = write_gapped_mkv(tmp_path / "gap.mkv", [0, 1, 5])
    with av.open(str(video)) as container:
        assert _stream_time_base(str(video)) == float(container.streams.video[0].time_base)
    assert _stream_time_base(str(tmp_path / "missing.mkv")) is None
    (tmp_path / "text.mkv").write_text("not a video")
    assert _stream_time_base(str(tmp_path / "text.mkv")) is None


@pytest.mark.gpu
def test_nvdec_frames_are_numbered_and_the_gap_named(clips, nvdec):
    numbers = []
    reader = fastmog.VideoReader(clips / "vtest_h264_corrupt.mkv", stream=nvdec,
                                 decode="nvdec", grey=True)
    with reader, pytest.raises(fastmog.DecodeError):
        for frame in reader:
            numbers.append(frame.number)
    assert numbers and None not in numbers
    assert any(a <= 60 and b >= 85 for a, b in reader.gaps), reader.gaps
