"""Many sources on a Dask cluster: each source is processed in order by one
subtractor on one worker, each worker on its own GPU (or the host reference
where it has none), and a worker lost mid-run is reported with its source.

Design: a whole source is one task (`client.submit`), pinned to one worker
(`workers=[address]`, `allow_other_workers=False`); the subtractor lives inside
that task, so frame order and model state never leave one process. The client
hands out one source per worker at a time and the next one when a worker is
free, so sources of different lengths balance and a lost worker held exactly
one source. A pinned task is never moved to another worker by the scheduler,
so a source is never silently restarted elsewhere: the scheduler's
"remove-worker" event names the worker and its tasks, and the client reports
the source as lost (a task's own end, KilledWorker or cancelled, says so too;
the client's cached worker list never does: it can be momentarily empty). (A Dask actor would pin the
subtractor too, but would add a round trip per frame or a second protocol for
the same thing; a task that owns the whole source needs neither.)

On the worker a source is opened by the command line's own openers
(_sources, with the options a Job carries) and run by its one frame loop
(_loop), so every option means the same in both places.

Each worker gets a slot, the lowest number no other live worker of its host
holds; on the worker the slot picks the GPU (`slot % device_count()`), so N
workers of one host spread over its GPUs, and a restarted worker takes the
slot of the one it replaces.
"""
import asyncio
import collections
import dataclasses
import hashlib
import inspect
import logging
import numbers
import os
import pathlib
import time
import warnings

import numpy as np

from .. import _fastmog, cpu
from . import _checkpoint, _checks, _loop, _motion, _sources, _writers
from ._errors import UserError

DEVICE_POLICIES = ("spread", "first", "cpu")
NO_WORKER_TIMEOUT = 60.0     # seconds without any worker before the rest is given up
POLL = 0.25                  # seconds between looks at the cluster while sources run


@dataclasses.dataclass
class SourceResult:
    """What became of one source.

    status: "done", "failed" (the source could not be processed: `error` says
    why) or "lost" (the worker holding it left the cluster mid-run).
    digest: SHA-256 (hex) of the masks' bytes, frame after frame (each an
    H x W uint8 array in row order), so a run elsewhere can be compared;
    None when the masks never left the GPU (motion only, no out_dir).
    seconds: time on the worker from the first frame to the last mask.
    device: the CUDA device it ran on, or None for the host reference.
    incomplete: for a "done" video that ended before the frame count its
    container announces, or misses frames in the middle, what is missing
    (its masks are those of the frames read); None when whole.
    score: for a CDnet sequence folder, its masks scored against its own
    groundtruth/ as the main job does ("precision", "recall", "f_measure",
    "frames" scored); None for other sources.
    resumed_from: with checkpoints, the frames a re-run after a lost worker
    skipped, its checkpoint's model having seen them (0: not resumed);
    frames, digest and seconds are then the re-run's own.
    events: with motion, the source's motion events (fastmog.motion.Event,
    ended at its last frame); None without."""

    source: object
    status: str
    frames: int = 0
    shape: tuple | None = None
    digest: str | None = None
    out_dir: str | None = None
    worker: str | None = None
    device: int | None = None
    seconds: float | None = None
    error: str | None = None
    score: dict | None = None
    incomplete: str | None = None
    resumed_from: int = 0
    events: list | None = None


@dataclasses.dataclass(frozen=True)
class Job:
    """What every worker is told, besides its source: the subtractor's
    parameters, the learning rate, where it runs (a device policy) and how
    its source is read."""

    mog2_kwargs: dict
    learning_rate: float
    device_policy: str
    read: _sources.SourceOptions
    progress: bool = False      # report frames done as "fastmog-progress" events
    batch: int | str = 1        # host frames per MOG2 launch on a GPU, or "auto" (--batch)
    checkpoint_every: int | None = None   # frames between a source's checkpoints
    motion: _motion.MotionOptions | None = None   # each source's motion step


def source_name(source):
    """How a source is named in reports: its path, or the callable's name."""
    if isinstance(source, (str, bytes, os.PathLike)):
        return os.fsdecode(source)
    return getattr(source, "__qualname__", None) or getattr(source, "__name__", None) \
        or repr(source)


