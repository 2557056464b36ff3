"""The checks the main job makes before its run: options that do not fit the
input, the device, the memory the frames will need, and the ground truth."""
import os

from .. import _diagnose, _fastmog
from .._auto_batch import CANDIDATES
from ..scoring import GroundTruth
from . import _cvio
from ._errors import UserError, shown
from ._writers import LOSSLESS_VIDEO

# The overlapped pipeline's ring of slots. On the lent H200, 4 against 3: host
# frames from pageable memory (a decoder's) 0.216-0.235 ms a 4K grey frame
# against 0.270-0.281, pinned ones the same (benchmarks/MAIN_JOB_RESULTS.md).
PIPELINE_DEPTH = 4


def check_options(args, found):
    if found.kind != "scene":
        if args.size is not None or args.colour:
            raise UserError("--size and --colour are for the built-in scene; the input "
                            "brings its own frames")
    else:
        if args.grey:
            raise UserError("--grey is for file input; the built-in scene is grey unless "
                            "--colour is given")
        if args.ground_truth is not None:
            raise UserError("--ground-truth needs file input: the built-in scene has no "
                            "ground truth")
    if args.preview_full_size and args.preview is None:
        raise UserError("--preview-full-size sizes the --preview image; no --preview is given")
    if args.rtsp_transport is not None and not (
            found.kind == "stream" and found.path.lower().startswith("rtsp")):
        raise UserError("--rtsp-transport is for rtsp:// streams")
    if args.low_latency and found.kind != "stream":
        raise UserError("--low-latency is for live streams")
    if args.decode != "auto" and found.kind not in ("video", "stream"):
        raise UserError(f"--decode {args.decode} is for video files and live streams")
    if args.fps is not None and (args.out is None
                                 or args.out.suffix.lower() not in LOSSLESS_VIDEO):
        raise UserError("--fps sets the frame rate of a mask video; --out names no video")


def check_outputs(outputs, inputs, overwrite):
    """Refuses, before any work, outputs that would destroy an input or each
    other, and (without --overwrite) a --preview or --trace file that exists:
    one rule for every output. outputs: {flag: path or None}; inputs: the
    paths the run reads (files or folders). Paths are compared with symbolic
    links resolved."""
    read = [(p, os.path.realpath(p)) for p in inputs if p is not None]
    seen = {}
    for flag, path in outputs.items():
        if path is None:
            continue
        real = os.path.realpath(path)
        for given, source in read:
            if real == source:
                raise UserError(f"{flag} {shown(path)} is the input {shown(given)}: writing "
                                f"it would destroy what is being read; choose another path")
            if os.path.isdir(source) and real.startswith(source.rstrip(os.sep) + os.sep):
                raise UserError(f"{flag} {shown(path)} is inside the input {shown(given)}: "
                                f"choose a path outside it")
        if real in seen:
            raise UserError(f"{seen[real]} and {flag} name the same file {shown(path)}")
        seen[real] = flag
        if flag != "--out" and os.path.lexists(path) and not overwrite:
            raise UserError(f"{flag} {shown(path)} exists: pass --overwrite to replace it")


def _available_host_memory():
    """Bytes the kernel says can be allocated without swapping, or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def memory_check(on_gpu, device, n_mixtures, batch=1):
    """check(shape, render=0) refuses frames whose model, buffers and (for the
    built-in scene) rendering would not fit, before they are allocated.
    batch: a whole number, or "auto" (the ring holds the largest it tries)."""
    batch = CANDIDATES[-1] if batch == "auto" else batch

    def check(shape, render=0):
        h, w = shape[:2]
        channels = shape[2] if len(shape) > 2 else 1
        pixels = h * w
        model = pixels * (n_mixtures * (2 + channels) * 4 + 1)   # floats per mode + count
        frame, mask = pixels * channels, pixels
        # rendering: the loop frames kept, plus float32/float64 temporaries of one frame
        scene = render * frame + 28 * frame if render else 0
        if on_gpu:
            ring = PIPELINE_DEPTH * batch * (frame + mask)    # the pipeline's slots
            needs = [("GPU", model + ring + frame + mask, _fastmog.mem_get_info(device)[0]),
                     ("host", scene + ring,
                      _available_host_memory())]
        else:
            needs = [("host", model + scene + 2 * (frame + mask), _available_host_memory())]
        for where, need, free in needs:
            if free is not None and need > free:
                raise UserError(f"{w}x{h} frames need about {need / 2**30:.1f} GiB of {where} "
                                f"memory, {free / 2**30:.1f} GiB is free: use smaller frames")

    return check


def open_ground_truth(path, first_shape, numbers):
    """The scorer, checked: its files parse, its labels have the frames' size
    and it labels at least one of the frames (when their numbers are known)."""
    try:
        truth = GroundTruth(path, _cvio.read_grey)
    except (OSError, ValueError) as e:
        raise UserError(f"ground truth {shown(path)}: {e}") from None
    truth.path = path
    if numbers is not None:
        scored = truth.scored([n for n in numbers if n is not None])
        if not scored:
            raise UserError(f"ground truth {shown(path)} labels none of the input's frames "
                            f"(inside its temporal ROI {truth.first}..{truth.last})")
        label = _cvio.read_grey(truth.label_path(scored[0]))
        if label.shape != tuple(first_shape[:2]):
            raise UserError(f"ground truth {shown(path)} is {label.shape[1]}x{label.shape[0]} "
                            f"but the frames are {first_shape[1]}x{first_shape[0]}")
    return truth


def no_gpu_reason(status):
    """Why no GPU is usable, in a user's words (fastmog.diagnose() gives the
    CUDA error's name and text)."""
    if status == "cudaErrorInsufficientDriver":
        # CUDA's name covers both: no driver at all, or one older than the runtime
        if not os.path.exists("/proc/driver/nvidia/version"):
            return "no NVIDIA driver found"
        return (_diagnose.driver_advice(*_fastmog._versions())
                or "the NVIDIA driver is older than this build's CUDA needs")
    if status == "cudaErrorNoDevice":
        return "no NVIDIA GPU found"
    return f"no usable GPU ({status})"


def choose_device(args):
    """(on_gpu, why not) after checking --device and --cpu."""
    if args.cpu:
        if args.device is not None:
            raise UserError("--device and --cpu contradict each other: --cpu runs on the host")
        return False, "--cpu was given"
    if not _fastmog.cuda_available():
        status, text = _fastmog._cuda_status()
        if args.device is not None:
            raise UserError(f"--device {args.device}: no CUDA device is usable here "
                            f"({no_gpu_reason(status)})")
        return False, no_gpu_reason(status)
    if args.device is not None and not args.device < _fastmog.device_count():
        raise UserError(f"--device {args.device} does not exist: this machine has "
                        f"{_fastmog.device_count()} CUDA device(s)")
    return True, None
