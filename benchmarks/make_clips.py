"""Encodes the short test clips of the video tests and benchmarks from real
frames in the shared test data: H.264 and HEVC, in MP4 and Matroska, at
vtest.avi's native 768x576 and at 4K (CDnet traffic frames tiled 12x9), plus
a truncated and a corrupted copy. Needs PyAV (pip install av).

    python benchmarks/make_clips.py [OUT_DIR]      # default .testdata/clips
    python benchmarks/make_clips.py --long 10      # the 4K clips x10 into .vclips

The clips stay under ~20 MB together, so they can travel to a GPU machine
beside a wheel. The corrupted copies are made reproducibly (fixed seed).
"""
import argparse
import json
import os
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent

# name: (source, frames, codec, container)
CLIPS = {
    "vtest_h264.mp4": ("vtest", 120, "libx264", "mp4"),
    "vtest_h264.mkv": ("vtest", 120, "libx264", "matroska"),
    "vtest_hevc.mp4": ("vtest", 120, "libx265", "mp4"),
    "vtest_hevc.mkv": ("vtest", 120, "libx265", "matroska"),
    "traffic4k_h264.mp4": ("traffic4k", 24, "libx264", "mp4"),
    "traffic4k_hevc.mkv": ("traffic4k", 24, "libx265", "matroska"),
    # wider than NVDEC's H.264 limit (4096): must be refused, naming codec and size
    "wide_h264.mkv": ("wide", 3, "libx264", "matroska"),
}
# MPEG-TS, the container made for streams, for the live tests and benchmark:
# name: (the clip it is remuxed from, or the frames a camera-like encode takes)
STREAMS = {
    "vtest_h264.ts": ("vtest_h264.mkv", None),
    "traffic4k_camera.ts": (None, ("traffic4k", 24)),
}
DAMAGED = {
    # name: (clip it is made from, kind)
    "vtest_h264_truncated.mp4": ("vtest_h264.mp4", "truncated"),
    "vtest_h264_corrupt.mkv": ("vtest_h264.mkv", "corrupt"),
    "vtest_hevc_corrupt.mp4": ("vtest_hevc.mp4", "corrupt"),
}


def data_dir():
    env = os.environ.get("FASTMOG_TEST_DATA")
    for candidate in ([pathlib.Path(env)] if env else []) + [ROOT.parent / "shared" / "data"]:
        if (candidate / "opencv_samples_video").is_dir():
            return candidate
    sys.exit("make_clips: test data not found: set FASTMOG_TEST_DATA or put it in ../shared/data")


def vtest_frames(n):
    """RGB frames of vtest.avi at its native 768x576."""
    import av

    with av.open(str(data_dir() / "opencv_samples_video" / "vtest.avi")) as src:
        for i, frame in enumerate(src.decode(video=0)):
            if i == n:
                break
            yield frame.to_ndarray(format="rgb24")


def traffic4k_frames(n):
    """RGB 3840x2160 frames: CDnet traffic (320x240) tiled 12 across, 9 down,
    each tile a different frame of the sequence so the tiles do not repeat."""
    import av

    files = sorted((data_dir() / "cdnet_subset_traffic" / "input").glob("*.jpg"))
    def rgb(path):
        with av.open(str(path)) as f:
            return next(f.decode(video=0)).to_ndarray(format="rgb24")
    tiles = [rgb(p) for p in files]
    for i in range(n):
        rows = [np.concatenate([tiles[(i + r * 12 + c) % len(tiles)] for c in range(12)], axis=1)
                for r in range(9)]
        yield np.concatenate(rows, axis=0)


def wide_frames(n):
    """RGB 4160x64 frames: strips of vtest.avi side by side."""
    for rgb in vtest_frames(n):
        strip = rgb[256:320]
        yield np.concatenate([strip] * 6, axis=1)[:, :4160]


