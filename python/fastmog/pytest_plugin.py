"""pytest plugin (entry point ``pytest11``): the ``gpu_benchmark`` fixture.

Active only where pytest-benchmark is installed. ``gpu_benchmark(fn, *args)``
runs like pytest-benchmark's ``benchmark``, but times every round under a
fastmog Timer in sync mode, so the host time includes the GPU work it caused,
and records the GPU milliseconds per round (from CUDA events) in
``extra_info`` and in a summary printed after the benchmark table.
"""
import statistics

import pytest

try:
    import pytest_benchmark  # noqa: F401
except ImportError:  # pragma: no cover - the plugin stays inactive
    pytest_benchmark = None  # type: ignore[assignment]

_RESULTS_KEY = "fastmog_gpu_benchmarks"

if pytest_benchmark is not None:

    class GpuBenchmark:
        def __init__(self, benchmark, results):
            self._benchmark = benchmark
            self._results = results
            self.extra_info = benchmark.extra_info

        def _timed(self, fn, sync):
            from ._timing import Timer, profile

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
            per_round = [sum(r.gpu_ms for r in records[a:b] if r.gpu_ms is not None)
                         for a, b in rounds]
            if per_round:
                info = {"gpu_ms_mean": statistics.fmean(per_round),
                        "gpu_ms_median": statistics.median(per_round),
                        "gpu_ms_min": min(per_round), "gpu_ms_max": max(per_round),
                        "gpu_rounds": len(per_round)}
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
        host time (sync mode: each fastmog call waits for its own stream)."""
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
        tr = terminalreporter
        tr.write_sep("-", "fastmog GPU time per round (CUDA events)")
        tr.write_line(f"{'Name':<60} {'Min (ms)':>10} {'Median':>10} {'Mean':>10} {'Max':>10}")
        for name, info in results:
            tr.write_line(f"{name:<60} {info['gpu_ms_min']:>10.4f} {info['gpu_ms_median']:>10.4f} "
                          f"{info['gpu_ms_mean']:>10.4f} {info['gpu_ms_max']:>10.4f}")
