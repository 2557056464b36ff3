"""Live stream servers for the tests, on loopback only, started and stopped
by the test: a TCP server whose connections each follow a script (send some
bytes, then close or hold the connection open), a UDP sender that loops a
clip, an HTTP server of one file, a minimal RTSP server of our own (for the
GPU machine, where nothing can be installed) and GStreamer's RTSP server. Their clip is an MPEG-TS file that
OpenCV writes (a container made for streams)."""
import http.server
import os
import select
import socket
import subprocess
import threading
import time

import numpy as np


def ts_clip(folder):
    """(path, bytes, frames as OpenCV decodes them) of write_ts_clip's clip
    in `folder`; the test skips where OpenCV cannot write MPEG-TS."""
    import pytest

    path = write_ts_clip(folder / "clip.ts")
    if path is None:
        pytest.skip("this OpenCV cannot write MPEG-TS")
    return path, path.read_bytes(), file_frames(path)


def write_ts_clip(path, n=50, size=(64, 48), fps=25.0):
    """An MPEG-TS clip of `n` colour frames (noise and a block that walks);
    None where this OpenCV cannot write one."""
    import cv2

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, size)
    if not writer.isOpened():
        return None
    rng = np.random.default_rng(2)
    for i in range(n):
        frame = rng.integers(90, 110, (size[1], size[0], 3), dtype=np.uint8)
        frame[10:22, i % (size[0] - 10):i % (size[0] - 10) + 10] = 240
        writer.write(frame)
    writer.release()
    return path


def _frame_starts(data, end=None):
    """Offsets of the transport packets of `data` (up to `end`) that start a
    video PES packet (00 00 01 E0): one per frame, in decode order."""
    return [at for at in range(0, (len(data) - 187) if end is None else end, 188)
            if data[at] == 0x47 and data[at + 1] & 0x40
            and _payload(data[at:at + 188]).startswith(b"\x00\x00\x01\xe0")]


def frame_boundary(data, fraction):
    """A cut of the transport stream `data` near `fraction` of it that leaves
    whole frames before it: just before a packet that starts a frame."""
    want = fraction * len(data)
    return min(_frame_starts(data)[1:], key=lambda at: abs(at - want))


def frames_before(data, cut):
    """How many video PES packets (frames) of `data` start before `cut`."""
    return len(_frame_starts(data, cut))


def keyframe_starts(data):
    """Offsets of the packets that start a key frame (the muxer marks them
    with the adaptation field's random access indicator), in order."""
    return [at for at in _frame_starts(data)
            if (data[at + 3] >> 4) & 3 in (2, 3) and data[at + 4] and data[at + 5] & 0x40]


def _payload(packet):
    control = (packet[3] >> 4) & 3
    at = 4 + (1 + packet[4] if control == 3 else 0)
    return packet[at:] if control & 1 else b""


def file_frames(path):
    """The clip's frames as OpenCV decodes the file."""
    import cv2

    cap = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, frame = cap.read()
        if not ok:
            return frames
        frames.append(frame)


class _Background:
    """A context manager whose thread runs _run() until `stopping` is set."""

    def __init__(self):
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        raise NotImplementedError

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.thread.join(timeout=2)