def process_sources(sources, *, client=None, workers=None, out_dirs=None, mog2_kwargs=None,
                    learning_rate=-1.0, grey=False, frames=None, decode="auto",
                    batch=1, nvdec_sessions=1, device_policy="spread", on_result=None,
                    on_progress=None, checkpoints=None, checkpoint_every=None, retries=2,
                    motion=None, events_paths=None, regions_paths=None):
    """Processes every source on a Dask cluster and returns one SourceResult
    per source, in the order given.

    sources: paths of videos or frame folders (read by the workers: they must
    see the same files), or picklable callables that return an iterable of
    frames when called on the worker.
    client: a distributed.Client; None starts a local cluster of `workers`
    processes (one thread each; default: one per GPU here, else two) and
    closes it afterwards. workers is only for that local cluster.
    out_dirs: None, or one folder (or None) per source for its PNG masks;
    a folder's old mask_NNNNNN.png files are replaced, nothing else is
    touched (check folders first: the main job refuses used ones).
    mog2_kwargs: BackgroundSubtractorMOG2 parameters (checked here first).
    grey, frames, decode, batch, nvdec_sessions: as the main job's --grey,
    --frames, --decode, --batch (1 here unless given; "auto" as the main job's
    default) and --nvdec-sessions.
    device_policy: "spread" (a worker's slot modulo its GPU count), "first"
    (device 0: for clusters that give each worker its own CUDA_VISIBLE_DEVICES)
    or "cpu" (the host reference everywhere).
    on_result: called with each SourceResult as soon as it is known.
    on_progress: called on the client, a few times a second while sources
    run, with {index of the source: frames done so far} of those running
    (the workers report their counts as they go).
    checkpoints, checkpoint_every: a folder (which the workers see) where
    each source's model is checkpointed every `checkpoint_every` frames, as
    the main job's --checkpoint does; a source whose worker is lost is then
    run again, up to `retries` times, on another worker, resuming from its
    last checkpoint (SourceResult.resumed_from). Checkpoints that an earlier
    call left there for these sources are removed first: a call starts from
    scratch. Without checkpoints a lost source is reported as lost.
    motion: None, or fastmog.MotionDetector's keyword arguments (fps aside:
    each source has its own): every source's masks then go through a
    motion detector on its worker (on its GPU, where the masks stay unless
    out_dirs asks for them, or the host reference's), and SourceResult.events
    holds its events. events_paths, regions_paths: None, or one path (or
    None) per source for its events and per-frame regions as JSON lines, as
    the main job's --events and --regions write them. Motion cannot be
    combined with checkpoints: a re-run would restart its events.
    """
    sources = list(sources)
    if not sources:
        raise ValueError("sources is empty: give at least one path or callable")
    for s in sources:
        if not (isinstance(s, (str, bytes, os.PathLike)) or callable(s)):
            raise TypeError(f"a source must be a path or a callable returning frames, "
                            f"not {type(s).__name__}")
    if out_dirs is None:
        out_dirs = [None] * len(sources)
    out_dirs = [None if d is None else os.fsdecode(d) for d in out_dirs]
    if len(out_dirs) != len(sources):
        raise ValueError(f"out_dirs has {len(out_dirs)} entries for {len(sources)} sources")
    motion, files = _motion_options(motion, events_paths, regions_paths, len(sources),
                                    checkpoints)
    if device_policy not in DEVICE_POLICIES:
        raise ValueError(f"device_policy must be one of {', '.join(DEVICE_POLICIES)}, "
                         f"not {device_policy!r}")
    if decode not in ("auto", "nvdec", "cpu"):
        raise ValueError(f"decode must be 'auto', 'nvdec' or 'cpu', not {decode!r}")
    for name, value in (("frames", frames), ("batch", None if batch == "auto" else batch),
                        ("nvdec_sessions", nvdec_sessions)):
        if value is not None and (isinstance(value, bool)
                                  or not isinstance(value, numbers.Integral) or value < 1):
            raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")
    if learning_rate > 1 or learning_rate != learning_rate:
        raise ValueError(f"learning_rate must be at most 1 (negative: automatic), "
                         f"got {learning_rate}")
    mog2_kwargs = dict(mog2_kwargs or {})
    cpu.BackgroundSubtractorMOG2(**mog2_kwargs)   # bad parameters fail here, not 8 times
    paths = _checkpoint_paths(sources, checkpoints, checkpoint_every, retries)
    job = Job(mog2_kwargs, float(learning_rate), device_policy,
              _sources.SourceOptions(frames=frames, grey=bool(grey), decode=decode,
                                     nvdec_sessions=nvdec_sessions),
              progress=on_progress is not None, batch=batch,
              checkpoint_every=checkpoint_every if checkpoints is not None else None,
              motion=motion)
    tries = 1 + (retries if checkpoints is not None else 0)
    if client is not None:
        if workers is not None:
            raise ValueError("workers= sizes a local cluster; with client= the cluster is "
                             "the client's")
        return _schedule(client, sources, out_dirs, paths, files, tries, job, on_result,
                         on_progress)
    with local_client(workers) as own:
        return _schedule(own, sources, out_dirs, paths, files, tries, job, on_result,
                         on_progress)


