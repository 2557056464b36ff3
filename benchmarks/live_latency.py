"""A live 4K stream over loopback at its frame rate, demuxed by FFmpeg,
decoded by NVDEC and put through MOG2 on the GPU (issue 24): per frame, the
latency from its packet's arrival (when FFmpeg hands it over: a transport
stream's frame is whole once the next begins) and from its decoded picture
to its mask (median, p99, max), and the rate kept up, with NVDEC's default
reordering and with low latency. Then the main job on the same stream, for
the summary lines a user sees.

The stream is make_clips.py's traffic4k_camera.ts (H.264 as a camera sends
it: no B-frames), looped, sent one frame's transport packets at a time at
`--fps` by a TCP server on 127.0.0.1. A frame's mask is waited for at once
(an Event), as a live pipeline that acts on each frame would.

python3 benchmarks/live_latency.py [--clip PATH] [--fps 30] [--seconds 20]"""
import argparse
import json
import pathlib
import socket
import subprocess
import sys
import threading
import time

import numpy as np

import fastmog

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLIP = ROOT / ".testdata" / "clips" / "traffic4k_camera.ts"


def frame_chunks(data):
    """The transport stream cut before each packet that starts a video PES
    packet: one frame per chunk (the first also has the tables)."""
    starts = []
    for at in range(0, len(data) - 187, 188):
        if data[at] != 0x47 or not data[at + 1] & 0x40:
            continue
        control = (data[at + 3] >> 4) & 3
        payload = at + 4 + (1 + data[at + 4] if control in (2, 3) else 0)
        if data[payload:payload + 4] == b"\x00\x00\x01\xe0":
            starts.append(at)
    cuts = [0] + starts[1:] + [len(data)]
    return [data[a:b] for a, b in zip(cuts, cuts[1:])]


class PacedServer:
    """Serves each connection the clip's frames at `fps`, looped, `frames` in
    all, then holds it open until the client leaves."""

    def __init__(self, chunks, fps, frames):
        self.chunks, self.fps, self.frames = chunks, fps, frames
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"tcp://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stopping = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        start = time.monotonic()
        try:
            for i in range(self.frames):
                wait = start + i / self.fps - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                conn.sendall(self.chunks[i % len(self.chunks)])
            while not self.stopping.is_set() and conn.recv(4096):
                pass
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.stopping.set()
        self.sock.close()


def stats(ms):
    ms = sorted(ms)
    return ms[len(ms) // 2], ms[min(len(ms) - 1, int(0.99 * len(ms)))], ms[-1]


def both(ms, settle):
    """median / p99 / max over every frame, and over those after the first
    `settle` (the frames sent while the reader was still opening queue up)."""
    return ("%.2f / %.2f / %.2f" % stats(ms)) + ("  (%.2f / %.2f / %.2f)" % stats(ms[settle:]))


def measure(url, grey, low_latency, frames, first_luma_sha):
    stream = fastmog.Stream()
    sub = fastmog.BackgroundSubtractorMOG2()
    done = fastmog.Event(timing=False)
    from_packet, from_decoded, times = [], [], []
    with fastmog.VideoReader(url, stream=stream, decode="nvdec", grey=grey,
                             low_latency=low_latency, open_timeout=10.0) as reader:
        assert reader.backend == "nvdec", reader.fallback_reason
        for frame in reader:
            decoded = time.monotonic()
            if frame.index == 0 and first_luma_sha is not None:
                # the frames are the clip's: its first luma plane, as FFmpeg decodes it
                import hashlib
                y = fastmog.asgpumat(frame.luma, stream=stream).download(stream=stream)
                assert hashlib.sha256(np.ascontiguousarray(y)).hexdigest() == first_luma_sha
                decoded = time.monotonic()
            mask = sub.apply(frame.as_input(stream), stream=stream)
            done.record(stream=stream)
            done.synchronize()
            ready = time.monotonic()
            from_packet.append(1e3 * (ready - frame.arrival))
            from_decoded.append(1e3 * (ready - decoded))
            times.append(ready)
            if len(times) == frames:
                break
        lost, reconnects = reader.lost_frames, reader.reconnects
        size = (reader.width, reader.height)
    assert mask.shape[:2] == (size[1], size[0])
    rate = (len(times) - 1) / (times[-1] - times[0])
    return from_packet, from_decoded, rate, lost, reconnects, size


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clip", type=pathlib.Path, default=CLIP)
    p.add_argument("--fps", type=float, default=30.0)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--no-job", action="store_true", help="skip the main job's run")
    args = p.parse_args()
    data = args.clip.read_bytes()
    chunks = frame_chunks(data)
    manifest = args.clip.parent / "clips.json"
    sha = None
    if manifest.is_file():
        sha = json.loads(manifest.read_text()).get(args.clip.name, {}).get("y_sha256", [None])[0]
    frames = int(args.seconds * args.fps)
    print(f"fastmog {fastmog.__version__} on {fastmog.device_properties()['name']}; "
          f"{args.clip.name}: {len(chunks)} frames looped, {len(data) / len(chunks) / 1e3:.0f} "
          f"kB a frame, sent at {args.fps:g} frames/s over loopback TCP, {frames} frames a run")
    settle = int(args.fps)
    print(f"ms per frame, median / p99 / max over all {frames} frames (and after the first "
          f"{settle}, once the frames sent while the reader opened are through)")
    print(f"{'run':28s} {'frames/s':>8s}  {'packet -> mask':>36s}  {'decoded -> mask':>36s}  "
          f"lost")
    for low_latency in (False, True):
        for grey in (True, False):
            server = PacedServer(chunks, args.fps, frames + 30)
            try:
                packet, decoded, rate, lost, reconnects, size = measure(
                    server.url, grey, low_latency, frames, sha)
            finally:
                server.close()
            name = (f"{size[0]}x{size[1]} {'grey' if grey else 'BGR'}"
                    + (", low latency" if low_latency else ""))
            print(f"{name:28s} {rate:8.2f}  {both(packet, settle):>36s}  "
                  f"{both(decoded, settle):>36s}  {lost}"
                  + (f" ({reconnects} reconnects)" if reconnects else ""))
    if args.no_job:
        return
    server = PacedServer(chunks, args.fps, frames + 30)
    try:
        job = subprocess.run([sys.executable, "-m", "fastmog", server.url, "--decode", "nvdec",
                              "--grey", "--low-latency", "--frames", str(frames), "--profile"],
                             capture_output=True, text=True, timeout=args.seconds * 3 + 60)
    finally:
        server.close()
    print(f"main job (exit {job.returncode}): python -m fastmog URL --decode nvdec --grey "
          f"--low-latency --frames {frames} --profile")
    for line in job.stdout.splitlines():
        if line.startswith("fastmog:") or "arrival to mask" in line or line.startswith("Verdict"):
            print("  " + line)
    if job.returncode:
        print(job.stderr[-2000:])


if __name__ == "__main__":
    main()
