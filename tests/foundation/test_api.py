"""What works on every machine, GPU or not: import, discovery, argument
validation that happens before any CUDA call, and no-GPU behaviour."""
import io

import numpy as np
import pytest

import fastmog
from conftest import GPU_OK


def test_import_exposes_the_api():
    for name in ("Stream", "Event", "GpuMat", "CudaError", "asgpumat", "pinned_empty",
                 "pinned_zeros", "pinned_like", "is_pinned", "cuda_available",
                 "device_count", "diagnose", "empty_cache", "memory_stats"):
        assert hasattr(fastmog, name), name
    assert issubclass(fastmog.CudaError, RuntimeError)


def test_discovery_is_consistent():
    assert isinstance(fastmog.cuda_available(), bool)
    count = fastmog.device_count()
    assert isinstance(count, int) and count >= 0
    assert fastmog.cuda_available() == (count > 0)


def test_diagnose_reports_devices_or_reason():
    buf = io.StringIO()
    report = fastmog.diagnose(file=buf)
    text = buf.getvalue()
    runtime = fastmog._fastmog._versions()[0]
    assert f"CUDA runtime {runtime // 1000}." in text
    if GPU_OK:
        assert report["devices"] and "compute capability" in text
    else:
        assert report["devices"] == []
        assert "No usable GPU" in text and report["reason"]


def test_types_are_final():
    with pytest.raises(TypeError):
        type("Sub", (fastmog.GpuMat,), {})


@pytest.mark.parametrize("shape, error", [
    ((4,), ValueError), ((4, 4, 2), ValueError), ((4, 4, 5), ValueError),
    ((0, 4), ValueError), ((4, -1), ValueError), ((4, 4, 3, 1), ValueError),
    ("ab", TypeError), ((4.0, 4), TypeError), (5, TypeError),
])
def test_gpumat_rejects_bad_shapes_before_touching_cuda(shape, error):
    with pytest.raises(error):
        fastmog.GpuMat(shape)


@pytest.mark.parametrize("dtype", [np.int64, np.complex64, np.bool_, object, ">f4", np.float16])
def test_gpumat_rejects_unsupported_dtypes(dtype):
    with pytest.raises(TypeError, match="not supported"):
        fastmog.GpuMat((4, 4), dtype)


def test_stream_is_required_with_a_helpful_message():
    a = np.ones((4, 4), np.uint8)
    for call in (lambda: fastmog.GpuMat.from_array(a),
                 lambda: fastmog.GpuMat.from_array(a, stream=None),
                 lambda: fastmog.asgpumat(object())):
        with pytest.raises(TypeError, match=r"stream= is required.*fastmog\.Stream\(\).*Stream\.null\(\)"):
            call()


def test_foreign_stream_objects_are_refused_with_advice():
    a = np.ones((4, 4), np.uint8)
    with pytest.raises(TypeError, match=r"must be a fastmog\.Stream.*Stream\.wrap"):
        fastmog.GpuMat.from_array(a, stream=12345)


def test_stream_arguments_are_keyword_only():
    with pytest.raises(TypeError):
        fastmog.Stream(0)


def test_asgpumat_refuses_host_arrays():
    with pytest.raises(TypeError, match="from_array"):
        fastmog.asgpumat(np.zeros((2, 2), np.uint8))


def test_is_pinned_on_pageable_memory_is_false():
    assert fastmog.is_pinned(np.ones((8, 8), np.uint8)) is False
    assert fastmog.is_pinned(np.ones(0)) is False
    with pytest.raises(TypeError):
        fastmog.is_pinned([1, 2, 3])


def test_memory_stats_shape():
    stats = fastmog.memory_stats()
    for key in ("pinned_in_use", "pinned_cached", "pinned_host_allocs", "pending_releases",
                "device_pools"):
        assert key in stats


@pytest.mark.skipif(GPU_OK, reason="checks behaviour on machines without a GPU")
def test_without_gpu_first_operation_raises_actionable_cuda_error():
    for call in (fastmog.Stream, lambda: fastmog.Stream.null(), lambda: fastmog.Event(),
                 lambda: fastmog.GpuMat((4, 4)), lambda: fastmog.pinned_empty((4, 4)),
                 lambda: fastmog.mem_get_info(), lambda: fastmog.device_properties(0)):
        with pytest.raises(fastmog.CudaError) as info:
            call()
        err = info.value
        assert err.name.startswith("cudaError")
        assert isinstance(err.code, int) and err.code != 0
        assert err.operation
        assert "diagnose" in str(err)
    # and nothing was left half-made
    assert fastmog.memory_stats()["pinned_in_use"] == 0


@pytest.mark.parametrize("runtime, driver, says", [
    (13000, 12040, ["CUDA 13.0", "580.65.06", "supports CUDA 12.4", "pip install fastmog-cu12"]),
    (13000, 0, ["580.65.06", "no NVIDIA driver is loaded"]),
    (12080, 11080, ["525.60.13", "supports CUDA 11.8", "update the driver"]),
])
def test_an_old_driver_is_told_which_build_fits(runtime, driver, says):
    advice = fastmog._diagnose.driver_advice(runtime, driver)
    for text in says:
        assert text in advice
    if driver >= 12000:
        assert "fastmog-cu12" in advice
    else:
        assert "pip install" not in advice


@pytest.mark.parametrize("runtime, driver", [(13000, 13000), (13000, 13020), (12040, 12020),
                                             (12040, 13000)])
def test_a_driver_new_enough_gets_no_advice(runtime, driver):
    # minor-version compatibility: any driver of the runtime's major runs it
    assert fastmog._diagnose.driver_advice(runtime, driver) == ""


def test_diagnose_names_the_insufficient_driver_and_the_build_for_it(monkeypatch):
    from fastmog import _diagnose
    monkeypatch.setattr(_diagnose._fastmog, "_versions", lambda: (13000, 12020))
    monkeypatch.setattr(_diagnose._fastmog, "_cuda_status",
                        lambda: ("cudaErrorInsufficientDriver", "driver too old"))
    buf = io.StringIO()
    report = fastmog.diagnose(file=buf)
    assert report["driver_needed"] == "580.65.06"
    assert "pip install fastmog-cu12" in report["reason"]
    assert "needs an NVIDIA driver 580.65.06 or newer" in buf.getvalue()
