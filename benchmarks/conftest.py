"""Benchmarks need a GPU: without one the whole suite is skipped with the reason."""
import pytest

import fastmog


def pytest_collection_modifyitems(config, items):
    if fastmog.cuda_available():
        return
    status, text = fastmog._fastmog._cuda_status()
    skip = pytest.mark.skip(reason=f"benchmarks need a CUDA GPU: {status} ({text})")
    for item in items:
        item.add_marker(skip)
