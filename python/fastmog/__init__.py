"""fastmog: MOG2 background subtraction on NVIDIA GPUs.

Every GPU operation takes an explicit, keyword-only ``stream=``; nothing in
fastmog creates a stream or synchronizes the device behind your back.
``import fastmog`` works on machines without a GPU: the first GPU operation
then raises :class:`CudaError` saying why.
"""
from ._fastmog import (
    CudaError,
    Event,
    GpuMat,
    Stream,
    asgpumat,
    cuda_available,
    device_count,
    device_properties,
    empty_cache,
    is_pinned,
    mem_get_info,
    memory_stats,
    pinned_empty,
    pinned_like,
    pinned_zeros,
)
from ._diagnose import diagnose

__version__ = "0.1.0"

__all__ = [
    "CudaError",
    "Event",
    "GpuMat",
    "Stream",
    "asgpumat",
    "cuda_available",
    "device_count",
    "device_properties",
    "diagnose",
    "empty_cache",
    "is_pinned",
    "mem_get_info",
    "memory_stats",
    "pinned_empty",
    "pinned_like",
    "pinned_zeros",
]
