"""MOG2 on the host: the same per-pixel code as the GPU kernel, numpy in and
numpy out, no streams. It is the reference the GPU is tested against and what
the main job uses where no GPU is usable."""
from ._fastmog import _CpuBackgroundSubtractorMOG2 as BackgroundSubtractorMOG2


def createBackgroundSubtractorMOG2(history=500, varThreshold=16.0, detectShadows=True):
    """OpenCV-style factory: cv2.createBackgroundSubtractorMOG2's signature."""
    return BackgroundSubtractorMOG2(history, varThreshold, detectShadows)


__all__ = ["BackgroundSubtractorMOG2", "createBackgroundSubtractorMOG2"]