def ffmpeg_plane_hashes(path):
    """SHA-256 of FFmpeg's decoded Y plane and interleaved UV plane (NV12
    order) of every frame that decodes: the reference NVDEC output is checked
    against on machines without PyAV."""
    import hashlib

    import av

    ys, uvs = [], []
    try:
        with av.open(str(path)) as container:
            for frame in container.decode(video=0):
                w, h = frame.width, frame.height

                def plane(i, rows, cols):
                    p = frame.planes[i]
                    return np.frombuffer(p, np.uint8).reshape(rows, p.line_size)[:, :cols]

                uv = np.stack([plane(1, h // 2, w // 2), plane(2, h // 2, w // 2)], axis=-1)
                ys.append(hashlib.sha256(np.ascontiguousarray(plane(0, h, w))).hexdigest())
                uvs.append(hashlib.sha256(np.ascontiguousarray(uv)).hexdigest())
    except av.error.FFmpegError:
        pass                                 # a damaged clip: the frames before the damage
    return ys, uvs


def encode(path, frames, codec, container, camera=False):
    """Encodes `frames` (RGB) at 25 frames/s; camera: H.264 as a camera sends
    it (no B-frames, no lookahead) instead of a GOP that must be reordered."""
    import av

    frames = list(frames)
    h, w = frames[0].shape[:2]
    options = {"movflags": "+faststart"} if container == "mp4" else {}
    with av.open(str(path), "w", format=container, options=options) as out:
        stream = out.add_stream(codec, rate=25)
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        # a GOP of 30 with B-frames: the decoders must reorder
        if camera:
            stream.options = {"crf": "26", "g": "30", "bf": "0", "preset": "medium",
                              "tune": "zerolatency"}
        elif codec == "libx264":
            stream.options = {"crf": "26", "g": "30", "bf": "2", "preset": "medium"}
        else:
            stream.options = {"crf": "30", "g": "30", "preset": "fast",
                              "x265-params": "log-level=error:bframes=2"}
        for rgb in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return len(frames), w, h


def loop_clip(src, dst, times, container="matroska"):
    """Writes `src` played `times` times over into `dst` (Matroska, or the
    container named) without re-encoding (packets copied, timestamps
    shifted): a long clip with an IDR picture where each repetition starts,
    made on the machine that measures instead of carried there. Returns the
    frame count."""
    import av

    with av.open(str(src)) as inp, av.open(str(dst), "w", format=container) as out:
        ins = inp.streams.video[0]
        add = getattr(out, "add_stream_from_template", None)
        outs = add(ins) if add is not None else out.add_stream(template=ins)
        packets = [p for p in inp.demux(ins) if p.size]
        first = min(p.pts for p in packets)
        span = max(p.pts + (p.duration or 0) for p in packets) - first
        if span <= 0:
            raise ValueError(f"{src}: its packets carry no usable timestamps")
        # Matroska stores no decode times: the first packets come back without
        # one. Decode order is presentation order delayed by the reorder depth,
        # which the first packet that has a decode time tells.
        order = sorted(p.pts for p in packets)
        known = next(((i, p.dts) for i, p in enumerate(packets) if p.dts is not None), (0, 0))
        delay = order[known[0]] - known[1]
        for k in range(times):
            for i, p in enumerate(packets):
                q = av.Packet(bytes(p))
                q.pts = p.pts + k * span
                q.dts = order[i] - delay + k * span
                q.duration, q.time_base, q.stream = p.duration, p.time_base, outs
                q.is_keyframe = p.is_keyframe
                out.mux(q)
    return len(packets) * times


def damage(src, dst, kind):
    data = bytearray(src.read_bytes())
    if kind == "truncated":
        data = data[: int(len(data) * 0.6)]           # the moov is up front: frames go missing
    else:
        # random bytes over 8 % of the file from its middle: whole packets are lost
        rng = np.random.default_rng(11)
        start, size = int(len(data) * 0.5), int(len(data) * 0.08)
        data[start:start + size] = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
    dst.write_bytes(bytes(data))


def write_long_clips(clips, out, times):
    manifest = json.loads((clips / "clips.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    long = {}
    for name in ("traffic4k_h264.mp4", "traffic4k_hevc.mkv"):
        looped = f"{pathlib.Path(name).stem}_x{times}.mkv"
        entry = dict(manifest[name], frames=loop_clip(clips / name, out / looped, times))
        for key in ("y_sha256", "uv_sha256"):     # the same frames, over and over
            entry[key] = manifest[name][key] * times
        long[looped] = entry
        print(f"{looped:28s} {(out / looped).stat().st_size / 1e6:6.2f} MB")
    (out / "clips.json").write_text(json.dumps(long, indent=1) + "\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", type=pathlib.Path, default=ROOT / ".testdata" / "clips")
    p.add_argument("--long", type=int, metavar="N", default=0,
                   help="instead: the 4K clips of OUT played N times over (remuxed, not "
                        "re-encoded) into .vclips, with their own clips.json: the long clips "
                        "of the video benchmark, small enough to carry to a GPU machine")
    args = p.parse_args(argv)
    if args.long:
        return write_long_clips(args.out, ROOT / ".vclips", args.long)
    args.out.mkdir(parents=True, exist_ok=True)
    sources = {"vtest": vtest_frames, "traffic4k": traffic4k_frames, "wide": wide_frames}
    manifest = {}
    for name, (source, n, codec, container) in CLIPS.items():
        frames, w, h = encode(args.out / name, sources[source](n), codec, container)
        manifest[name] = {"frames": frames, "width": w, "height": h,
                          "codec": "h264" if codec == "libx264" else "hevc"}
    for name, (origin, camera) in STREAMS.items():
        if origin is not None:
            loop_clip(args.out / origin, args.out / name, 1, container="mpegts")
            manifest[name] = dict(manifest[origin])
        else:
            source, n = camera
            frames, w, h = encode(args.out / name, sources[source](n), "libx264", "mpegts",
                                  camera=True)
            manifest[name] = {"frames": frames, "width": w, "height": h, "codec": "h264"}
    for name, (origin, kind) in DAMAGED.items():
        damage(args.out / origin, args.out / name, kind)
        manifest[name] = dict(manifest[origin], damaged=kind)
    for name, entry in manifest.items():
        entry["y_sha256"], entry["uv_sha256"] = ffmpeg_plane_hashes(args.out / name)
    (args.out / "clips.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(f.stat().st_size for f in args.out.iterdir())
    for name in manifest:
        print(f"{name:28s} {(args.out / name).stat().st_size / 1e6:6.2f} MB")
    print(f"make_clips: {len(manifest)} clips, {total / 1e6:.1f} MB in {args.out}")


if __name__ == "__main__":
    main()
