"""The main job's command line: its options, their types and ranges, and the
MOG2 options generated from the C parameter table (names, defaults, ranges,
help), so the defaults live in one place."""
import argparse
import math
import pathlib
import re

from .. import _fastmog
from . import _motion
from ._errors import EXIT_USAGE
from ._sources import SourceOptions

EPILOG = """\
exit status: 0 done; 2 a mistake in the command, its input or its outputs (one
line on stderr, found before the run where possible); 3 the video ended before
the frame count its container announces or its timestamps skip frames in the
middle (truncated or corrupt; --accept-short makes this 0); 4 several sources: a Dask worker was lost with a source (one
line each) or a source failed; 130 interrupted by Ctrl-C, 143 by SIGTERM, 129
by SIGHUP (128 + the signal: the run stops cleanly, what was written is kept
and the summary printed).
"""


# --batch for files; a live stream's is 1 (latency). No one K is fastest: on
# the lent H200 the built-in 4K grey scene (a kernel under the copies) ran
# fastest at K = 1, while a busier scene's kernel is slower than the copies
# unless batched. So the pipeline times its first launches and picks K
# (fastmog._auto_batch; benchmarks/MAIN_JOB_RESULTS.md).
DEFAULT_BATCH = "auto"


def _size(text):
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 3840x2160, "
                                         f"got {text!r}") from None
    if w < 16 or h < 16:
        raise argparse.ArgumentTypeError(f"size must be at least 16x16, got {text!r}")
    return w, h


def _count(text, least=1):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"expected a number of at least {least}, got {text!r}")
    return value


def _batch(text):
    return "auto" if text == "auto" else _count(text)


def _seconds(text):
    value = _float(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _device(text):
    return _count(text, least=0)


def _fps(text):
    value = _float(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"expected a positive frame rate, got {text!r}")
    return value


def _float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if math.isnan(value):
        raise argparse.ArgumentTypeError("expected a number, got nan")
    return value


def _learning_rate(text):
    value = _float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"expected a rate from 0 to 1, or a negative number "
                                         f"for automatic, got {text!r}")
    return value


