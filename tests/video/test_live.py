"""Live streams in VideoReader (issue 24, items 1 and 2), against real
servers on loopback: frames as the file's, drops and stalls reconnected and
counted, a stream that never opens refused in time, nothing blocking."""
import threading
import time

import numpy as np
import pytest

import fastmog
from live_servers import (HttpServer, RtspServer, TcpServer, UdpSender, frame_boundary,
                          frames_before, ts_clip, unused_port)

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
    with pytest.raises(fastmog.DecodeError, match="decoded on the host"):
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
