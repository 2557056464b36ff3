"""python -m fastmog: the main job, background subtraction of a video, a folder
of frames or the built-in scene with a truthful report (the run and its loop).

The command line is in _options, the checks before the run in _checks, inputs
in _sources, outputs in _writers, the progress line in _progress. Every
mistake the user can make ends with one line on stderr and exit status 2,
found before the run wherever it can be (exit statuses: _options.EPILOG).
"""
import sys
import time

import numpy as np

from . import _checks, _cvio, _sources, _writers
from ._checks import PIPELINE_DEPTH
from ._errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_SHORT, EXIT_USAGE, UserError, shown
from ._options import build_parser, distributed, mog2_kwargs
from ._progress import Progress

# ---- the job -----------------------------------------------------------------------------


def run(args):
    import fastmog

    found = _sources.find_input(args.input)
    _checks.check_options(args, found)
    on_gpu, why_host = _checks.choose_device(args)
    try:
        kwargs = mog2_kwargs(args)
        sub = (fastmog.BackgroundSubtractorMOG2(**kwargs, device=args.device) if on_gpu
               else fastmog.cpu.BackgroundSubtractorMOG2(**kwargs))
    except (ValueError, TypeError) as e:
        raise UserError(str(e)) from None

    # outputs first: a mistake there must not cost a whole run
    writer = _writers.mask_writer(args.out, args.overwrite)
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
    timer = fastmog.Timer(sync=args.sync) if profiling else None
    if not on_gpu:
        print(f"fastmog: {why_host}: running the host reference (slower)", file=sys.stderr)
    check_memory = _checks.memory_check(on_gpu, args.device, args.n_mixtures, args.batch)
    # upload, compute, download; NVDEC decodes onto the compute stream
    streams = [fastmog.Stream(device=args.device) for _ in range(3)] if on_gpu else []
    if found.kind == "scene":
        source = _sources.open_scene(args, on_gpu, check_memory)
        print(f"fastmog: rendered the built-in scene in {source.render_seconds:.2f} s "
              f"(not counted below)")
    elif found.kind == "frames":
        source = _sources.open_frames(found, args, check_memory)
    else:
        source = _sources.open_video(found, args, on_gpu=on_gpu,
                                     stream=streams[1] if on_gpu else None, timer=timer,
                                     check_memory=check_memory)
    truth = None
    if truth_dir is not None:
        numbers = source.numbers
        if numbers is None and source.expected is not None:
            numbers = range(source.expected)
        truth = _checks.open_ground_truth(truth_dir, source.shape, numbers)

    where = (f"GPU {fastmog.device_properties(sub.device)['name']}" if on_gpu
             else "the host reference")
    print(f"fastmog: {source.description} on {where}")
    if source.decoder_line:
        print(f"fastmog: {source.decoder_line}")
    return _process(args, sub, source, writer, truth, timer, streams)


