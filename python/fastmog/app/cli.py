"""python -m fastmog: the main job, background subtraction of a video, a folder
of frames or the built-in scene with a truthful report (the run and its report).

The command line is in _options, the checks before the run in _checks, inputs
in _sources, the frame loop in _loop, outputs in _writers, the progress line in
_progress, how a run stops on a signal in _signals, several sources in _multi. Every mistake the user can make ends
with one line on stderr and exit status 2, found before the run wherever it
can be (exit statuses: _options.EPILOG).
"""
import contextlib
import dataclasses
import errno
import os
import sys
import time

from .. import _fastmog
from ..profiling import Timer, sampling_nvml
from . import _checkpoint, _checks, _cvio, _loop, _motion, _multi, _signals, _sources, _writers
from ._errors import EXIT_OK, EXIT_SHORT, EXIT_USAGE, UserError, shown
from ._options import (DEFAULT_BATCH, build_parser, distributed, mog2_given, mog2_kwargs,
                       source_options)
from ._progress import Progress

# ---- the job -----------------------------------------------------------------------------


def run(args):
    """One source (args.input: a path, or None for the built-in scene)."""
    found = _sources.find_input(args.input)
    _checks.check_options(args, found)
    live = found.kind == "stream"
    if args.batch is None or (live and args.batch == "auto"):
        args.batch = 1 if live else DEFAULT_BATCH     # a live frame's mask comes at once
    _checkpoint.check_options(args)
    on_gpu, why_host = _checks.choose_device(args)
    resumed = (_checkpoint.Resumed(args.resume, mog2_given(args)) if args.resume is not None
               else None)
    sub = None
    if resumed is None:
        try:
            sub = _loop.subtractor(mog2_kwargs(args), args.device, on_gpu)
        except (ValueError, TypeError) as e:
            raise UserError(str(e)) from None

    # outputs first: a mistake there must not cost a whole run. The checkpoint
    # resumed from is an input, unless it is the --checkpoint written on.
    same = (args.resume is not None and args.checkpoint is not None
            and os.path.realpath(args.resume) == os.path.realpath(args.checkpoint))
    _checks.check_outputs({"--out": args.out, "--preview": args.preview,
                           "--trace": args.trace, "--events": args.events,
                           "--regions": args.regions,
                           "--checkpoint": None if same else args.checkpoint},
                          [None if live else found.cdnet or found.path, args.ground_truth,
                           None if same else args.resume], args.overwrite)
    zones = _motion.read_zones(args.zones) if args.zones is not None else None
    first = 0 if resumed is None else resumed.frames
    writer = _writers.mask_writer(args.out, args.overwrite, first)
    if args.checkpoint is not None:
        _writers.check_writable_file(args.checkpoint, "the checkpoint")
    if args.preview is not None:
        _writers.check_preview(args.preview)
    if args.trace is not None:
        _writers.check_writable_file(args.trace, "the trace")

    truth_dir = args.ground_truth
    if found.cdnet is not None:
        truth_dir = truth_dir or found.cdnet
        scored = ("scored against its groundtruth/" if args.ground_truth is None
                  else f"scored against {shown(args.ground_truth)}")
        print(f"fastmog: {shown(found.cdnet)} is a CDnet sequence: frames from input/, "
              f"{scored}")

    profiling = args.profile or args.sync or args.trace is not None
    timer = Timer(sync=args.sync) if profiling else None
    if not on_gpu:
        print(f"fastmog: {why_host}: running the host reference (slower)"
              + ("" if args.cpu else "; fastmog.diagnose() says more"), file=sys.stderr)
    n_mixtures = (mog2_kwargs(args) if resumed is None
                  else resumed.snapshot["geometry"])["n_mixtures"]
    check_memory = _checks.memory_check(on_gpu, args.device, n_mixtures, args.batch)
    streams = _loop.open_streams(args.device, on_gpu)
    source = motion = None
    try:
        options = dataclasses.replace(source_options(args), on_stream_event=_stream_event)
        source = _sources.open_source(found, options, on_gpu=on_gpu,
                                      stream=streams[1] if on_gpu else None, timer=timer,
                                      check_memory=check_memory)
        if found.kind == "scene":
            print(f"fastmog: rendered the built-in scene in {source.render_seconds:.2f} s "
                  f"(not counted below)")
        truth = None
        if truth_dir is not None:
            numbers = source.numbers
            if numbers is None and source.expected is not None:
                numbers = range(source.expected)
            truth = _checks.open_ground_truth(truth_dir, source.shape, numbers)
        if resumed is not None:
            resumed.check_source(source.shape, None if live else source.expected
                                 if source.expected is not None else source.count)
        motion = (_motion.MotionStep(_motion.MotionOptions.from_args(args, zones),
                                     source.shape, source.fps, first, on_gpu=on_gpu,
                                     timer=timer, events=args.events, regions=args.regions)
                  if _motion.wanted(args) else None)
        if resumed is not None:
            sub = resumed.subtractor(on_gpu, streams[1] if on_gpu else None)
            print(f"fastmog: resumed from the checkpoint {shown(args.resume)}: its model has "
                  f"seen {first} frames" + (", which are skipped" if not live else ""))
        checkpoints = None
        if args.checkpoint is not None:
            checkpoints = _checkpoint.Checkpoints(args.checkpoint, args.checkpoint_every, first)
            checkpoints.bind(sub, streams[1] if on_gpu else None)
    except BaseException:
        # what was opened for the run is closed: a live stream's thread too
        if motion is not None:
            motion.close()
        if source is not None:
            source.close()
        for s in streams:
            s.close()
        raise
    where = (f"GPU {_fastmog.device_properties(sub.device)['name']}" if on_gpu
             else "the host reference")
    print(f"fastmog: {source.description} on {where}")
    if source.decoder_line:
        print(f"fastmog: {source.decoder_line}")
    return _process(args, sub, source, writer, truth, timer, streams, motion, first,
                    checkpoints)


