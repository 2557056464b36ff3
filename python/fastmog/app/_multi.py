"""python -m fastmog SRC [SRC ...]: the main job for several sources, on a
local Dask cluster (--workers N) or an existing one (--scheduler ADDRESS),
with one line per source as it finishes (the work itself is in _dask)."""
import collections
import contextlib
import os
import pathlib
import sys
import time

from .. import cpu
from . import _checkpoint, _checks, _motion, _signals, _sources, _writers
from ._dask import live_workers, local_client, process_sources, source_name, unique_names
from ._errors import EXIT_INCOMPLETE, EXIT_OK, EXIT_SHORT, UserError, shown
from ._options import DEFAULT_BATCH, mog2_kwargs
from ._progress import Progress

# single-run options that have no meaning, or no implementation, per source here
_SINGLE_ONLY = [("preview", "--preview"), ("preview_full_size", "--preview-full-size"), ("ground_truth", "--ground-truth"),
                ("trace", "--trace"), ("profile", "--profile"), ("sync", "--sync"),
                ("device", "--device"), ("size", "--size"), ("colour", "--colour"),
                ("fps", "--fps"), ("resume", "--resume")]


def check(args):
    """Everything that can be refused before a cluster starts: options, the
    sources (the workers read them: a shared file system is assumed) and
    the output folders and files. Returns (sources, out_dirs, motion, files):
    motion the motion step's options or None, files each source's (events,
    regions) files."""
    _checkpoint.check_options(args)
    for name, flag in _SINGLE_ONLY:
        if getattr(args, name):
            raise UserError(f"{flag} is for a single source; it cannot be used with several "
                            f"sources, --workers or --scheduler")
    motion = None
    if _motion.wanted(args):
        if args.checkpoint is not None:
            raise UserError("the motion options cannot be used with --checkpoint: a source "
                            "re-run from its checkpoint would restart its events")
        zones = _motion.read_zones(args.zones) if args.zones is not None else None
        motion = _motion.MotionOptions.from_args(args, zones)
        try:
            motion.check()
        except (TypeError, ValueError) as e:
            raise UserError(str(e)) from None
    if args.checkpoint is not None:
        if args.checkpoint_every is None:
            raise UserError("with several sources --checkpoint is a folder of checkpoints "
                            "for re-running a source whose worker is lost; give "
                            "--checkpoint-every too")
        if args.checkpoint.exists() and not args.checkpoint.is_dir():
            raise UserError(f"--checkpoint {shown(args.checkpoint)} is a file; with several "
                            f"sources it is a folder, one checkpoint per source")
        try:
            args.checkpoint.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"cannot make the checkpoint folder {shown(args.checkpoint)}: "
                            f"{e.strerror or e}") from None
        _writers.check_writable_file(args.checkpoint / ".fastmog-write-test", "checkpoints to")
        old = [n for n in unique_names(args.input)
               if (args.checkpoint / f"{n}.npz").exists()]
        if old and not args.overwrite:
            raise UserError(f"--checkpoint {shown(args.checkpoint)} holds checkpoints of an "
                            f"earlier run ({old[0]}.npz): pass --overwrite to start afresh")
    if not args.input:
        raise UserError("--workers and --scheduler need sources: give one or more videos or "
                        "folders of frames")
    inputs = []
    for text in args.input:
        found = _sources.find_input(text)
        if found.kind != "stream":
            inputs.append(found.cdnet or found.path)
        if args.decode != "auto" and found.kind != "video":
            raise UserError(f"--decode {args.decode} is for video files; "
                            f"{shown(text)} is a folder")
    out_dirs = [None] * len(args.input)
    _checks.check_outputs({"--out": args.out}, inputs, args.overwrite)
    if args.out is not None:
        if args.out.suffix.lower() in _writers.LOSSLESS_VIDEO | _writers.LOSSY_VIDEO:
            raise UserError(f"--out {shown(args.out)} names a video; with several sources "
                            f"--out is a folder that gets one subfolder per source")
        if args.out.exists() and not args.out.is_dir():
            raise UserError(f"cannot write masks to {shown(args.out)}: it is a file, "
                            f"not a folder")
        _writers.check_folder_name(args.out)
        names = unique_names(args.input)
        for name in names:      # cam1 --out . would write into the input cam1/
            _checks.check_outputs({"--out": args.out / name}, inputs, args.overwrite)
        # each subfolder is checked (and made) now: a used one must not cost a run
        out_dirs = [_writers.PngSequence(args.out / name, args.overwrite).path
                    for name in names]
    files = _motion_files(args, inputs)
    try:
        cpu.BackgroundSubtractorMOG2(**mog2_kwargs(args))
    except (ValueError, TypeError) as e:
        raise UserError(str(e)) from None
    return list(args.input), out_dirs, motion, files