def _process(args, sub, source, writer, truth, timer, streams):
    import fastmog

    label = "decoding and processing" if source.decoder_line else "processing"
    progress = Progress(label, source.count)
    last = {}
    done, pixels, interrupted = 0, 0, False
    on_gpu = bool(streams)
    writer.start(source.fps)

    def keep_last(frame):
        last["frame"] = frame
        return frame

    started = time.perf_counter()
    try:
        if source.on_device:
            masks = _device_frames(sub, source, streams[1], args, timer, last)
        elif on_gpu:
            frames = (keep_last(f) for f in _host_frames(source, args.batch))
            masks = fastmog.pipeline(sub, frames, streams=streams, batch=args.batch,
                                     learning_rate=args.learning_rate, timer=timer)
        else:
            masks = (sub.apply(keep_last(f), args.learning_rate, timer=timer) for f in source)
        for mask in masks:
            writer.write(mask)
            if truth is not None:
                number = source.numbers[done] if source.numbers else done
                truth.add(number if number is not None else done, mask)
            done += 1
            pixels += mask.size
            progress.update(done)
            last["mask"] = mask
    except KeyboardInterrupt:
        interrupted = True
    finally:
        elapsed = time.perf_counter() - started
        progress.close()
        writer.close()
        reader = getattr(source, "reader", None)
        if reader is not None:
            reader.close()                # before its stream: NVDEC works on it
    if done == 0 and not interrupted:
        raise UserError("no frame was processed")
    if not interrupted:
        writer.verify()

    if args.preview is not None and "mask" in last:
        if on_gpu:
            s = streams[0]
            background = sub.get_background_image(stream=s).download(stream=s)
        else:
            background = sub.get_background_image()
        _writers.write_preview(args.preview, last["frame"], np.array(last["mask"]), background)
    for s in streams:
        s.close()

    status = "interrupted after" if interrupted else "processed"
    print(f"fastmog: {status} {done} frames in {elapsed:.3f} s: {done / elapsed:.1f} frames/s, "
          f"{pixels / elapsed / 1e6:.1f} megapixels/s"
          + (" (including writing the masks)" if args.out is not None else ""))
    if writer.count:
        print(f"fastmog: wrote {writer.count} masks to {shown(args.out)}"
              + (" (read back: exact)" if isinstance(writer, _writers.LosslessVideo) else ""))
    if args.preview is not None and "mask" in last:
        print(f"fastmog: wrote the preview {shown(args.preview)}")
    if truth is not None:
        s = truth.score
        if s.frames == 0 and not interrupted:
            raise UserError(f"ground truth {shown(truth.path)} labels none of the "
                            f"{done} frames processed: nothing was scored")
        print(f"fastmog: ground truth {shown(truth.path)}: precision {s.precision:.4f} "
              f"recall {s.recall:.4f} F-measure {s.f_measure:.4f} over {s.frames} frames")
    if timer is not None:
        if args.profile or args.sync:
            print(timer.report())
        if args.trace is not None:
            try:
                timer.to_chrome_trace(args.trace)
            except OSError as e:
                raise UserError(f"cannot write the trace {shown(args.trace)}: "
                                f"{e.strerror or e}") from None
            print(f"fastmog: wrote the trace {shown(args.trace)}")
    if interrupted:
        return EXIT_INTERRUPTED
    if not source.short and source.expected and source.read < source.expected:
        print(f"fastmog: note: the container announces {source.expected} frames; the "
              f"{source.read} decoded reach the end of its timeline (the others repeat them)")
    if source.short:
        why = f": {source.decode_error}" if source.decode_error else ""
        of = f" of the {source.expected} its container announces" if source.expected else ""
        what = f"read {source.read} frames{of} (truncated or corrupt video{why})"
        if args.accept_short:
            print(f"fastmog: note: {what}; accepted (--accept-short)")
        else:
            print(f"fastmog: error: {what}; pass --accept-short to accept it", file=sys.stderr)
            return EXIT_SHORT
    return EXIT_OK


def _host_frames(source, batch):
    """Host frames for a pipeline of `batch` frames per launch. A reader's
    pinned ring buffer is passed as it is only when the ring outlasts the
    frames the pipeline keeps in flight (it uploads pinned frames
    asynchronously); otherwise copied."""
    depth = getattr(getattr(source, "reader", None), "depth", None)
    if getattr(source, "reader", None) is None or (depth is not None
                                                   and depth > PIPELINE_DEPTH * batch):
        return iter(source)
    return (np.array(f) for f in source)


def _device_frames(sub, source, stream, args, timer, last):
    """NVDEC frames: already on the GPU, so no upload (grey: the luma plane as
    it is; colour: converted from NV12 on `stream`). A frame's planes are valid
    until the next is taken, and everything here is queued on `stream` before
    that. Yields host masks."""
    import fastmog

    host_mask = None
    for f in source:
        frame = f.as_input(stream)
        mask = sub.apply(frame, args.learning_rate, stream=stream, timer=timer)
        if host_mask is None:
            host_mask = fastmog.pinned_empty(mask.shape, np.uint8)
        mask.download(host_mask, stream=stream, timer=timer)
        if args.preview is not None:
            last["frame"] = frame.download(stream=stream)
        yield host_mask


def main(argv=None):
    for out in (sys.stdout, sys.stderr):
        # a file name that is not UTF-8 must not turn a message into a traceback
        if hasattr(out, "reconfigure"):
            out.reconfigure(errors="backslashreplace")
    _cvio.quiet_opencv()
    import fastmog

    args = build_parser().parse_args(argv)
    try:
        if distributed(args):
            from . import _multi

            return _multi.run(args)
        args.input = args.input[0] if args.input else None
        return run(args)
    except UserError as e:
        print(f"fastmog: error: {e}", file=sys.stderr)
    except MemoryError:
        print("fastmog: error: out of host memory: use smaller frames or fewer of them",
              file=sys.stderr)
    except fastmog.CudaError as e:
        if e.name != "cudaErrorMemoryAllocation":
            raise
        print(f"fastmog: error: out of GPU memory ({e}): use smaller frames", file=sys.stderr)
    except KeyboardInterrupt:
        print("fastmog: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_USAGE
