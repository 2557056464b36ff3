"""fastmog.morphology: the motion step's first GPU face, erosion to closing
of a mask where it lies, bit for bit fastmog.cpu.morphology's (the element
and the names checked as there, before anything is queued)."""
from . import _fastmog
from .motion import _element


def morphology(mask, op, kernel=3, *, stream, shape="rect", iterations=1, out=None,
               foreground=None, timer=None):
    """cv2.morphologyEx(mask, op, element, iterations=iterations) on the GPU,
    queued on `stream`: `mask` an H x W uint8 GpuMat (or any producer's device
    memory, or a numpy array, uploaded); op "erode", "dilate", "open" or
    "close"; kernel an int k (k x k), a (width, height) pair drawn as `shape`
    ("rect", "ellipse" or "cross"), or a 2-D array (nonzero = in), sides 1
    to 31. Returns a new GpuMat, or writes `out` (a GpuMat, which may be the
    mask). Pixels outside the mask never decide (OpenCV's default border).
    foreground: None, or a value 0-255: the mask is first made binary, 255
    where it equals that value and 0 elsewhere (a subtractor's mask with its
    shadows), in the same first pass, as
    fastmog.cpu.morphology(np.where(mask == foreground, 255, 0), ...)."""
    element, code, count, binarize = _arguments(op, kernel, shape, iterations, foreground)
    return _fastmog._morphology(mask, element, code, count, stream=stream, out=out,
                                foreground=binarize, timer=timer)


def morphology_stack(masks, op, kernel=3, *, stream, shape="rect", iterations=1, out=None,
                     foreground=None, timer=None):
    """morphology() of n masks of one H x W shape (GpuMats) in one launch per
    pass, into an (n H) x W stack (a new GpuMat, or `out`, which must
    overlap no mask): mask k's result fills rows k H to (k + 1) H, each
    mask its own image, its borders never a neighbour's rows."""
    element, code, count, binarize = _arguments(op, kernel, shape, iterations, foreground)
    return _fastmog._morphology_images(masks, element, code, count, stream=stream, out=out,
                                       foreground=binarize, timer=timer)


def _arguments(op, kernel, shape, iterations, foreground):
    """The C entries' element, op code, iterations and foreground (-1: none),
    each checked as fastmog.cpu.morphology checks it."""
    binarize = -1 if foreground is None else _element.whole_number(foreground, "foreground",
                                                                   0, 255)
    return (_element.structuring_element(kernel, shape), _element.op_code(op),
            _element.iterations_count(iterations), binarize)
