"""fastmog.connected_components: the regions of a mask labelled on the GPU,
bit for bit fastmog.cpu.connected_components' (the options checked as
there, before anything is queued)."""
import numpy as np

from . import _fastmog
from .motion import _element, _regions
from .motion._regions import Regions


def connected_components(mask, *, stream, connectivity=8, min_area=0, foreground=255,
                         zone=None, labels=False, timer=None):
    """cv2.connectedComponentsWithStats(mask == foreground,
    connectivity=connectivity, ltype=cv2.CV_32S) on the GPU, less its
    background row, queued on `stream`: `mask` an H x W uint8 GpuMat (or any
    producer's device memory, or a numpy array, uploaded). Same regions,
    order, statistics and centroids; regions under min_area pixels are
    dropped and the others renumbered in order. zone: None, or an H x W
    uint8 mask of the pixels that count (nonzero): the regions of
    (mask == foreground) & (zone != 0). Only the regions' rows come back to
    the host: the call waits for its own copy of them, not for the stream's
    other work. labels=True also gives the label image, OpenCV's numbering
    (0: background or a dropped region), as an H x W int32 GpuMat that stays
    on the GPU, written in `stream`'s order; pass a GpuMat of that shape
    instead to have it filled (nothing allocated per frame). Returns a
    fastmog.motion.Regions."""
    return regions_and_pixels(mask, stream=stream, connectivity=connectivity,
                              min_area=min_area, foreground=foreground, zone=zone,
                              labels=labels, timer=timer)[0]


def regions_and_pixels(mask, *, stream, connectivity=8, min_area=0, foreground=255, zone=None,
                       labels=False, timer=None, rows=-1, opening=-1):
    """connected_components, and how many pixels all the regions hold (the
    small ones too): a zone's foreground count, from the same pass. rows:
    the rows read back with the count before it is known (-1: fastmog's
    guess); a caller that knows its scene (the last count of the same zone)
    makes the first copy fit it. opening 0 (1): the regions of the 3x3
    opening (closing) of the pixels equal to foreground, made in the
    labelling's first pass (8-connectivity, no zone; see
    opening_in_labelling)."""
    connectivity, min_area, foreground = _regions.check_options(connectivity, min_area,
                                                                foreground)
    stats, centroids, pixels, image = _fastmog._connected_components(
        mask, connectivity, min_area, foreground, stream=stream, zone=zone, timer=timer,
        rows=rows, labels=labels, opening=opening)
    return Regions(len(stats), stats, centroids, image), pixels


def foreground_pixels(mask, *, stream, foreground=255, zone=None, timer=None):
    """How many pixels of `mask` equal `foreground` (and are nonzero in
    `zone`), counted on the GPU without labelling them; only the count
    comes back."""
    _, _, pixels, _ = _fastmog._connected_components(mask, 8, 0, foreground, stream=stream,
                                                     zone=zone, timer=timer, count=True)
    return pixels


def regions_of_stack(stack, images, *, stream, connectivity=8, min_area=0, foreground=255,
                     timer=None, rows=-1):
    """The regions of each of `images` masks stacked in one (a camera's each,
    of an even number of rows), labelled apart in one pass and read back in
    one copy: [(Regions, foreground pixels)] per image, each as
    regions_and_pixels gives for that mask alone."""
    connectivity, min_area, foreground = _regions.check_options(connectivity, min_area,
                                                                foreground)
    stats, centroids, counts, starts = _fastmog._connected_components(
        stack, connectivity, min_area, foreground, stream=stream, timer=timer, rows=rows,
        images=images)
    return [(Regions(b - a, stats[a:b], centroids[a:b]), counts[k])
            for k, (a, b) in enumerate(zip(starts, starts[1:]))]


def opening_in_labelling(morphology, connectivity):
    """0 or 1 where a detector's morphology, (op, kernel, shape), is the 3x3
    rectangle's opening or closing and its regions 8-connected: the
    labelling then makes that morphology in its own first pass, and the
    cleaned mask is never written (regions_and_pixels' opening); -1
    otherwise."""
    if morphology is None or connectivity != 8 or morphology[0] not in ("open", "close"):
        return -1
    op, kernel, shape = morphology
    element = _element.structuring_element(kernel, shape)
    if element.shape != (3, 3) or not np.all(element):
        return -1
    return 1 if op == "close" else 0