def _motion_options(motion, events_paths, regions_paths, n, checkpoints):
    """The motion step's options (checked) and each source's (events,
    regions) files."""
    if motion is None:
        if events_paths is not None or regions_paths is not None:
            raise ValueError("events_paths and regions_paths are the motion step's files; "
                             "give motion too")
        return None, [(None, None)] * n
    if checkpoints is not None:
        raise ValueError("motion cannot be combined with checkpoints: a source re-run from "
                         "its checkpoint would restart its events")
    if not isinstance(motion, _motion.MotionOptions):
        if not isinstance(motion, dict):
            raise TypeError(f"motion must be None or a dict of MotionDetector's keyword "
                            f"arguments, not {type(motion).__name__}")
        motion = _motion.MotionOptions.from_kwargs(motion)
    lists = []
    for name, paths in (("events_paths", events_paths), ("regions_paths", regions_paths)):
        paths = [None] * n if paths is None else list(paths)
        if len(paths) != n:
            raise ValueError(f"{name} has {len(paths)} entries for {n} sources")
        lists.append([None if p is None else os.fsdecode(p) for p in paths])
    return motion, list(zip(*lists))


def _checkpoint_paths(sources, folder, every, retries):
    """Each source's checkpoint file in `folder` (None each without one),
    the folder made and the files an earlier call left removed."""
    if folder is None:
        if every is not None:
            raise ValueError("checkpoint_every says how often to write checkpoints; no "
                             "checkpoints folder is given")
        return [None] * len(sources)
    if every is None or isinstance(every, bool) or not isinstance(every, numbers.Integral) \
            or every < 1:
        raise ValueError(f"checkpoint_every must be a whole number of frames, at least 1, "
                         f"with checkpoints; got {every!r}")
    if isinstance(retries, bool) or not isinstance(retries, numbers.Integral) or retries < 0:
        raise ValueError(f"retries must be a whole number, at least 0, got {retries!r}")
    folder = os.fsdecode(folder)
    os.makedirs(folder, exist_ok=True)
    paths = [os.path.join(folder, f"{name}.npz") for name in unique_names(sources)]
    for path in paths:
        if os.path.lexists(path):
            os.unlink(path)
    return paths


class local_client:
    """A LocalCluster of `n` worker processes with one thread each, and its
    client; closed on exit. Needs dask[distributed] (fastmog[dask])."""

    def __init__(self, n=None):
        try:
            import distributed
        except ImportError:
            raise ImportError("Dask is not installed: pip install 'fastmog[dask]'") from None
        if n is None:
            n = _fastmog.device_count() if _fastmog.cuda_available() else 2
        if n < 1:
            raise ValueError(f"workers must be at least 1, got {n}")
        # workers are processes: one subtractor, one GIL and (GPU) one device each
        with warnings.catch_warnings():
            # without a dashboard the scheduler still serves HTTP, by default on
            # 8787, and warns when another cluster has it: no matter here
            warnings.filterwarnings("ignore", message=r"Port \d+ is already in use")
            self.cluster = distributed.LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                silence_logs=logging.ERROR)
        try:
            self.client = distributed.Client(self.cluster)
        except BaseException:
            self.cluster.close()
            raise

    def __enter__(self):
        return self.client

    def __exit__(self, *exc):
        self.client.close()
        self.cluster.close()