def _motion_files(args, inputs):
    """With several sources --events and --regions are folders, with one
    NAME.jsonl per source (NAME as its --out subfolder): made now, each file
    checked as the single run checks its file."""
    names = unique_names(args.input)
    folders = {"--events": args.events, "--regions": args.regions}
    for flag, folder in folders.items():
        if folder is None:
            continue
        if folder.exists() and not folder.is_dir():
            raise UserError(f"{flag} {shown(folder)} is a file; with several sources it is a "
                            f"folder that gets one NAME.jsonl per source")
        if not folder.exists() and folder.suffix:
            raise UserError(f"{flag} {shown(folder)}: with several sources {flag} is a folder "
                            f"(a name without extension, or one that exists) that gets one "
                            f"NAME.jsonl per source")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"cannot make the {flag} folder {shown(folder)}: "
                            f"{e.strerror or e}") from None
    files = []
    for name in names:
        each = {flag: None if folder is None else folder / f"{name}.jsonl"
                for flag, folder in folders.items()}
        _checks.check_outputs(each, inputs, args.overwrite)
        for flag, path in each.items():
            if path is not None:
                _writers.check_writable_file(path, f"the {flag[2:]} file")
        files.append((each["--events"], each["--regions"]))
    return files


def _client(args):
    try:
        import distributed
    except ImportError:
        raise UserError("several sources run on Dask, which is not installed: "
                        "pip install 'fastmog[dask]'") from None

    if args.scheduler is None:
        return local_client(args.workers), "a local cluster"
    try:
        client = distributed.Client(args.scheduler, timeout=30)
    except (OSError, TimeoutError, ValueError) as e:
        raise UserError(f"cannot reach the Dask scheduler {args.scheduler}: {e}") from None
    return client, f"the cluster at {args.scheduler}"


@contextlib.contextmanager
def _terminal_for_fastmog_only():
    """While the cluster lives, file descriptor 2 (which every worker process
    inherits, and where distributed's loggers write) goes to /dev/null, and
    sys.stderr, fastmog's own lines, to the terminal: worker error blocks and
    the tracebacks of workers hit by a terminal's Ctrl-C stay out of sight."""
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)
    previous = sys.stderr
    sys.stderr = open(saved, "w", buffering=1, errors="backslashreplace", closefd=False)
    try:
        yield
    except KeyboardInterrupt:
        # the cluster goes on closing in its own threads, logging as it goes:
        # descriptor 2 stays on /dev/null to the end, fastmog's line still
        # reaches the terminal
        sys.stderr.flush()
        sys.stderr = open(saved, "w", buffering=1, errors="backslashreplace")
        raise
    except BaseException:
        _restore(previous, saved)
        raise
    _restore(previous, saved)


def _restore(stderr, saved):
    sys.stderr.flush()
    sys.stderr = stderr
    os.dup2(saved, 2)
    os.close(saved)


def run(args):
    sources, out_dirs, motion, files = check(args)
    with _terminal_for_fastmog_only():
        return _run(args, sources, out_dirs, motion, files)


