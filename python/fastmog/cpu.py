"""MOG2 on the host: the same per-pixel code as the GPU kernel, numpy in and
numpy out, no streams. It is the reference the GPU is tested against and what
the main job uses where no GPU is usable."""
from ._fastmog import _HostBackgroundSubtractorMOG2 as BackgroundSubtractorMOG2
from ._fastmog import _mog2_parameters


# the defaults come from the C parameter table, looked up once
_DEFAULTS = {p["name"]: p["default"] for p in _mog2_parameters()}


def createBackgroundSubtractorMOG2(history=_DEFAULTS["history"],
                                   varThreshold=_DEFAULTS["var_threshold"],
                                   detectShadows=_DEFAULTS["detect_shadows"]):
    """OpenCV-style factory: cv2.createBackgroundSubtractorMOG2's signature."""
    return BackgroundSubtractorMOG2(history, varThreshold, detectShadows)


__all__ = ["BackgroundSubtractorMOG2", "createBackgroundSubtractorMOG2"]