class _Server(_Background):
    """A loopback TCP listener whose thread hands each connection to
    serve(conn) in turn, until the server stops."""

    scheme = "tcp"
    path = ""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.1)
        self.url = f"{self.scheme}://127.0.0.1:{self.sock.getsockname()[1]}{self.path}"
        super().__init__()

    def _run(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.serve(conn)

    def serve(self, conn):
        raise NotImplementedError

    def __exit__(self, *exc):
        super().__exit__(*exc)
        self.sock.close()


class TcpServer(_Server):
    """Serves connection k by script[k] (the last repeats): ("send", data,
    then) where then is "close" or "hold" (keep it open, silent, until the
    server stops); ("silent",): accept and never send. url: tcp://..."""

    def __init__(self, script):
        super().__init__()
        self.script, self.connections, self.held = script, 0, []

    def serve(self, conn):
        step = self.script[min(self.connections, len(self.script) - 1)]
        self.connections += 1
        if step[0] == "send":
            try:
                conn.sendall(step[1])
            except OSError:
                pass
            if step[2] == "close":
                time.sleep(0.05)
                conn.close()
                return
        self.held.append(conn)

    def __exit__(self, *exc):
        super().__exit__(*exc)
        for c in self.held:
            c.close()


class UdpSender(_Background):
    """Sends the clip's bytes to udp://127.0.0.1:port in 1316-byte datagrams
    (7 transport packets), over and over, at about `rate` bytes a second."""

    def __init__(self, data, rate=200_000):
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.url = f"udp://127.0.0.1:{self.port}"
        self.data, self.rate = data, rate
        super().__init__()

    def _run(self):
        out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        step = 1316
        while not self.stopping.is_set():
            for at in range(0, len(self.data), step):
                if self.stopping.is_set():
                    break
                out.sendto(self.data[at:at + step], ("127.0.0.1", self.port))
                time.sleep(step / self.rate)
        out.close()


class HttpServer:
    """Serves one file at http://127.0.0.1:port/clip.ts."""

    def __init__(self, data):
        body = data

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "video/mp2t")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/clip.ts"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def unused_port():
    """A loopback port nobody listens on (bound, then let go)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class RtspServer(_Server):
    """A minimal RTSP server of one path, /cam, for FFmpeg's client: DESCRIBE
    gives an MPEG-TS over RTP stream (payload type 33), SETUP takes RTP over
    the RTSP connection (RTP/AVP/TCP, interleaved) or over UDP to the
    client's ports, PLAY sends the clip's transport packets, seven to an RTP
    packet, at about `rate` bytes a second, over and over. One client at a
    time. url: rtsp://127.0.0.1:port/cam"""

    scheme, path = "rtsp", "/cam"

    def __init__(self, data, rate=400_000):
        super().__init__()
        self.data, self.rate = data, rate
        self.transports = []                 # what each SETUP asked for

    def serve(self, conn):
        try:
            self._session(conn)
        except OSError:
            pass
        finally:
            conn.close()

    def _requests(self, conn):
        buf = b""
        conn.settimeout(0.1)
        while not self.stopping.is_set():
            while b"\r\n\r\n" not in buf:
                try:
                    chunk = conn.recv(4096)
                except socket.timeout:
                    if self.stopping.is_set():
                        return
                    continue
                if not chunk:
                    return
                buf += chunk
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.decode().split("\r\n")
            headers = dict(l.split(": ", 1) for l in lines[1:] if ": " in l)
            yield lines[0].split(" ")[0], headers

    def _reply(self, conn, cseq, extra="", body=""):
        text = f"RTSP/1.0 200 OK\r\nCSeq: {cseq}\r\n{extra}"
        if body:
            text += f"Content-Type: application/sdp\r\nContent-Length: {len(body)}\r\n"
        conn.sendall((text + "\r\n" + body).encode())

    def _session(self, conn):
        transport = None
        for method, h in self._requests(conn):
            cseq = h.get("CSeq", "0")
            if method == "OPTIONS":
                self._reply(conn, cseq, "Public: OPTIONS, DESCRIBE, SETUP, PLAY, TEARDOWN\r\n")
            elif method == "DESCRIBE":
                sdp = ("v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=fastmog test\r\n"
                       "c=IN IP4 127.0.0.1\r\nt=0 0\r\nm=video 0 RTP/AVP 33\r\n"
                       "a=rtpmap:33 MP2T/90000\r\na=control:track0\r\n")
                self._reply(conn, cseq, f"Content-Base: {self.url}/\r\n", sdp)
            elif method == "SETUP":
                transport = h.get("Transport", "")
                self.transports.append(transport)
                self._reply(conn, cseq, f"Transport: {transport}\r\nSession: 1\r\n")
            elif method == "PLAY":
                self._reply(conn, cseq, "Session: 1\r\n")
                self._play(conn, transport)
                return
            else:
                self._reply(conn, cseq)

    def _play(self, conn, transport):
        udp = None
        if "TCP" not in transport:
            port = int(transport.split("client_port=")[1].split("-")[0])
            udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        seq, step = 0, 188 * 7
        try:
            while not self.stopping.is_set():
                for at in range(0, len(self.data), step):
                    if self.stopping.is_set():
                        return
                    stamp = int(time.monotonic() * 90000) & 0xFFFFFFFF
                    rtp = (bytes([0x80, 33]) + (seq & 0xFFFF).to_bytes(2, "big")
                           + stamp.to_bytes(4, "big") + b"\x00\x00\x00\x01"
                           + self.data[at:at + step])
                    seq += 1
                    if udp is not None:
                        udp.sendto(rtp, ("127.0.0.1", port))
                    else:
                        conn.sendall(b"$\x00" + len(rtp).to_bytes(2, "big") + rtp)
                    time.sleep(step / self.rate)
        finally:
            if udp is not None:
                udp.close()


class GstRtspServer:
    """GStreamer's RTSP server (gst_rtsp_server.py, run by the system
    Python) serving the MPEG-TS file `path` at rtsp://127.0.0.1:port/cam;
    the test skips, saying why, where GStreamer's RTSP server or its
    bindings are not installed. `port` (0: any free one) lets a restarted
    server take its predecessor's."""

    PYTHON = "/usr/bin/python3"          # the one Debian's python3-gi serves

    def __init__(self, path, port=0):
        self.path, self.port = path, port

    def __enter__(self):
        import pytest

        if not os.path.exists(self.PYTHON):
            pytest.skip(f"no {self.PYTHON} to run GStreamer's RTSP server")
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gst_rtsp_server.py")
        self.proc = subprocess.Popen([self.PYTHON, script, str(self.path), str(self.port)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 20)
        line = self.proc.stdout.readline().strip() if ready else ""
        if not line.startswith("ready "):
            self._stop()
            if line.startswith("unavailable:"):
                pytest.skip(f"GStreamer's RTSP server is {line} (Debian: "
                            f"gir1.2-gst-rtsp-server-1.0, gstreamer1.0-plugins-good/-bad)")
            raise RuntimeError(f"GStreamer's RTSP server did not start: {line!r}")
        self.port = int(line.split()[1])
        self.url = f"rtsp://127.0.0.1:{self.port}/cam"
        return self

    def _stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()

    def __exit__(self, *exc):
        self._stop()