def live_workers(client):
    """{address: host} of the workers the scheduler knows now."""
    try:
        info = client.scheduler_info(n_workers=-1)
    except TypeError:                       # before distributed 2025.4: every worker
        info = client.scheduler_info()
    return {addr: w.get("host", addr) for addr, w in info.get("workers", {}).items()}


class _Removals:
    """The workers the scheduler removed while sources ran, from its own
    "remove-worker" events (topic "all"), and the keys of the tasks they held.

    Loss is decided from these events and from each task's future, never from
    client.scheduler_info(): that is a cache which distributed's periodic
    refresh can overwrite with an empty worker list while every worker is
    busy and well. A handler the client already had for "all" still gets
    every event, and is put back on exit."""

    TOPIC = "all"

    def __init__(self, client):
        self.client, self.workers, self.keys = client, set(), set()
        handlers = getattr(client, "_event_handlers", {})
        self.previous = handlers.get(self.TOPIC) if isinstance(handlers, dict) else None

    def __call__(self, event):
        _, msg = event
        if isinstance(msg, dict) and msg.get("action") == "remove-worker":
            self.keys.update(msg.get("processing-tasks") or ())
            self.workers.add(msg.get("worker"))
        if self.previous is not None:
            result = self.previous(event)
            if inspect.isawaitable(result):  # a coroutine handler: run on this (the client's) loop
                asyncio.ensure_future(result)

    def lost(self, future, worker):
        return worker in self.workers or future.key in self.keys

    def __enter__(self):
        # sent before any task: the scheduler registers it before their events
        self.client.subscribe_topic(self.TOPIC, self)
        return self

    def __exit__(self, *exc):
        try:
            if self.previous is not None:
                self.client.subscribe_topic(self.TOPIC, self.previous)
            else:
                self.client.unsubscribe_topic(self.TOPIC)
        except Exception:                   # a client already closed has nothing to undo
            pass


PROGRESS_TOPIC = "fastmog-progress"
PROGRESS_EVERY = 0.2          # seconds between a worker's progress events


class _Counts:
    """Frames done per task key, from the workers' progress events."""

    def __init__(self, client, wanted):
        self.client, self.wanted, self.frames = client, wanted, {}

    def __call__(self, event):
        _, msg = event
        if isinstance(msg, dict) and "key" in msg:
            self.frames[msg["key"]] = msg.get("frames", 0)

    def __enter__(self):
        if self.wanted:
            self.client.subscribe_topic(PROGRESS_TOPIC, self)
        return self

    def __exit__(self, *exc):
        if self.wanted:
            try:
                self.client.unsubscribe_topic(PROGRESS_TOPIC)
            except Exception:               # a client already closed has nothing to undo
                pass


def _schedule(client, sources, out_dirs, paths, files, tries, job, on_result,
              on_progress=None):
    with _Removals(client) as removed, _Counts(client, on_progress is not None) as counts:
        return _run_all(client, sources, out_dirs, paths, files, tries, job, on_result,
                        removed, on_progress, counts)