# a live frame's arrival: its packet's with NVDEC, its decoded picture's on the
# host; its end: the mask, or with the motion step the motion result
LATENCY = "live frame, arrival to mask"
LATENCY_MOTION = "live frame, arrival to motion result"


def _stream_event(url, event):
    """A live stream's drop or reconnect, one line each, as it is seen."""
    if event.kind == "dropped":
        print(f"fastmog: {url}: the stream dropped after {event.frames} frames "
              f"({event.reason}); reconnecting")
    else:
        print(f"fastmog: {url}: reconnected after {event.seconds:.1f} s (attempt "
              f"{event.attempt}); about {event.lost} frames lost meanwhile")


def _process(args, sub, source, writer, truth, timer, streams, motion, first, checkpoints):
    """The source through the one frame loop, then the report. first: the
    frames a resumed run counts as seen (a file's are skipped; a live
    stream's are not: it goes on in real time)."""
    label = "decoding and processing" if source.decoder_line else "processing"
    latencies = []

    def final_checkpoint(done):
        """The model after the input's last frame, before the streams close."""
        if checkpoints.written != first + done.frames:
            checkpoints.write(done.frames)

    def on_mask(index, mask):
        at = first + index                      # the frame's place in the source
        if motion is not None and not motion.on_gpu:
            motion.on_mask(at, mask)
        # the GPU motion step ran before this (on the device mask): either
        # way the latency ends at the motion result when there is one
        if source.arrivals is not None:
            arrival = source.arrivals.pop(index, None)
            if arrival is not None:
                latencies.append(time.monotonic() - arrival)
                if timer is not None:
                    timer.latency(LATENCY if motion is None else LATENCY_MOTION,
                                  latencies[-1])
        if truth is not None:
            number = source.numbers[at] if source.numbers else at
            truth.add(number if number is not None else at, mask)
        if checkpoints is not None:
            checkpoints.after(index + 1)

    # on the GPU the motion step takes device masks: a mask comes to the host
    # only for what reads it there
    on_device = motion is not None and motion.on_gpu
    download = not on_device or (writer.path is not None or truth is not None
                                 or args.preview is not None)
    # a GPU profile samples NVML beside the timer: the report's SM and decoder line
    nvml = (sampling_nvml(timer, sub.device) if timer is not None and streams
            else contextlib.nullcontext())
    try:
        with nvml, _closing(motion):
            done = _loop.process(sub, source, writer, streams=streams,
                                 learning_rate=args.learning_rate, batch=args.batch,
                                 timer=timer,
                                 on_mask=None if truth is None
                                 and (motion is None or on_device)
                                 and checkpoints is None and source.arrivals is None
                                 else on_mask,
                                 on_device_mask=motion.on_device_mask if on_device else None,
                                 download=download,
                                 progress=Progress(label, None if source.count is None
                                                   else source.count - first),
                                 keep_last=args.preview is not None,
                                 skip=0 if source.arrivals is not None else first,
                                 segment=None if checkpoints is None else checkpoints.every,
                                 on_end=None if checkpoints is None else final_checkpoint)
    except UserError as e:
        if writer.count and writer.path is not None:
            # what this run wrote is kept, and the error line says it is incomplete
            raise UserError(f"{e} ({shown(writer.path)} is partial: {writer.count} masks "
                            f"written)") from None
        raise
    interrupted, elapsed = done.interrupted, done.seconds
    if done.frames == 0 and not interrupted:
        raise UserError("no frame was processed")
    if not interrupted:
        writer.verify()
    if done.last_mask is not None:
        outlines, boxes = motion.drawing() if motion is not None else ([], [])
        _writers.write_preview(args.preview, done.last_frame, done.last_mask, done.background,
                               full_size=args.preview_full_size, outlines=outlines,
                               boxes=boxes)

    status = "interrupted after" if interrupted else "processed"
    print(f"fastmog: {status} {done.frames} frames in {elapsed:.3f} s: "
          f"{done.frames / elapsed:.1f} frames/s, {done.pixels / elapsed / 1e6:.1f} megapixels/s"
          + (" (including writing the masks)" if args.out is not None else "")
          + (f" (stopped by {_signals.name(done.interrupt)})" if interrupted else ""))
    if done.auto_batch is not None:
        print(f"fastmog: --batch auto: {done.auto_batch.describe()}")
    if writer.count:
        checked = ""
        if isinstance(writer, _writers.LosslessVideo):
            checked = " (not read back: interrupted)" if interrupted else " (read back: exact)"
        print(f"fastmog: wrote {writer.count} masks to {shown(args.out)}{checked}")
    if source.arrivals is not None:
        print(_live_summary(source.reader, latencies,
                            "its mask" if motion is None else "its motion result"))
    if motion is not None:
        print("\n".join(motion.summary({"events": args.events, "regions": args.regions})))
    if checkpoints is not None:
        if checkpoints.written is None:
            print("fastmog: no checkpoint written (interrupted before the first)")
        else:
            print(f"fastmog: checkpoint: the model after {checkpoints.written} frames of the "
                  f"input in {shown(args.checkpoint)}"
                  + (" (the last one before the stop)" if interrupted else ""))
    if done.last_mask is not None:
        print(f"fastmog: wrote the preview {shown(args.preview)}")
    if truth is not None:
        s = truth.score
        if s.frames == 0 and not interrupted:
            raise UserError(f"ground truth {shown(truth.path)} labels none of the "
                            f"{done.frames} frames processed: nothing was scored")
        print(f"fastmog: ground truth {shown(truth.path)}: precision {s.precision:.4f} "
              f"recall {s.recall:.4f} F-measure {s.f_measure:.4f} over {s.frames} frames")
    if timer is not None:
        if args.profile or args.sync:
            print(timer.report())
        if args.trace is not None:
            _write_trace(timer, args.trace)
            print(f"fastmog: wrote the trace {shown(args.trace)}")
    if interrupted:
        return _signals.exit_status(done.interrupt)
    if not source.short and source.expected and source.read < source.expected:
        print(f"fastmog: note: the container announces {source.expected} frames; the "
              f"{source.read} decoded reach the end of its timeline (the others repeat them)")
    what = source.incomplete()
    if what is not None:
        if args.accept_short:
            print(f"fastmog: note: {what}; accepted (--accept-short)")
        else:
            print(f"fastmog: error: {what}; pass --accept-short to accept it", file=sys.stderr)
            return EXIT_SHORT
    return EXIT_OK


