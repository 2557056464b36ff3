"""fastmog: MOG2 background subtraction on NVIDIA GPUs.

Every GPU operation takes an explicit, keyword-only ``stream=``; nothing in
fastmog creates a stream or synchronizes the device behind your back.
``import fastmog`` works on machines without a GPU: the first GPU operation
then raises :class:`CudaError` saying why.

The library is this package; the command line (`python -m fastmog`) and the
several-source runner are the application wing, fastmog.app, which the library
never imports: process_sources, SourceResult and local_client are loaded from
it on first use.
"""
from typing import TYPE_CHECKING

from ._fastmog import (
    BackgroundSubtractorMOG2,
    apply_cameras,
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
    nv12_to_bgr,
    nv21_to_bgr,
    pinned_empty,
    pinned_like,
    pinned_zeros,
)
from ._fastmog import active_timer, nvtx_enabled, set_nvtx
from ._device_pointer import DevicePointer
from ._diagnose import diagnose
from .profiling import CallRecord, Timer, nvtx_range, profile
from ._morphology import morphology
from ._components import connected_components
from ._motion_detector import MotionDetector, update_cameras
from ._pipeline import pipeline
from ._snapshot import load_snapshot, save_snapshot
from .video import DecodeError, VideoFrame, VideoReader
from ._display import Image
from . import cpu

if TYPE_CHECKING:
    from .app._dask import SourceResult, local_client, process_sources

# the library's entry points into the application wing, imported on first use
_FROM_APP = {"process_sources", "SourceResult", "local_client"}


def __getattr__(name):
    if name in _FROM_APP:
        from .app import _dask

        value = getattr(_dask, name)
        globals()[name] = value           # looked up once
        return value
    raise AttributeError(f"module 'fastmog' has no attribute {name!r}")


_DEFAULTS = cpu._DEFAULTS      # from the C parameter table


def createBackgroundSubtractorMOG2(history=_DEFAULTS["history"],
                                   varThreshold=_DEFAULTS["var_threshold"],
                                   detectShadows=_DEFAULTS["detect_shadows"], *, device=None):
    """OpenCV-style factory with cv2.createBackgroundSubtractorMOG2's signature.
    Unlike cv2.cuda, every GPU call on the result still needs stream=."""
    return BackgroundSubtractorMOG2(history, varThreshold, detectShadows, device=device)


__version__ = "0.1.0"

__all__ = [
    "BackgroundSubtractorMOG2",
    "load_snapshot",
    "morphology",
    "connected_components",
    "MotionDetector",
    "update_cameras",
    "save_snapshot",
    "apply_cameras",
    "CallRecord",
    "DecodeError",
    "Image",
    "Timer",
    "VideoFrame",
    "VideoReader",
    "active_timer",
    "nvtx_enabled",
    "nvtx_range",
    "pipeline",
    "process_sources",
    "SourceResult",
    "local_client",
    "profile",
    "set_nvtx",
    "CudaError",
    "DevicePointer",
    "Event",
    "GpuMat",
    "Stream",
    "asgpumat",
    "cpu",
    "createBackgroundSubtractorMOG2",
    "cuda_available",
    "device_count",
    "device_properties",
    "diagnose",
    "empty_cache",
    "is_pinned",
    "mem_get_info",
    "memory_stats",
    "nv12_to_bgr",
    "nv21_to_bgr",
    "pinned_empty",
    "pinned_like",
    "pinned_zeros",
]
