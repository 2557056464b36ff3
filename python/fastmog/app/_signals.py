"""How the main job stops when asked: Ctrl-C (SIGINT), and SIGTERM or SIGHUP,
which schedulers and closing terminals send, all end the run the same way,
keeping what was written and printing the summary; the exit status is
128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP).

While the frame loop hands one mask to its writer and counts it, a signal is
held back to the end of that step, so the frames reported are the frames
written, never one less.
"""
import contextlib
import signal
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
    holding = 0
    pending = None


_state = _State()


def _handler(signum, frame):
    if _state.holding:
        _state.pending = signum
        return
    raise Stopped(signum)


@contextlib.contextmanager
def handled():
    """Turns the stop signals into Stopped for the duration (main thread only;
    elsewhere nothing changes). A signal that was ignored stays ignored."""
    if threading.current_thread() is not threading.main_thread() or _state.installed:
        yield
        return
    # a signal ignored by whoever started us (nohup, a background job) stays ignored
    previous = {s: signal.signal(s, _handler) for s in STOP_SIGNALS
                if signal.getsignal(s) is not signal.SIG_IGN}
    _state.installed = True
    try:
        yield
    finally:
        _state.installed, _state.holding, _state.pending = False, 0, None
        for s, h in previous.items():
            signal.signal(s, h)


@contextlib.contextmanager
def held():
    """A signal that arrives inside is raised at its end (where handled() is on;
    elsewhere nothing changes)."""
    if not _state.installed or threading.current_thread() is not threading.main_thread():
        yield
        return
    _state.holding += 1
    try:
        yield
    finally:
        _state.holding -= 1
    # reached only when the step ended normally: an error inside is not replaced
    if not _state.holding and _state.pending is not None:
        signum, _state.pending = _state.pending, None
        raise Stopped(signum)
