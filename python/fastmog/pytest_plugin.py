"""pytest plugin of fastmog (entry point ``pytest11``: pytest loads it wherever
fastmog is installed; ``-p fastmog.pytest_plugin`` loads it from a source
checkout, ``-p no:fastmog`` turns it off). docs/pytest_plugin.md shows its use.

- The ``gpu`` marker is registered here, so ``@pytest.mark.gpu`` passes
  ``--strict-markers`` in any project. Where CUDA cannot be used, tests marked
  ``gpu`` are skipped with the reason, unless the project declares a ``gpu``
  marker of its own (in its ini file): then the marker, and when to skip it,
  are the project's (fastmog's own tests/conftest.py skips them itself).
- The ``gpu_benchmark`` fixture (where pytest-benchmark is installed):
  ``gpu_benchmark(fn, *args)`` runs like pytest-benchmark's ``benchmark``, but
  times every round under a fastmog Timer in sync mode, so the host time
  includes the GPU work it caused, and records the GPU milliseconds per round
  (from CUDA events) in ``extra_info`` and in a summary printed after the
  benchmark table; rounds that queued no GPU work say "no GPU work" there
  (``None`` in ``extra_info``). Tests that use it are skipped with the reason
  where CUDA cannot be used.
"""
import statistics

import pytest

try:
    import pytest_benchmark  # noqa: F401
except ImportError:  # pragma: no cover - the fixture is not defined
    pytest_benchmark = None  # type: ignore[assignment]

_RESULTS_KEY = "fastmog_gpu_benchmarks"
_OWNS_GPU_MARKER = "fastmog_owns_gpu_marker"
GPU_MARKER = "gpu: needs a usable CUDA GPU (skipped with the reason where there is none)"
GPU_FIXTURES = ("gpu_benchmark",)


def no_gpu_reason():
    """Why GPU tests cannot run here, or None where CUDA is usable."""
    import fastmog

    if fastmog.cuda_available():
        return None
    status, text = fastmog._fastmog._cuda_status()
    return f"needs a CUDA GPU: {status} ({text})"


def pytest_configure(config):
    declared = any(line.split(":", 1)[0].strip() == "gpu" for line in config.getini("markers"))
    config.stash[_OWNS_GPU_MARKER] = not declared
    if not declared:
        config.addinivalue_line("markers", GPU_MARKER)


@pytest.hookimpl(trylast=True)  # after the project's conftest hooks
def pytest_collection_modifyitems(config, items):
    owns_marker = config.stash.get(_OWNS_GPU_MARKER, False)
    needs_gpu = [item for item in items
                 if any(f in getattr(item, "fixturenames", ()) for f in GPU_FIXTURES)
                 or (owns_marker and item.get_closest_marker("gpu") is not None)]
    reason = no_gpu_reason() if needs_gpu else None
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in needs_gpu:
        if item.get_closest_marker("skip") is None:  # one skip, not one per plugin
            item.add_marker(skip)


def _summary_lines(results):
    """The GPU-time table printed after pytest-benchmark's."""
    lines = [f"{'Name':<60} {'Min (ms)':>10} {'Median':>10} {'Mean':>10} {'Max':>10}"]
    for name, info in results:
        if info["gpu_ms_min"] is None:
            lines.append(f"{name:<60} {'no GPU work':>10}")
        else:
            lines.append(f"{name:<60} {info['gpu_ms_min']:>10.4f} {info['gpu_ms_median']:>10.4f} "
                         f"{info['gpu_ms_mean']:>10.4f} {info['gpu_ms_max']:>10.4f}")
    return lines


def _round_info(gpu_ms_per_round):
    """extra_info of the rounds: each round's list of GPU milliseconds, one per
    fastmog call that queued GPU work. None, not 0, where no round had any."""
    info = {"gpu_rounds": len(gpu_ms_per_round)}
    if not any(gpu_ms_per_round):
        return dict(info, gpu_ms_mean=None, gpu_ms_median=None, gpu_ms_min=None, gpu_ms_max=None)
    per_round = [sum(ms) for ms in gpu_ms_per_round]
    return dict(info, gpu_ms_mean=statistics.fmean(per_round),
                gpu_ms_median=statistics.median(per_round),
                gpu_ms_min=min(per_round), gpu_ms_max=max(per_round))


if pytest_benchmark is not None:

    class GpuBenchmark:
        def __init__(self, benchmark, results):
            self._benchmark = benchmark
            self._results = results
            self.extra_info = benchmark.extra_info

        def _timed(self, fn, sync):
            from .profiling import Timer, profile

            timer = Timer(sync=sync)
            rounds = []

            def one_round(*args, **kwargs):
                start = timer.call_count
                with profile(timer=timer):
                    result = fn(*args, **kwargs)
                rounds.append((start, timer.call_count))
                return result

            return timer, rounds, one_round

        def _finish(self, timer, rounds):
            records = timer.records
            if rounds:
                info = _round_info([[r.gpu_ms for r in records[a:b] if r.gpu_ms is not None]
                                    for a, b in rounds])
                self._benchmark.extra_info.update(info)
                self._results.append((self._benchmark.name, info))

        def __call__(self, fn, *args, sync=True, **kwargs):
            timer, rounds, wrapped = self._timed(fn, sync)
            result = self._benchmark(wrapped, *args, **kwargs)
            self._finish(timer, rounds)
            return result

        def pedantic(self, fn, args=(), kwargs=None, *, sync=True, **options):
            timer, rounds, wrapped = self._timed(fn, sync)
            result = self._benchmark.pedantic(wrapped, args=args, kwargs=kwargs, **options)
            self._finish(timer, rounds)
            return result

    @pytest.fixture
    def gpu_benchmark(benchmark, request):
        """pytest-benchmark's ``benchmark`` with GPU time per round beside the
        host time (sync mode: each fastmog call waits for its own stream).
        Skips the test, with the reason, where CUDA cannot be used."""
        reason = no_gpu_reason()
        if reason is not None:  # requested by name at run time: not seen at collection
            pytest.skip(reason)
        results = request.config.stash.setdefault(_RESULTS_KEY, [])
        return GpuBenchmark(benchmark, results)

    def pytest_benchmark_update_machine_info(config, machine_info):
        import fastmog

        gpus = []
        if fastmog.cuda_available():
            runtime, driver = fastmog._fastmog._versions()
            for d in range(fastmog.device_count()):
                p = fastmog.device_properties(d)
                gpus.append({"name": p["name"], "compute_capability": p["compute_capability"],
                             "driver_cuda_version": driver, "runtime_version": runtime})
        machine_info["fastmog_gpus"] = gpus

    def pytest_terminal_summary(terminalreporter, exitstatus, config):
        results = config.stash.get(_RESULTS_KEY, [])
        if not results:
            return
        terminalreporter.write_sep("-", "fastmog GPU time per round (CUDA events)")
        for line in _summary_lines(results):
            terminalreporter.write_line(line)