def _run(args, sources, out_dirs, motion, files):
    with contextlib.ExitStack() as stack:
        # a Ctrl-C in the cluster's start is raised once it is up, or has failed for it
        with _signals.held(stop_explains_errors=True):
            cluster, where = _client(args)
            client = stack.enter_context(cluster)
        n_workers = len(live_workers(client))
        print(f"fastmog: {len(sources)} sources on {where} of {n_workers} Dask workers "
              f"({'the host reference' if args.cpu else 'a GPU each where there is one'})")

        progress = Progress("processing")
        names = [shown(source_name(s)) for s in sources]

        def show_progress(frames):
            progress.label = "processing: " + ", ".join(
                f"{pathlib.PurePath(names[i]).name or names[i]} {n}"
                for i, n in sorted(frames.items())) + "; in all"
            progress.update(sum(frames.values()) + finished[0])

        finished = [0]
        index = collections.defaultdict(collections.deque)     # a source's place(s)
        for i, s in enumerate(sources):
            index[id(s)].append(i)
        settings = None if motion is None else motion.detector_for(on_gpu=False, fps=None)

        def report(r):
            progress.close()
            finished[0] += r.frames
            name = shown(source_name(r.source))
            if r.status == "done":
                on = "the host reference" if r.device is None else f"GPU {r.device}"
                rate = f"{r.frames / r.seconds:.1f} frames/s" if r.seconds else "-"
                wrote = f"; masks in {shown(r.out_dir)}" if r.out_dir else ""
                scored = ""
                if r.score is not None:
                    s = r.score
                    scored = (f"; CDnet ground truth: precision {s['precision']:.4f} recall "
                              f"{s['recall']:.4f} F-measure {s['f_measure']:.4f} over "
                              f"{s['frames']} frames")
                resumed = (f"; resumed from its checkpoint at frame {r.resumed_from} after "
                           f"its worker was lost" if r.resumed_from else "")
                print(f"fastmog: {name}: {r.frames} frames in {r.seconds:.3f} s ({rate}) "
                      f"on {on} of worker {r.worker}{wrote}{scored}{resumed}")
                if r.events is not None:
                    events, regions = files[index[id(r.source)].popleft()]
                    print("\n".join(_motion.summary_lines(
                        r.events, settings, None if motion.zones is None
                        else [n for n, _ in motion.zones], r.device is not None,
                        {"events": events, "regions": regions}, source=name)))
                if r.incomplete and args.accept_short:
                    print(f"fastmog: note: {name}: {r.incomplete}; accepted (--accept-short)")
                elif r.incomplete:
                    print(f"fastmog: error: {name}: {r.incomplete}; pass --accept-short to "
                          f"accept it", file=sys.stderr)
            elif r.status == "lost":
                print(f"fastmog: error: {name}: lost: {r.error}", file=sys.stderr)
            else:
                print(f"fastmog: error: {name}: {r.error}", file=sys.stderr)

        started = time.perf_counter()
        results = process_sources(
            sources, client=client, out_dirs=out_dirs, mog2_kwargs=mog2_kwargs(args),
            learning_rate=args.learning_rate, grey=args.grey, frames=args.frames,
            decode=args.decode, batch=args.batch or DEFAULT_BATCH,
            nvdec_sessions=args.nvdec_sessions,
            device_policy="cpu" if args.cpu else "spread",
            checkpoints=args.checkpoint, checkpoint_every=args.checkpoint_every,
            motion=motion, events_paths=None if motion is None else [e for e, _ in files],
            regions_paths=None if motion is None else [r for _, r in files],
            on_result=report, on_progress=show_progress if progress.enabled else None)
        progress.close()
        elapsed = time.perf_counter() - started
    done = [r for r in results if r.status == "done"]
    frames = sum(r.frames for r in done)
    print(f"fastmog: processed {len(done)} of {len(results)} sources, {frames} frames in "
          f"{elapsed:.3f} s: {frames / elapsed:.1f} frames/s in all (cluster start not counted"
          f"{', including writing the masks' if args.out is not None else ''})")
    if len(done) != len(results):
        return EXIT_INCOMPLETE
    if any(r.incomplete for r in done) and not args.accept_short:
        return EXIT_SHORT
    return EXIT_OK

