"""The profile of a pipeline: the per-call timer and its report (_timer), the
analysis that charges waits to their root cause and names what bounds the run
(_analysis), the ceilings, event latency and NVML measured on the machine
(_probes), and the notebook and trace views (_view)."""
from ._timer import CallRecord, Timer, nvtx_range, profile, sampling_nvml

__all__ = ["CallRecord", "Timer", "nvtx_range", "profile", "sampling_nvml"]