def _run_all(client, sources, out_dirs, paths, files, tries, job, on_result, removed,
             on_progress, counts):
    from distributed import wait

    results = [None] * len(sources)
    pending = collections.deque(range(len(sources)))
    attempts = [0] * len(sources)
    running = {}                       # future -> (index, worker)
    slots = {}                         # worker -> (host, slot), until it is removed
    without_workers = None

    def settle(i, result):
        results[i] = result
        if on_result is not None:
            on_result(result)

    while pending or running:
        for w in [w for w in slots if w in removed.workers]:
            del slots[w]
        for future, (i, w) in list(running.items()):
            if removed.lost(future, w) and not future.done():
                # pinned: the scheduler will not move it, so it is given up here
                # and, with a checkpoint to resume from, run again elsewhere
                future.cancel()
                del running[future]
                if attempts[i] < tries:
                    pending.appendleft(i)
                    continue
                settle(i, SourceResult(sources[i], "lost", out_dir=out_dirs[i], worker=w,
                                       error=f"worker {w} was lost while processing it"
                                       + (f" ({tries} times)" if tries > 1 else "")))
        # where to submit only: a worker missing from this (cached) list is
        # merely not given a source now
        live = {w: host for w, host in live_workers(client).items()
                if w not in removed.workers}
        busy = {w for _, w in running.values()}
        for w in sorted(live):
            if w not in slots:
                taken = {slot for host, slot in slots.values() if host == live[w]}
                slots[w] = (live[w], min(set(range(len(taken) + 1)) - taken))
            if pending and w not in busy:
                i = pending.popleft()
                attempts[i] += 1
                future = client.submit(_run_source, sources[i], out_dirs[i], slots[w][1], job,
                                       paths[i], files[i], workers=[w],
                                       allow_other_workers=False,
                                       pure=False,
                                       key=f"fastmog-source-{i}-{os.urandom(4).hex()}")
                running[future] = (i, w)
        if not live and pending and not running:
            without_workers = without_workers or time.monotonic()
            if time.monotonic() - without_workers > NO_WORKER_TIMEOUT:
                while pending:
                    i = pending.popleft()
                    settle(i, SourceResult(sources[i], "failed", out_dir=out_dirs[i],
                                           error="no worker joined the cluster in "
                                                 f"{NO_WORKER_TIMEOUT:.0f} s"))
                break
        else:
            without_workers = None
        if not running:
            time.sleep(POLL)
            continue
        try:
            wait(list(running), timeout=POLL, return_when="FIRST_COMPLETED")
        except TimeoutError:
            pass
        for future in [f for f in running if f.done()]:
            i, w = running.pop(future)
            result = _collect(future, sources[i], out_dirs[i], w)
            if result.status == "lost" and attempts[i] < tries:
                pending.appendleft(i)
                continue
            settle(i, result)
        if on_progress is not None and running:
            on_progress({i: counts.frames.get(f.key, 0) for f, (i, _) in running.items()})
    return results


def _collect(future, source, out_dir, worker):
    """The SourceResult of a finished task."""
    if future.status == "finished":
        try:
            return SourceResult(source, "done", worker=worker, **future.result(timeout=60))
        except Exception as e:       # the result went with its worker before it was fetched
            return SourceResult(source, "lost", out_dir=out_dir, worker=worker,
                                error=f"worker {worker} was lost before its result was "
                                      f"fetched ({type(e).__name__})")
    if future.status == "cancelled":
        return SourceResult(source, "lost", out_dir=out_dir, worker=worker,
                            error=f"the task on worker {worker} was cancelled")
    err = future.exception()
    if type(err).__name__ == "KilledWorker":
        return SourceResult(source, "lost", out_dir=out_dir, worker=worker,
                            error=f"worker {worker} was lost while processing it")
    text = str(err) if isinstance(err, (UserError, ValueError, TypeError)) \
        else f"{type(err).__name__}: {err}"
    return SourceResult(source, "failed", out_dir=out_dir, worker=worker, error=text)


# ---- on the worker -----------------------------------------------------------------------


