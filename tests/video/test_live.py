"""Live streams in VideoReader (issue 24, items 1 and 2), against real
servers on loopback: frames as the file's, drops and stalls reconnected and
counted, a stream that never opens refused in time, nothing blocking."""
import threading
import time

import numpy as np
import pytest

import fastmog
from clip_helpers import device_array, manifest, sha256
from live_servers import (GstRtspServer, HttpServer, RtspServer, TcpServer, UdpSender,
                          frame_boundary, frames_before, keyframe_starts, ts_clip, unused_port)

cv2 = pytest.importorskip("cv2")


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return ts_clip(tmp_path_factory.mktemp("live"))


def _read(reader, n):
    frames = []
    for frame in reader:
        frames.append(frame.host.copy())
        if len(frames) == n:
            break
    return frames


def test_a_tcp_stream_gives_the_files_frames(clip):
    path, data, expected = clip
    with TcpServer([("send", data, "hold")]) as server:
        with fastmog.VideoReader(server.url, decode="cpu") as reader:
            assert reader.live and reader.frame_count is None and reader.backend == "cpu"
            got, arrivals = [], []
            for frame in reader:
                got.append(frame.host.copy())
                arrivals.append(frame.arrival)
                if len(got) == len(expected):
                    break
    assert len(got) == len(expected) == 50
    assert all(a is not None for a in arrivals) and arrivals == sorted(arrivals)
    assert arrivals[-1] <= time.monotonic()
    for k, (g, e) in enumerate(zip(got, expected)):
        np.testing.assert_array_equal(g, e, err_msg=f"frame {k}")


def test_a_dropped_stream_reconnects_and_repeats_nothing(clip):
    """The server closes after half the clip (cut between frames), then serves
    it whole: one drop, one reconnect, and the clip again from its first
    frame; every frame once, none invented."""
    path, data, expected = clip
    cut = frame_boundary(data, 0.5)
    with TcpServer([("send", data[:cut], "close"), ("send", data, "hold")]) as server:
        with fastmog.VideoReader(server.url, decode="cpu", stall_timeout=1.0) as reader:
            frames = iter(reader)
            got = []
            while not reader.reconnects:
                got.append(next(frames).host.copy())
            got += [next(frames).host.copy() for _ in range(30)]
            assert reader.reconnects == 1
            assert [e.kind for e in reader.events] == ["dropped", "reconnected"]
            assert reader.lost_frames >= 0
    again = next(k for k in range(1, len(got)) if np.array_equal(got[k], expected[0]))
    assert 10 < again < 40 and reader.events[0].frames == again
    for k, g in enumerate(got):
        want = expected[k] if k < again else expected[k - again]
        np.testing.assert_array_equal(g, want, err_msg=f"frame {k} (second pass from {again})")


