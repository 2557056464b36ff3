"""How the main job takes a stop signal (fastmog.app._signals): never inside
another library's start, never lost in a finaliser, and at once when sent
twice. Each case sends a real SIGINT to this process."""
import signal
import subprocess
import sys
import threading
import types

import pytest

from fastmog.app import _multi, _signals, cli

pytestmark = pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="POSIX signals")


def _ctrl_c():
    """SIGINT to this thread (the main one), as a terminal's Ctrl-C; the
    handler runs at the next bytecode boundary."""
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


def test_a_signal_in_a_held_step_is_raised_at_its_end():
    finished = []
    with _signals.handled():
        with pytest.raises(_signals.Stopped) as stopped:
            with _signals.held():
                _ctrl_c()
                finished.append("the step")
    assert finished == ["the step"]
    assert stopped.value.signum == signal.SIGINT


def test_a_second_signal_ends_a_held_step_at_once():
    finished = []
    with _signals.handled():
        with pytest.raises(_signals.Stopped):
            with _signals.held():
                _ctrl_c()
                _ctrl_c()
                finished.append("the step")
    assert finished == []


def test_a_stop_raised_in_a_finaliser_is_kept_quietly_and_raised_at_the_next_step(capfd):
    class RingsOnDeletion:
        def __del__(self):
            _ctrl_c()
            sum(range(10))              # the handler runs here, in the finaliser

    hook = sys.unraisablehook
    with _signals.handled():
        RingsOnDeletion()               # deleted at once: Python cannot raise from __del__
        with pytest.raises(_signals.Stopped):
            with _signals.held():
                pass
    assert "Exception ignored" not in capfd.readouterr().err
    assert sys.unraisablehook is hook


def test_ctrl_c_while_the_cluster_starts_lets_it_start_then_closes_it(monkeypatch, capsys):
    """The Dask cluster's start runs to its end (a KeyboardInterrupt inside it
    once left CPython's import lock held and the cluster's thread waiting
    forever); then the run stops with the cluster closed."""
    log = []

    class Cluster:
        def __enter__(self):
            log.append("entered")
            return self

        def __exit__(self, *exc):
            log.append("closed")

    def client(args):
        _ctrl_c()
        sum(range(10))                  # where the handler would raise
        log.append("started")
        return Cluster(), "a local cluster"

    def live_workers(client):
        log.append("used")
        return []

    monkeypatch.setattr(_multi, "_client", client)
    monkeypatch.setattr(_multi, "live_workers", live_workers)
    with _signals.handled():
        with pytest.raises(_signals.Stopped):
            _multi._run(types.SimpleNamespace(), [], [], None, [])
    assert log == ["started", "entered", "closed"]


def test_a_stop_after_the_run_reported_exits_with_the_runs_status():
    """Once the run has reported, a Ctrl-C in the interpreter's shutdown (a
    Dask cluster's exit handlers, say) ends the process with the run's own
    status, not with a KeyboardInterrupt."""
    program = ("import signal, time\n"
               "from fastmog.app import _signals\n"
               "with _signals.handled() as ending:\n"
               "    ending.then_exit(3)\n"
               "print('reported', flush=True)\n"
               "signal.raise_signal(signal.SIGINT)\n"
               "time.sleep(30)\n")
    r = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                       timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (3, "reported\n", "")


def test_a_stop_after_a_run_inside_python_is_pythons_again():
    with _signals.handled():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_on_the_built_in_scene_is_one_line(monkeypatch, capsys):
    """No input named, Ctrl-C before the frame loop takes over (while the
    scene renders, say): the run once met it with a TypeError traceback (it
    asked whether a source list it had already replaced was several)."""
    def run(args):
        raise _signals.Stopped(signal.SIGINT)

    monkeypatch.setattr(cli, "run", run)
    assert cli.main(["--cpu"]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == "fastmog: interrupted (Ctrl-C)"