def _run_source(source, out_dir, slot, job, checkpoint=None, files=(None, None)):
    """One whole source, in order, by one subtractor in this worker process,
    through the main job's own opener and frame loop. Returns the fields of
    its SourceResult (small: no masks travel back). checkpoint: the source's
    checkpoint file (None: none); a rerun finds the one its lost worker
    wrote, and resumes from it. files: the motion step's (events, regions)
    files, with job.motion."""
    policy = job.device_policy
    on_gpu = policy != "cpu" and _fastmog.cuda_available()
    device = (0 if policy == "first" else slot % _fastmog.device_count()) if on_gpu else None
    resumed = (_checkpoint.Resumed(checkpoint) if checkpoint is not None
               and os.path.exists(checkpoint) else None)
    first = 0 if resumed is None else resumed.frames
    sub = _loop.subtractor(job.mog2_kwargs, device, on_gpu) if resumed is None else None
    # the client checked the folder; a rerun's stale masks are replaced (from
    # its checkpoint's frame on, when it resumes)
    writer = (_writers.PngSequence(out_dir, True, first) if out_dir is not None
              else _writers.NoMasks())
    streams = _loop.open_streams(device, on_gpu)
    truth = opened = motion = None
    try:
        if isinstance(source, (str, bytes, os.PathLike)):
            found = _sources.find_input(os.fsdecode(source))
            opened = _sources.open_source(
                found, job.read, on_gpu=on_gpu,
                stream=streams[1] if on_gpu else None, timer=None,
                check_memory=_checks.memory_check(
                    on_gpu, device, sub.n_mixtures if sub is not None
                    else resumed.snapshot["geometry"]["n_mixtures"]))
            if found.cdnet is not None:
                # a CDnet sequence is scored against its own ground truth, as alone
                try:
                    truth = _checks.open_ground_truth(found.cdnet, opened.shape,
                                                      opened.numbers)
                except BaseException:
                    opened.close()
                    raise
        else:
            opened = _sources.open_callable(source, job.read.frames)
        if resumed is not None:
            if opened.shape is not None:
                resumed.check_source(opened.shape, None)
            sub = resumed.subtractor(on_gpu, streams[1] if on_gpu else None)
        if job.motion is not None:
            motion = _motion.MotionStep(job.motion, opened.shape, opened.fps, first,
                                        on_gpu=on_gpu, events=files[0], regions=files[1])
    except BaseException:
        if opened is not None:
            opened.close()
        for s in streams:
            s.close()
        raise
    checkpoints = None
    if checkpoint is not None:
        checkpoints = _checkpoint.Checkpoints(checkpoint, job.checkpoint_every, first)
        checkpoints.bind(sub, streams[1] if on_gpu else None)
    digest, shapes = hashlib.sha256(), []
    numbers = opened.numbers
    # the GPU motion step takes the masks where they lie: they come to the
    # host only for what reads them there
    on_device = motion is not None and motion.on_gpu
    download = not on_device or out_dir is not None or truth is not None

    def on_device_mask(index, mask, stream):
        shapes[:] = [tuple(mask.shape)]
        motion.on_device_mask(index, mask, stream)

    def seen(index, mask):
        if mask is None:                    # it stayed on the GPU
            return
        digest.update(np.ascontiguousarray(mask).data)
        shapes[:] = [mask.shape]
        if motion is not None and not on_device:
            motion.on_mask(index, mask)
        at = first + index
        if truth is not None:
            number = numbers[at] if numbers else None
            truth.add(number if number is not None else at, mask)
        if checkpoints is not None:
            checkpoints.after(index + 1)

    try:
        done = _loop.process(sub, opened, writer, streams=streams,
                             learning_rate=job.learning_rate, batch=job.batch, on_mask=seen,
                             on_device_mask=on_device_mask if on_device else None,
                             download=download,
                             progress=_Reporter() if job.progress else None, skip=first,
                             segment=job.checkpoint_every)
    finally:
        if motion is not None:
            motion.close()          # its open events end at the last frame
    if done.interrupted:
        raise KeyboardInterrupt
    score = None
    if truth is not None:
        s = truth.score
        score = {"precision": s.precision, "recall": s.recall, "f_measure": s.f_measure,
                 "frames": s.frames}
    return {"frames": done.frames, "shape": shapes[0] if shapes else None,
            "digest": digest.hexdigest() if download else None, "out_dir": out_dir,
            "device": device, "seconds": done.seconds, "score": score,
            "incomplete": opened.incomplete(), "resumed_from": first,
            "events": None if motion is None else list(motion.detector.events)}


class _Reporter:
    """The frame loop's progress on a worker, sent to the client as events of
    PROGRESS_TOPIC, at most every PROGRESS_EVERY seconds."""

    def __init__(self):
        from distributed import get_worker

        self.worker = get_worker()
        self.key = self.worker.get_current_task()
        self.last = 0.0

    def update(self, done):
        now = time.monotonic()
        if now - self.last >= PROGRESS_EVERY:
            self.last = now
            self.worker.log_event(PROGRESS_TOPIC, {"key": self.key, "frames": done})

    def close(self):
        pass


def unique_names(sources):
    """One folder name per source, from its file or folder name (a video's
    without its suffix; a CDnet sequence's input/ by the sequence), made unique
    with -2, -3, ... in order."""
    names, seen = [], set()
    for s in sources:
        path = pathlib.Path(os.fsdecode(s)) if isinstance(s, (str, bytes, os.PathLike)) \
            else pathlib.Path(source_name(s))
        if path.name == "input" and (path.parent / "groundtruth").is_dir():
            path = path.parent
        name = (path.stem if path.suffix and not path.is_dir() else path.name) or "source"
        name = name.replace(os.sep, "_").lstrip(".") or "source"
        candidate, n = name, 1
        while candidate in seen:
            n += 1
            candidate = f"{name}-{n}"
        seen.add(candidate)
        names.append(candidate)
    return names