def test_a_stall_is_a_drop(clip):
    path, data, expected = clip
    with TcpServer([("send", data[:len(data) // 2], "hold"),
                    ("send", data, "hold")]) as server:
        started = time.monotonic()
        with fastmog.VideoReader(server.url, decode="cpu", stall_timeout=0.5) as reader:
            for frame in reader:
                if reader.reconnects:
                    break
            assert server.connections == 2
            assert reader.events[0].kind == "dropped" and "0.5 s" in reader.events[0].reason
            # down from the last frame decoded (FFmpeg gives its last buffered frame
            # when the read times out) to the reconnect: the 0.5 s pause, at 25 frames/s
            assert reader.events[1].seconds >= 0.45 and reader.lost_frames >= 10
        assert time.monotonic() - started < 10


def test_a_stream_that_never_opens_is_refused_in_time():
    with TcpServer([("silent",)]) as server:
        started = time.monotonic()
        with pytest.raises(fastmog.DecodeError, match="cannot open tcp://"):
            fastmog.VideoReader(server.url, decode="cpu", open_timeout=1.0)
        assert time.monotonic() - started < 4
    started = time.monotonic()
    url = f"tcp://127.0.0.1:{unused_port()}"
    with pytest.raises(fastmog.DecodeError, match="cannot open"):
        fastmog.VideoReader(url, decode="cpu", open_timeout=1.0)
    assert time.monotonic() - started < 4


def test_reconnects_that_run_out_end_with_decode_error(clip):
    path, data, expected = clip
    server = TcpServer([("send", data[:len(data) // 2], "close")])
    with server:
        reader = fastmog.VideoReader(server.url, decode="cpu", stall_timeout=0.5,
                                     open_timeout=0.5, max_reconnects=2)
        server.stopping.set()               # no second connection is served
        server.sock.close()
        with pytest.raises(fastmog.DecodeError, match="2 reconnects failed"):
            for _ in reader:
                pass
        reader.close()


def test_the_frames_before_a_stall_come_at_once(clip):
    """Not after the stall timeout: FFmpeg's frame threading once held back a
    frame per decoding thread (none came within 20 s on a 16-core machine)."""
    path, data, expected = clip
    cut = frame_boundary(data, 0.5)
    sent = frames_before(data, cut)
    got = []
    with TcpServer([("send", data[:cut], "hold")]) as server:
        reader = fastmog.VideoReader(server.url, decode="cpu", stall_timeout=30.0)
        started = time.monotonic()
        consumer = threading.Thread(target=lambda: got.extend(1 for _ in reader), daemon=True)
        consumer.start()
        time.sleep(1.5)
        early = len(got)
        reader.close()
        consumer.join(2.0)
    took = time.monotonic() - started
    # the demuxer and the parser each keep the last frame until the next starts
    assert early >= sent - 2, (early, sent)
    assert took < 4, took


def test_closing_a_stalled_reader_returns_at_once(clip):
    path, data, expected = clip
    with TcpServer([("send", data[:len(data) // 3], "hold")]) as server:
        reader = fastmog.VideoReader(server.url, decode="cpu", stall_timeout=30.0)
        frames = iter(reader)
        next(frames)
        got, ended = [], threading.Event()

        def consume():
            try:
                got.extend(frames)
            finally:
                ended.set()

        threading.Thread(target=consume, daemon=True).start()
        time.sleep(1.0)                     # the reader thread now waits in FFmpeg's read
        started = time.monotonic()
        reader.close()                      # from another thread than the one iterating
        assert time.monotonic() - started < 1.0
        assert ended.wait(1.0)              # and that thread's iteration ends


def test_a_udp_stream_never_repeats_or_invents_a_frame(clip):
    path, data, expected = clip
    with UdpSender(data) as sender:
        with fastmog.VideoReader(sender.url, decode="cpu", open_timeout=5.0) as reader:
            got = _read(reader, 60)
    # joined mid-stream, FFmpeg decodes what it can until a keyframe; after
    # that the clip's frames come in its order (a loop starts it again),
    # none twice in a row
    places = [next((k for k, e in enumerate(expected) if np.array_equal(g, e)), None)
              for g in got]
    known = [p for p in places if p is not None]
    assert len(known) >= len(got) // 2, places
    assert all(b != a for a, b in zip(known, known[1:])), places
    assert sum(b < a for a, b in zip(known, known[1:])) <= 2, places      # loops only


def _relayed_without_a_gop(data):
    """The stream as a relay that dropped the packets from its second key
    frame to its third passes it on; (that, first frame dropped, first after)."""
    a, b = keyframe_starts(data)[1:3]
    return data[:a] + data[b:], frames_before(data, a), frames_before(data, b)


def test_packets_a_relay_drops_are_counted_lost_never_invented(clip):
    """The frames before and after the hole come as the file's; those in it
    are counted lost from the timestamps, none repeated or made up."""
    path, data, expected = clip
    relayed, first, after = _relayed_without_a_gop(data)
    want = expected[:first] + expected[after:]
    with TcpServer([("send", relayed, "hold")]) as server:
        with fastmog.VideoReader(server.url, decode="cpu") as reader:
            got = _read(reader, len(want) - 2)
            assert reader.lost_frames == after - first > 0
    for k, g in enumerate(got):
        np.testing.assert_array_equal(g, want[k], err_msg=f"frame {k}")


def test_an_http_stream(clip):
    path, data, expected = clip
    with HttpServer(data) as server:
        with fastmog.VideoReader(server.url, decode="cpu") as reader:
            got = _read(reader, 20)
    for k, g in enumerate(got):
        np.testing.assert_array_equal(g, expected[k], err_msg=f"frame {k}")


def test_live_options_are_checked():
    with pytest.raises(ValueError, match="stall_timeout"):
        fastmog.VideoReader("tcp://127.0.0.1:1", decode="cpu", stall_timeout=0)
    with pytest.raises(ValueError, match="max_reconnects"):
        fastmog.VideoReader("tcp://127.0.0.1:1", decode="cpu", max_reconnects=-1)

def test_nvdec_for_a_stream_without_a_gpu_is_one_clear_error():
    if fastmog.cuda_available():
        pytest.skip("a GPU is usable here (the NVDEC stream tests cover it)")
    with pytest.raises(fastmog.DecodeError, match="no usable GPU"):
        fastmog.VideoReader("tcp://127.0.0.1:1", decode="nvdec")


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_an_rtsp_stream_over_either_transport(clip, transport):
    path, data, expected = clip
    with RtspServer(data) as server:
        with fastmog.VideoReader(server.url, decode="cpu", rtsp_transport=transport,
                                 open_timeout=5.0) as reader:
            got = _read(reader, 40)
        assert ("TCP" in server.transports[0]) == (transport == "tcp"), server.transports
    for k, g in enumerate(got):
        np.testing.assert_array_equal(g, expected[k], err_msg=f"frame {k}")
    with pytest.raises(ValueError, match="rtsp_transport is for rtsp"):
        fastmog.VideoReader(str(path), decode="cpu", rtsp_transport="tcp")


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_gstreamers_rtsp_server_over_either_transport(clip, transport):
    path, data, expected = clip
    with GstRtspServer(path) as server:
        with fastmog.VideoReader(server.url, decode="cpu", rtsp_transport=transport,
                                 open_timeout=10.0) as reader:
            got = _read(reader, 30)
    for k, g in enumerate(got):
        np.testing.assert_array_equal(g, expected[k], err_msg=f"frame {k}")


def test_a_restarted_rtsp_server_is_reconnected(clip):
    """GStreamer's server stopped mid-stream and started again on its port:
    one drop, one reconnect, then the clip from its first frame (a new
    session starts the file over); the time down is counted as lost."""
    path, data, expected = clip
    with GstRtspServer(path) as server:
        reader = fastmog.VideoReader(server.url, decode="cpu", rtsp_transport="tcp",
                                     stall_timeout=1.0, open_timeout=10.0)
        frames = iter(reader)
        before = [next(frames).host.copy() for _ in range(10)]
    with reader, GstRtspServer(path, server.port):
        after = []
        for frame in frames:
            if reader.reconnects:
                after.append(frame.host.copy())
                if len(after) == 10:
                    break
        assert [e.kind for e in reader.events] == ["dropped", "reconnected"]
        assert reader.lost_frames >= 1
    for k, g in enumerate(before):
        np.testing.assert_array_equal(g, expected[k], err_msg=f"frame {k}")
    start = next(k for k, e in enumerate(expected) if np.array_equal(after[0], e))
    assert start <= 2, start                # the new session's first frames, not the old's
    for k, g in enumerate(after):
        np.testing.assert_array_equal(g, expected[start + k], err_msg=f"frame {k} after")


def _live_threads():
    return [t for t in threading.enumerate() if t.name.startswith("fastmog live")]


def test_a_reader_dropped_without_close_ends_its_thread(clip):
    import gc

    path, data, expected = clip
    with TcpServer([("send", data, "hold")]) as server:
        reader = fastmog.VideoReader(server.url, decode="cpu")
        for k, _ in enumerate(reader):
            if k == 3:
                break
        assert _live_threads()
        del reader
        gc.collect()
        deadline = time.monotonic() + 3
        while _live_threads() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _live_threads()


def test_a_live_reader_closed_by_another_thread_ends_its_iteration(clip):
    path, data, expected = clip
    with TcpServer([("send", data, "hold")]) as server:
        reader = fastmog.VideoReader(server.url, decode="cpu")
        frames = iter(reader)
        next(frames)
        closer = threading.Thread(target=reader.close)
        closer.start()
        closer.join()
        with pytest.raises(StopIteration):
            next(frames)


# ---- NVDEC: FFmpeg demuxes, NVDEC decodes ------------------------------------------------

LIVE_CLIP = "vtest_h264.ts"          # H.264 with B-frames, in MPEG-TS: frames are reordered


@pytest.fixture
def h264_ts(clips):
    if LIVE_CLIP not in manifest(clips):
        pytest.skip(f"no {LIVE_CLIP} among the clips: run python benchmarks/make_clips.py")
    return (clips / LIVE_CLIP).read_bytes(), manifest(clips)[LIVE_CLIP]["y_sha256"]


def _luma_hashes(reader, stream, n, until=None):
    """SHA-256 of the next `n` frames' luma planes (or up to `until(reader)`)."""
    hashes, arrivals, pts = [], [], []
    for frame in reader:
        assert frame.on_device and frame.host is None
        hashes.append(sha256(device_array(frame.luma, stream)))
        arrivals.append(frame.arrival)
        pts.append(frame.pts)
        if len(hashes) == n or (until is not None and until(reader)):
            break
    return hashes, arrivals, pts


@pytest.mark.gpu
def test_an_nvdec_stream_gives_the_files_planes(nvdec, h264_ts):
    data, want = h264_ts
    with TcpServer([("send", data, "hold")]) as server:
        with fastmog.VideoReader(server.url, stream=nvdec, decode="nvdec", grey=True) as reader:
            assert reader.backend == "nvdec" and reader.fallback_reason is None
            assert reader.live and (reader.width, reader.height) == (768, 576)
            # not the last frames: over a connection held open, FFmpeg hands out a
            # transport stream's last frame only when the next begins (or the
            # read times out, a drop)
            n = len(want) - 10
            hashes, arrivals, pts = _luma_hashes(reader, nvdec, n)
            assert reader.lost_frames == 0 and reader.reconnects == 0
    assert hashes == want[:n]               # every frame, in display order, bit for bit
    # B-frames come after the frames they reference: a frame's arrival is its
    # own packet's, so not in display order, but every one is known and past
    assert all(a is not None and a <= time.monotonic() for a in arrivals)
    assert pts == sorted(pts) and pts[1] - pts[0] == pytest.approx(0.04)


@pytest.mark.gpu
def test_an_nvdec_stream_reconnects_and_repeats_nothing(nvdec, h264_ts):
    """The server closes after half the clip, then serves it whole: the first
    connection's frames in order, none twice, none invented (B-frames whose
    packets the drop cut off are lost, counted from the timestamps, while
    the P-frame after them in display order was sent and decoded), then the
    clip again from its first frame."""
    data, want = h264_ts
    cut = frame_boundary(data, 0.5)
    with TcpServer([("send", data[:cut], "close"), ("send", data, "hold")]) as server:
        with fastmog.VideoReader(server.url, stream=nvdec, decode="nvdec", grey=True,
                                 stall_timeout=1.0) as reader:
            first, _, _ = _luma_hashes(reader, nvdec, None, until=lambda r: r.reconnects)
            second, _, _ = _luma_hashes(reader, nvdec, 30)
            assert reader.reconnects == 1
            assert [e.kind for e in reader.events] == ["dropped", "reconnected"]
            lost = reader.lost_frames
    place = {h: k for k, h in enumerate(want)}
    got = [place.get(h, -1) for h in first + second]     # -1: a frame not in the clip
    again = got.index(0, 1)
    before, after = got[:again], got[again:]
    sent = frames_before(data, cut)
    assert before == sorted(set(before)) and before[0] == 0, before   # in order, once each
    # packets go in decode order: the last sent may be a P-frame two places
    # ahead in display order (the clip has two B-frames between references)
    assert sent - 4 <= len(before) <= sent and max(before) <= sent + 2, (before, sent)
    missing = set(range(max(before))) - set(before)
    assert lost >= len(missing)
    assert after == list(range(len(after)))


@pytest.mark.gpu
def test_an_nvdec_rtsp_stream(nvdec, h264_ts):
    data, want = h264_ts
    with RtspServer(data) as server:
        with fastmog.VideoReader(server.url, stream=nvdec, decode="nvdec", grey=True,
                                 rtsp_transport="tcp", open_timeout=5.0) as reader:
            hashes, _, _ = _luma_hashes(reader, nvdec, 40)
    assert hashes == want[:40]


@pytest.mark.gpu
def test_a_stream_nvdec_cannot_decode_falls_back_or_is_refused(nvdec, clip):
    path, data, expected = clip             # MPEG-4 part 2: not among NVDEC's stream codecs
    with TcpServer([("send", data, "hold"), ("send", data, "hold")]) as server:
        with fastmog.VideoReader(server.url, stream=nvdec) as reader:
            assert reader.backend == "cpu"
            assert "NVDEC does not decode" in reader.fallback_reason
            np.testing.assert_array_equal(next(iter(reader)).host, expected[0])
    with TcpServer([("send", data, "hold")]) as server:
        with pytest.raises(fastmog.DecodeError, match="NVDEC does not decode"):
            fastmog.VideoReader(server.url, stream=nvdec, decode="nvdec")
    with pytest.raises(TypeError, match="needs stream="):
        fastmog.VideoReader("tcp://127.0.0.1:1", decode="nvdec")


@pytest.mark.gpu
def test_an_nvdec_stream_that_stalls_reconnects_and_one_that_never_opens_is_refused(
        nvdec, h264_ts):
    data, want = h264_ts
    cut = frame_boundary(data, 0.5)
    with TcpServer([("send", data[:cut], "hold"), ("send", data, "hold")]) as server:
        started = time.monotonic()
        with fastmog.VideoReader(server.url, stream=nvdec, decode="nvdec", grey=True,
                                 stall_timeout=0.5) as reader:
            for frame in reader:
                if reader.reconnects:
                    break
            assert server.connections == 2
            assert reader.events[0].kind == "dropped" and "0.5 s" in reader.events[0].reason
            assert reader.events[1].seconds >= 0.45
        assert time.monotonic() - started < 10
    with TcpServer([("silent",)]) as server:
        started = time.monotonic()
        with pytest.raises(fastmog.DecodeError, match="cannot open tcp://"):
            fastmog.VideoReader(server.url, stream=nvdec, decode="nvdec", open_timeout=1.0)
        assert time.monotonic() - started < 4


@pytest.mark.gpu
def test_low_latency_gives_a_camera_streams_frames_and_refuses_b_frames(nvdec, clips):
    camera = "traffic4k_camera.ts"          # H.264 without B-frames, as cameras send
    if camera not in manifest(clips):
        pytest.skip(f"no {camera} among the clips: run python benchmarks/make_clips.py")
    data, want = (clips / camera).read_bytes(), manifest(clips)[camera]["y_sha256"]
    with TcpServer([("send", data, "hold")]) as server:
        with fastmog.VideoReader(server.url, stream=nvdec, decode="nvdec", grey=True,
                                 low_latency=True) as reader:
            hashes, _, pts = _luma_hashes(reader, nvdec, len(want) - 2)
    assert hashes == want[:len(want) - 2] and pts == sorted(pts)
    b_frames = (clips / LIVE_CLIP).read_bytes()
    with TcpServer([("send", b_frames, "hold")]) as server:
        with fastmog.VideoReader(server.url, stream=nvdec, decode="nvdec", grey=True,
                                 low_latency=True) as reader:
            with pytest.raises(fastmog.DecodeError, match="has B-frames"):
                _luma_hashes(reader, nvdec, 20)


def test_low_latency_is_for_live_streams(clip):
    path, data, expected = clip
    with pytest.raises(ValueError, match="low_latency is for live streams"):
        fastmog.VideoReader(str(path), decode="cpu", low_latency=True)


@pytest.mark.gpu
def test_an_nvdec_stream_counts_what_a_relay_dropped(nvdec, h264_ts):
    data, want = h264_ts
    relayed, first, after = _relayed_without_a_gop(data)
    kept = want[:first] + want[after:]
    with TcpServer([("send", relayed, "hold")]) as server:
        with fastmog.VideoReader(server.url, stream=nvdec, decode="nvdec", grey=True) as reader:
            hashes, _, _ = _luma_hashes(reader, nvdec, len(kept) - 4)
            assert reader.lost_frames == after - first > 0
    assert hashes == kept[:len(kept) - 4]
