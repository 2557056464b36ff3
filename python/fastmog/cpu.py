"""The host side of fastmog: the same per-pixel code as the GPU kernels,
numpy in and numpy out, no streams. MOG2 here is the reference the GPU is
tested against and what the main job uses where no GPU is usable; the NV12
conversion is cv2.cvtColor's, morphology cv2.morphologyEx's and the regions
cv2.connectedComponentsWithStats's, bit for bit; MotionDetector puts them
together with zones and events."""
from . import _fastmog
from ._fastmog import _CpuBackgroundSubtractorMOG2 as BackgroundSubtractorMOG2
from ._fastmog import _mog2_parameters
from .motion import Regions, _detector, _element, _regions


# the defaults come from the C parameter table, looked up once
_DEFAULTS = {p["name"]: p["default"] for p in _mog2_parameters()}


def createBackgroundSubtractorMOG2(history=_DEFAULTS["history"],
                                   varThreshold=_DEFAULTS["var_threshold"],
                                   detectShadows=_DEFAULTS["detect_shadows"]):
    """OpenCV-style factory: cv2.createBackgroundSubtractorMOG2's signature."""
    return BackgroundSubtractorMOG2(history, varThreshold, detectShadows)


def nv12_to_bgr(y, uv=None, /, *, out=None, rgb=False, matrix="bt601"):
    """NV12 to BGR, equal to cv2.cvtColor(frame, cv2.COLOR_YUV2BGR_NV12).

    `y` is the (H*3/2) x W uint8 frame cv2 takes when `uv` is None; otherwise
    the H x W luma plane, and `uv` the chroma plane, (H/2) x (W/2) x 2 or
    (H/2) x W interleaved U, V. Rows may be padded; H and W must be even.
    Returns a new H x W x 3 uint8 array, or fills `out`. `rgb=True` gives
    COLOR_YUV2RGB_NV12. `matrix`: "bt601" (video range, OpenCV's)."""
    return _fastmog._cpu_nv12_to_bgr(y, uv, out=out, rgb=rgb, matrix=matrix)


def nv21_to_bgr(y, uv=None, /, *, out=None, rgb=False, matrix="bt601"):
    """As nv12_to_bgr for NV21 (chroma stored V, U):
    cv2.cvtColor(frame, cv2.COLOR_YUV2BGR_NV21)."""
    return _fastmog._cpu_nv21_to_bgr(y, uv, out=out, rgb=rgb, matrix=matrix)


def morphology(mask, op, kernel=3, *, shape="rect", iterations=1, out=None):
    """cv2.morphologyEx(mask, op, element, iterations=iterations) on an H x W
    uint8 mask, bit for bit (its default anchor and border). op: "erode",
    "dilate", "open" or "close"; kernel: an int k (k x k), a (width, height)
    pair drawn as `shape` ("rect", "ellipse" or "cross", as
    cv2.getStructuringElement draws it), or a 2-D array (nonzero = in); sides
    from 1 to 31. Returns a new array, or writes `out` (which may be `mask`)."""
    code = _element.op_code(op)
    element = _element.structuring_element(kernel, shape)
    count = _element.iterations_count(iterations)
    return _fastmog._cpu_morphology(mask, element, code, count, out=out)


def connected_components(mask, *, connectivity=8, min_area=0, foreground=255, labels=False):
    """The regions of the pixels of `mask` (H x W uint8) equal to `foreground`
    (255: a shadow, 127, is background), as cv2.connectedComponentsWithStats
    (mask == foreground, connectivity=connectivity, ltype=cv2.CV_32S) gives
    them without its background row: same regions, order, statistics and
    centroids. Regions under min_area pixels are dropped and the others
    renumbered in order. labels=True also returns the int32 label image.
    Returns a fastmog.motion.Regions."""
    connectivity, min_area, foreground = _regions.check_options(connectivity, min_area,
                                                                foreground)
    stats, centroids, image = _fastmog._cpu_connected_components(
        mask, connectivity, min_area, foreground, bool(labels))
    return Regions(len(stats), stats, centroids, image)


class MotionDetector(_detector.Detector):
    __doc__ = (_detector.Detector.__doc__ or "") + """

    The host face: update(mask) takes the H x W uint8 mask of a subtractor
    and gives the frame's fastmog.motion.FrameMotion (its morphology and
    regions are morphology() and connected_components() here, OpenCV's bit
    for bit); finish() ends the open events; events lists those ended."""

    def _clean(self, mask):
        if self.morphology is None:
            return mask
        op, kernel, shape = self.morphology
        return morphology(mask, op, kernel, shape=shape, out=mask)

    def _regions(self, mask):
        return connected_components(mask, connectivity=self.connectivity,
                                    min_area=self.min_area)


def update_cameras(detectors, masks):
    """detectors[k].update(masks[k]) for every camera: the host face of
    fastmog.update_cameras, the same results."""
    detectors, masks = list(detectors), list(masks)
    if len(detectors) != len(masks):
        raise ValueError(f"{len(detectors)} detectors and {len(masks)} masks: one mask per "
                         f"detector")
    return [d.update(m) for d, m in zip(detectors, masks)]


__all__ = ["BackgroundSubtractorMOG2", "createBackgroundSubtractorMOG2", "nv12_to_bgr",
           "nv21_to_bgr", "morphology", "connected_components", "MotionDetector",
           "update_cameras"]


def apply_cameras(subtractors, frames, learning_rate=-1.0, *, fgmasks=None,
                  known_foreground=None):
    """N host subtractors, each with its own numpy frame (sizes, channels and
    dtypes may differ): the list of N masks, exactly what N apply() calls
    give. learning_rate: one value for all, or N values. fgmasks: N writable
    masks to fill, or None (new arrays). known_foreground: None, or N entries
    (None or a uint8 mask)."""
    return _fastmog._cpu_apply_cameras(subtractors, frames, learning_rate, fgmasks=fgmasks,
                                       known_foreground=known_foreground)
