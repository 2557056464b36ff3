"""How the main job stops when asked: Ctrl-C (SIGINT), and SIGTERM or SIGHUP,
which schedulers and closing terminals send, all end the run the same way,
keeping what was written and printing the summary; the exit status is
128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP).

While the frame loop hands one mask to its writer and counts it, or a Dask
cluster starts, a signal is held back to the end of that step: the frames
reported are the frames written, never one less, and no exception lands inside
another library's start (one raised in the main thread just after it took
CPython's import lock leaves that lock held, and the cluster's own thread then
waits for it forever). A second signal inside such a step ends it at once: a
user who presses Ctrl-C twice means it.

A stop that lands where Python cannot raise it (a finaliser, a weakref
callback: Python would print "Exception ignored" and go on) is kept, quietly,
and raised at the end of the next held step.
"""
import atexit
import contextlib
import os
import signal
import sys
import threading

STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                     if hasattr(signal, name))


class Stopped(KeyboardInterrupt):
    """A stop signal, raised where KeyboardInterrupt would be."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def exit_status(interrupt):
    """128 + the signal's number; Ctrl-C's own KeyboardInterrupt is SIGINT."""
    return 128 + getattr(interrupt, "signum", signal.SIGINT)


def name(interrupt):
    """"Ctrl-C", "SIGTERM", ... for messages."""
    signum = getattr(interrupt, "signum", signal.SIGINT)
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


class _State:
    installed = False
    late = False            # the run has reported and the process is ending
    holding = 0
    pending = None


_state = _State()


def _handler(signum, frame):
    if _state.holding and _state.pending is None:
        _state.pending = signum
        return
    raise Stopped(signum)


def _unraisable(previous):
    def hook(unraisable):
        if isinstance(unraisable.exc_value, Stopped) and _state.installed:
            _state.pending = unraisable.exc_value.signum
            return
        previous(unraisable)
    return hook


class _Ending:
    """What handled() yields: then_exit(status) says the process ends after
    this run, so a stop signal that comes once the run has reported, while
    the interpreter shuts down, exits at once with the run's own status
    instead of a KeyboardInterrupt in its shutdown. The last moments of the
    shutdown (after the exit handlers, where Python itself would reset the
    signals to their defaults) ignore stop signals: see ignore_at_exit."""
    status = None

    def then_exit(self, status):
        self.status = status


def _exit_with(status):
    def handler(signum, frame):
        for out in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                out.flush()
        os._exit(status)
    return handler


def ignore_at_exit():
    """Registered before anything else that has exit handlers (Dask's are
    registered when it is imported), so it runs after them: from there to the
    end, stop signals are ignored rather than reset to their defaults by
    Python's own shutdown and killing a process that has finished."""
    def ignore():
        if _state.late:
            for s in STOP_SIGNALS:
                if signal.getsignal(s) is not signal.SIG_IGN:
                    signal.signal(s, signal.SIG_IGN)
    atexit.register(ignore)


@contextlib.contextmanager
def handled():
    """Turns the stop signals into Stopped for the duration (main thread only;
    elsewhere nothing changes). A signal that was ignored stays ignored."""
    ending = _Ending()
    if threading.current_thread() is not threading.main_thread() or _state.installed:
        yield ending
        return
    # a signal ignored by whoever started us (nohup, a background job) stays ignored
    previous = {s: signal.signal(s, _handler) for s in STOP_SIGNALS
                if signal.getsignal(s) is not signal.SIG_IGN}
    hook = sys.unraisablehook
    sys.unraisablehook = _unraisable(hook)
    _state.installed = True
    try:
        yield ending
    finally:
        _state.installed, _state.holding, _state.pending = False, 0, None
        sys.unraisablehook = hook
        for s, h in previous.items():
            signal.signal(s, h if ending.status is None else _exit_with(ending.status))
        _state.late = ending.status is not None


@contextlib.contextmanager
def held(stop_explains_errors=False):
    """A signal that arrives inside is raised at its end (where handled() is on;
    elsewhere nothing changes). An error inside is not replaced, unless
    stop_explains_errors says a signal that arrived would explain it (the
    same Ctrl-C reaches a starting cluster's worker processes)."""
    if not _state.installed or threading.current_thread() is not threading.main_thread():
        yield
        return
    _state.holding += 1
    try:
        yield
    except Exception:
        if not (stop_explains_errors and _state.pending is not None):
            raise
    finally:
        _state.holding -= 1
    if not _state.holding and _state.pending is not None:
        signum, _state.pending = _state.pending, None
        raise Stopped(signum) from None