def _live_summary(reader, latencies, end):
    """Reconnects, frames lost and the latency from a frame's arrival to
    `end` (median, p99, max)."""
    line = (f"fastmog: live stream: {reader.reconnects} reconnect"
            f"{'s' if reader.reconnects != 1 else ''}, about {reader.lost_frames} frames lost")
    if latencies:
        ms = sorted(1e3 * t for t in latencies)
        p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
        line += (f"; latency from a frame's arrival to {end}: median {ms[len(ms) // 2]:.2f} "
                 f"ms, p99 {p99:.2f} ms, max {ms[-1]:.2f} ms over {len(ms)} frames")
    return line


@contextlib.contextmanager
def _closing(motion):
    """The motion step's open events end and its files close, however the
    loop ends (an interrupted run's events end at its last frame)."""
    try:
        yield
    finally:
        if motion is not None:
            motion.close()


def _write_trace(timer, path):
    """The trace under a hidden name first, renamed when whole: a full disk
    leaves no empty or cut file under the real name (nor the hidden one)."""
    folder, name = os.path.split(os.fsdecode(path))
    partial = os.path.join(folder, f".{name}.partial")
    try:
        timer.to_chrome_trace(partial)
        os.replace(partial, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise UserError(f"cannot write the trace {shown(path)}: {e.strerror or e}"
                        + (" (ENOSPC)" if e.errno == errno.ENOSPC else "")) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise


def main(argv=None, *, program=False):
    for out in (sys.stdout, sys.stderr):
        # a file name that is not UTF-8 must not turn a message into a traceback
        if hasattr(out, "reconfigure"):
            out.reconfigure(errors="backslashreplace")
    _cvio.quiet_opencv()
    with _signals.handled() as ending:
        try:
            args = build_parser().parse_args(argv)
        except KeyboardInterrupt as e:
            print(f"fastmog: interrupted ({_signals.name(e)})", file=sys.stderr)
            return _signals.exit_status(e)
        status = _main(args)
        if program:
            ending.then_exit(status)
        return status


def program():
    """The `fastmog` command and `python -m fastmog`: main(), then the
    process ends with its status."""
    _signals.ignore_at_exit()
    sys.exit(main(program=True))


def _main(args):
    several = distributed(args)
    try:
        if several:
            return _multi.run(args)
        args.input = args.input[0] if args.input else None
        return run(args)
    except UserError as e:
        print(f"fastmog: error: {e}", file=sys.stderr)
    except MemoryError:
        print("fastmog: error: out of host memory: use smaller frames or fewer of them",
              file=sys.stderr)
    except _fastmog.CudaError as e:
        if e.name != "cudaErrorMemoryAllocation":
            raise
        print(f"fastmog: error: out of GPU memory ({e}): use smaller frames", file=sys.stderr)
    except KeyboardInterrupt as e:
        print(f"fastmog: interrupted ({_signals.name(e)})", file=sys.stderr)
        if several:
            # a cluster cut short in its start is closed again at exit, with
            # tracebacks: after the one line, nothing more reaches the terminal
            sys.stderr.flush()
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 2)
            os.close(null)
            sys.stderr = open(os.devnull, "w")
        return _signals.exit_status(e)
    return EXIT_USAGE