def _ranged(param):
    """An argparse type for one MOG2 parameter: its type and its range."""
    kind, lo, hi = param["type"], param["min"], param["max"]

    def parse(text):
        if kind is int:
            try:
                value = int(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") \
                    from None
        else:
            value = _float(text)
        if not lo <= value <= hi:
            upper = "" if hi == math.inf else f" to {_shown_value(kind(hi))}"
            raise argparse.ArgumentTypeError(f"expected {_shown_value(kind(lo))}{upper}"
                                             f"{' or more' if not upper else ''}, got {text!r}")
        return value

    parse.__name__ = kind.__name__       # argparse names the type in some messages
    return parse


def _shown_value(value):
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def mog2_parameters():
    """The C parameter table: one dict per constructor parameter, in order."""
    return _fastmog._mog2_parameters()


class _Parser(argparse.ArgumentParser):
    """Reports a bad option as one line, not a usage block, and reads
    negative numbers such as -inf and -1e-3 as values, not options."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # argparse takes "-inf" for an unknown option unless it looks like a number
        self._negative_number_matcher = re.compile(
            r"^-(\d+\.?\d*([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?|inf|infinity|nan)$",
            re.IGNORECASE)

    def error(self, message):
        self.exit(EXIT_USAGE, f"fastmog: error: {message} (see fastmog --help)\n")


def build_parser():
    p = _Parser(
        prog="fastmog", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="MOG2 background subtraction on the GPU (OpenCV's CPU results, bit for\n"
                    "bit), or on the host reference where no GPU is usable.")
    p.add_argument("input", nargs="*",
                   help="a video file, a folder of frames (JPEG/PNG/BMP/TIFF/WebP, sorted by "
                        "name; ROI.* files are skipped) or a CDnet sequence folder (holding "
                        "input/ and groundtruth/: its frames are scored automatically); "
                        "several sources run on a Dask cluster, one per worker at a time "
                        "(default: the built-in scene)")
    p.add_argument("--frames", type=_count, metavar="N",
                   help="process at most N frames (default: all; the built-in scene: 300 on "
                        "the GPU, 10 on the host)")
    p.add_argument("--size", type=_size, metavar="WxH",
                   help="built-in scene size (default: 3840x2160)")
    p.add_argument("--colour", "--color", action="store_true",
                   help="built-in scene in colour (default: grey)")
    p.add_argument("--grey", "--gray", action="store_true",
                   help="convert file input to grey before subtraction (default: off, frames "
                        "keep their colour)")
    p.add_argument("--out", type=pathlib.Path, metavar="PATH",
                   help="write the masks: a folder (mask_000000.png, ...) or a lossless FFV1 "
                        "video (.mkv or .avi) (default: masks are not kept)")
    p.add_argument("--overwrite", action="store_true",
                   help="let --out replace an existing video, or delete the mask_NNNNNN.png "
                        "files in a non-empty folder first, and let --preview, --trace, "
                        "--events and --regions replace existing files; other files are never touched, and an "
                        "output that is or lies inside an input is always refused "
                        "(default: off, a used output is refused)")
    p.add_argument("--fps", type=_fps,
                   help="frame rate of the mask video (default: the input video's, 25 for "
                        "frames and the built-in scene)")
    p.add_argument("--preview", type=pathlib.Path, metavar="IMAGE",
                   help="write frame | mask | background of the last frame as one image, "
                        "e.g. preview.png, each panel at most 1280 pixels wide (default: none)")
    p.add_argument("--preview-full-size", action="store_true",
                   help="write the preview at the frames' own size (default: off, each panel "
                        "at most 1280 pixels wide)")
    p.add_argument("--ground-truth", type=pathlib.Path, metavar="DIR",
                   help="score against CDnet-layout ground truth: precision, recall, F "
                        "(default: none, or the sequence's own for a CDnet folder)")
    p.add_argument("--accept-short", action="store_true",
                   help="exit 0 when a video ends before the frame count its container "
                        "announces, or its timestamps skip frames in the middle (default: "
                        "off, exit status 3)")
    p.add_argument("--decode", choices=("auto", "nvdec", "cpu"), default="auto",
                   help="video decoder: nvdec (on the GPU), cpu, or auto: NVDEC when it can "
                        "decode the video, else the CPU, saying why (default: auto)")
    p.add_argument("--nvdec-sessions", type=_count, default=1, metavar="N",
                   help="NVDEC sessions decoding one video file at once, a closed GOP each "
                        "(one session uses one NVDEC engine); frames stay in order, and each "
                        "session holds up to two GOPs of frames in GPU memory (default: 1)")
    p.add_argument("--batch", type=_batch, default=None, metavar="K",
                   help="frames per MOG2 launch for host-decoded input on the GPU: the model "
                        "is read and written once per K frames, the masks are the same; "
                        "masks come out K frames later (NVDEC frames go one by one); auto "
                        "times the first launches and keeps the smallest of 1, 2, 4 and 8 "
                        "whose kernel takes under 0.9 of the copies' time, else the one "
                        "whose kernel was fastest (default: auto; 1 for a live stream)")
    p.add_argument("--open-timeout", type=_seconds, default=10.0, metavar="S",
                   help="a live stream that has not opened after S seconds ends the run "
                        "with one line (default: 10)")
    p.add_argument("--rtsp-transport", choices=("tcp", "udp"),
                   help="how an rtsp:// stream's RTP packets travel (default: FFmpeg's "
                        "choice)")
    p.add_argument("--low-latency", action="store_true",
                   help="a live stream decoded by NVDEC hands out each frame as soon as it "
                        "is decoded, not a frame later: for streams without B-frames, as "
                        "most cameras send (one with them ends the run with one line; "
                        "default: off)")
    p.add_argument("--stall-timeout", type=_seconds, default=5.0, metavar="S",
                   help="a live stream that gives no frame for S seconds has dropped: it is "
                        "reconnected (after 0.5 s, 1, 2, 4, then every 8 s), one line each "
                        "(default: 5)")
    p.add_argument("--profile", action="store_true",
                   help="print the per-call timer report (default: off)")
    p.add_argument("--sync", action="store_true",
                   help="timer sync mode: each call waits for its own stream; implies "
                        "--profile (default: off)")
    p.add_argument("--trace", type=pathlib.Path, metavar="JSON",
                   help="write a Chrome/Perfetto trace of every call (default: none)")
    p.add_argument("--device", type=_device, metavar="N",
                   help="CUDA device (default: the current one)")
    p.add_argument("--cpu", action="store_true",
                   help="use the host reference even with a GPU (default: off)")
    _add_motion_options(p)
    c = p.add_argument_group(
        "checkpoints", "A model that survives a restart: the snapshot of the model and the "
        "count of the input's frames it has seen, in one .npz file.")
    c.add_argument("--checkpoint", type=pathlib.Path, metavar="PATH",
                   help="write a checkpoint when the input ends (and every "
                        "--checkpoint-every frames); each write is whole, a hidden file "
                        "renamed; with several sources a folder, from which a source whose "
                        "Dask worker is lost resumes elsewhere (default: none)")
    c.add_argument("--checkpoint-every", type=_count, metavar="N",
                   help="write the checkpoint every N frames too (default: only at the end)")
    c.add_argument("--resume", type=pathlib.Path, metavar="PATH",
                   help="start from a checkpoint of an earlier run of this input: its model "
                        "and parameters (MOG2 options cannot be given), the frames it had "
                        "seen skipped, masks numbered on from there; may be the --checkpoint "
                        "file itself (default: none)")
    d = p.add_argument_group(
        "several sources (Dask)", "Each source is processed in order on one worker, each "
        "worker on its own GPU or the host reference; needs fastmog[dask].")
    where = d.add_mutually_exclusive_group()
    where.add_argument("--workers", type=_count, metavar="N",
                       help="start a local Dask cluster of N worker processes (default: one "
                            "per GPU, or 2 without one, when several sources are given)")
    where.add_argument("--scheduler", metavar="ADDRESS",
                       help="use an existing Dask cluster, e.g. tcp://10.0.0.5:8786 (its "
                            "workers must see the sources and --out) (default: none)")
    _add_mog2_options(p)
    return p


def _morphology(text):
    try:
        return _motion.parse_morphology(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _fraction(text):
    value = _float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a fraction from 0 to 1, got {text!r}")
    return value


def _add_motion_options(p):
    d = _motion.DEFAULTS
    op, size = d["morphology"][:2]
    m = p.add_argument_group(
        "motion", "Any of these runs the motion step on each mask: morphology, the regions "
        "of the foreground (255; shadows are not motion) in each zone, events over time "
        f"(one starts after {d['min_event_frames']} frames over the threshold and ends after "
        f"{d['gap_frames']} below it; a frame whose foreground passes "
        f"{d['light_switch']:g} of the whole is a light switch, not motion). The summary "
        "lists the events. With several sources each source has its own motion step, "
        "with the same zones and options.")
    m.add_argument("--zones", type=pathlib.Path, metavar="FILE",
                   help="JSON list of zones, each a polygon [[x, y], ...] or "
                        "{\"name\": ..., \"polygon\": [...]} or {\"polygons\": [[...], ...]}, "
                        "in frame pixels, filled as cv2.fillPoly fills them (default: the "
                        "whole frame)")
    m.add_argument("--morphology", type=_morphology, metavar="OP:SIZE",
                   help="clean the mask first: erode, dilate, open or close with a SIZE "
                        "(k or WxH, up to 31) kernel, optionally :ellipse or :cross, as "
                        f"cv2.morphologyEx does; none to skip (default: {op}:{size})")
    m.add_argument("--min-area", type=lambda t: _count(t, least=0), metavar="N",
                   help=f"drop regions under N pixels (default: {d['min_area']})")
    m.add_argument("--threshold", type=_fraction, metavar="F",
                   help="a zone has motion in a frame when at least this fraction of its "
                        f"pixels is foreground (default: {d['threshold']:g})")
    m.add_argument("--events", type=pathlib.Path, metavar="PATH",
                   help="write the events as JSON lines, one per event: zone, frames, "
                        "times, peak score, box; with several sources a folder, with one "
                        "NAME.jsonl per source (default: none)")
    m.add_argument("--regions", type=pathlib.Path, metavar="PATH",
                   help="write one JSON line per frame: foreground fraction, and for each "
                        "zone its score, motion and regions [x, y, w, h, area]; with several "
                        "sources a folder, as --events (default: none)")


def distributed(args):
    """True when the run goes to Dask: several sources, --workers or --scheduler.
    One source without them is today's single run."""
    return len(args.input) > 1 or args.workers is not None or args.scheduler is not None


def _add_mog2_options(p):
    m = p.add_argument_group("MOG2 parameters", "OpenCV's names and defaults.")
    for param in mog2_parameters():
        flag = "--" + param["name"].replace("_", "-")
        default = param["default"]
        help_text = f"{param['doc']} (default: {_shown_value(default)})"
        # default None: mog2_kwargs puts the table's default in, and --resume
        # can tell an option given from one left alone
        if param["type"] is bool:
            m.add_argument(flag, dest=param["name"], action="store_true", default=None,
                           help=help_text)
            negatives = ["--no-" + flag[2:]]
            if param["name"] == "detect_shadows":
                negatives.append("--no-shadows")     # the README's spelling
            m.add_argument(*negatives, dest=param["name"], action="store_false",
                           default=None,
                           help=f"turn {flag} off (default: {_shown_value(default)})")
        else:
            m.add_argument(flag, dest=param["name"], type=_ranged(param), default=None,
                           metavar=param["type"].__name__.upper(), help=help_text)
    m.add_argument("--learning-rate", type=_learning_rate, default=-1.0, metavar="RATE",
                   help="how fast the model adapts, 0 to 1; 0 freezes it, 1 restarts it every "
                        "frame; any negative value (-1, -inf) is automatic, 1/min(2n, "
                        "history) at frame n (default: -1, automatic)")


def mog2_kwargs(args):
    """The MOG2 parameters: those given, the table's defaults for the rest."""
    return {p["name"]: p["default"] if getattr(args, p["name"]) is None
            else getattr(args, p["name"]) for p in mog2_parameters()}


def mog2_given(args):
    """The MOG2 options given on the command line, as flags."""
    return ["--" + p["name"].replace("_", "-") for p in mog2_parameters()
            if getattr(args, p["name"]) is not None]


def source_options(args):
    """How the command line asks its source to be read; past this point no
    argparse namespace travels."""
    return SourceOptions(frames=args.frames, grey=args.grey, decode=args.decode,
                         nvdec_sessions=args.nvdec_sessions, fps=args.fps, size=args.size,
                         colour=args.colour, open_timeout=args.open_timeout,
                         stall_timeout=args.stall_timeout, rtsp_transport=args.rtsp_transport,
                         low_latency=args.low_latency)
