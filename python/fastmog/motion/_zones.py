"""Zones: the pixels of a frame a motion step looks at, from polygons filled
exactly as cv2.fillPoly fills them (8-connected outlines, shift 0) or from a
mask. Built once per detector, so plain Python over integers: the outline
and the scanline fill follow OpenCV's fixed-point arithmetic step for step
(16 fractional bits, C's truncating division), which is what makes them
equal to it pixel for pixel, at the borders and outside them too."""
from __future__ import annotations

import numbers

import numpy as np

_SHIFT = 16                 # OpenCV's XY_SHIFT: edges step in 1/65536 pixels
_ONE = 1 << _SHIFT
MAX_COORD = 1 << 20         # far outside any frame; keeps OpenCV's int64 maths exact


def _div(a: int, b: int) -> int:
    """C's integer division (toward zero), which OpenCV's edges use."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _clip(w, h, x1, y1, x2, y2):
    """cv2.clipLine on a w x h frame: (whether any of it is inside, the
    endpoints moved onto the frame's edges as far as OpenCV moves them)."""
    right, bottom = w - 1, h - 1

    def code(x, y):
        return (x < 0) + (x > right) * 2 + (y < 0) * 4 + (y > bottom) * 8

    c1, c2 = code(x1, y1), code(x2, y2)
    if (c1 & c2) == 0 and (c1 | c2) != 0:
        if c1 & 12:
            a = 0 if c1 < 8 else bottom
            x1 += _div((a - y1) * (x2 - x1), y2 - y1)
            y1, c1 = a, (x1 < 0) + (x1 > right) * 2
        if c2 & 12:
            a = 0 if c2 < 8 else bottom
            x2 += _div((a - y2) * (x2 - x1), y2 - y1)
            y2, c2 = a, (x2 < 0) + (x2 > right) * 2
        if (c1 & c2) == 0 and (c1 | c2) != 0:
            if c1:
                a = 0 if c1 == 1 else right
                y1 += _div((a - x1) * (y2 - y1), x2 - x1)
                x1, c1 = a, 0
            if c2:
                a = 0 if c2 == 1 else right
                y2 += _div((a - x2) * (y2 - y1), x2 - x1)
                x2, c2 = a, 0
    return (c1 | c2) == 0, x1, y1, x2, y2


def _inside(w, h, *xy):
    xs, ys = xy[0::2], xy[1::2]
    return all(0 <= x < w for x in xs) and all(0 <= y < h for y in ys)


def _line(img, x1, y1, x2, y2):
    """An 8-connected line as cv2.line draws it (clipped, left to right)."""
    h, w = img.shape
    if not _inside(w, h, x1, y1, x2, y2):
        visible, x1, y1, x2, y2 = _clip(w, h, x1, y1, x2, y2)
        if not visible:
            return
    if x2 < x1:
        x1, y1, x2, y2 = x2, y2, x1, y1
    dx, dy, ystep = x2 - x1, y2 - y1, 1
    if dy < 0:
        dy, ystep = -dy, -1
    steep = dy > dx
    if steep:
        dx, dy = dy, dx
    err, x, y = dx - 2 * dy, x1, y1
    for _ in range(dx + 1):
        img[y, x] = 255
        minor = err < 0
        err += -2 * dy + (2 * dx if minor else 0)
        if steep:
            y += ystep
            x += minor
        else:
            x += 1
            y += ystep if minor else 0


class _Edge:
    __slots__ = ("y0", "y1", "x", "dx", "next")

    def __init__(self, y0=0, y1=0, x=0, dx=0):
        self.y0, self.y1, self.x, self.dx, self.next = y0, y1, x, dx, None


def _outline_and_edges(img, points, edges):
    """Draws the polygon's outline and adds its non-horizontal edges, in
    fixed point, each from its endpoints clipped to the frame (OpenCV's
    'more accurate' edges), extended back to its own first row."""
    h, w = img.shape
    x0, y0 = points[-1]
    for x1, y1 in points:
        ax, ay, bx, by = x0, y0, x1, y1
        _line(img, ax, ay, bx, by)
        cy0, cy1 = ay, by
        if not _inside(w, h, ax, ay, bx, by):
            _, ax, ay, bx, by = _clip(w, h, ax, ay, bx, by)
            if ay != by:
                cy0, cy1 = ay, by
        cx0, cx1 = ax << _SHIFT, bx << _SHIFT
        if y0 != y1:
            dx = _div(cx1 - cx0, cy1 - cy0)
            if y0 < y1:
                edges.append(_Edge(y0, y1, cx0 + (y0 - cy0) * dx, dx))
            else:
                edges.append(_Edge(y1, y0, cx1 + (y1 - cy1) * dx, dx))
        x0, y0 = x1, y1


def _fill(img, edges):
    """The scanline fill of all edges at once (even-odd), as OpenCV's
    FillEdgeCollection walks them: an active list kept in x order by a
    bubble pass per row, spans from ceil(left) to floor(right)."""
    h, w = img.shape
    if len(edges) < 2:
        return
    ends = [e.x + (e.y1 - e.y0) * e.dx for e in edges]
    if (max(e.y1 for e in edges) < 0 or min(e.y0 for e in edges) >= h
            or max(max(e.x for e in edges), max(ends)) < 0
            or min(min(e.x for e in edges), min(ends)) >= w << _SHIFT):
        return
    edges.sort(key=lambda e: (e.y0, e.x, e.dx))
    total = len(edges)
    edges.append(_Edge(y0=1 << 31))           # a sentinel: no edge starts after it
    head = _Edge()
    i, e = 0, edges[0]
    y_end = min(max(e.y1 for e in edges[:total]), h)
    for y in range(e.y0, y_end):
        draw, prelast, last = False, head, head.next
        while last is not None or e.y0 == y:
            if last is not None and last.y1 == y:       # this edge ends here
                prelast.next = last = last.next
                continue
            left = prelast
            if last is not None and (e.y0 > y or last.x < e.x):
                prelast, last = last, last.next
            elif i < total:                             # this edge starts here
                prelast.next, e.next, prelast = e, last, e
                i += 1
                e = edges[i]
            else:
                break
            if draw:
                if y >= 0:
                    a, b = sorted((left.x, prelast.x))
                    x1, x2 = (a + _ONE - 1) >> _SHIFT, b >> _SHIFT
                    if x1 < w and x2 >= 0:
                        img[y, max(x1, 0):min(x2, w - 1) + 1] = 255
                left.x += left.dx
                prelast.x += prelast.dx
            draw = not draw
        _bubble(head)


def _bubble(head):
    """One bubble sort of the active list by x, as OpenCV runs it per row."""
    stop, swapped = None, False
    while True:
        prelast, last = head, head.next
        while last is not stop and last.next is not None:
            nxt = last.next
            if last.x > nxt.x:
                prelast.next, last.next, nxt.next = nxt, nxt.next, last
                prelast, swapped = nxt, True
            else:
                prelast, last = last, nxt
        stop = prelast
        if not (swapped and stop is not head.next and stop is not head):
            return


def _polygon(points, what):
    if isinstance(points, np.ndarray) and points.dtype.kind not in "iu":
        raise TypeError(f"{what} must hold integer pixel coordinates, not {points.dtype}")
    pts = []
    for p in points:
        if isinstance(p, (str, bytes)) or not hasattr(p, "__len__") or len(p) != 2:
            raise ValueError(f"{what}: each point is (x, y), got {p!r}")
        for v in p:
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise TypeError(f"{what} must hold integer pixel coordinates, "
                                f"not {type(v).__name__}")
            if not -MAX_COORD <= int(v) <= MAX_COORD:
                raise ValueError(f"{what}: coordinate {int(v)} is beyond +-{MAX_COORD}")
        pts.append((int(p[0]), int(p[1])))
    if len(pts) < 3:
        raise ValueError(f"{what} has {len(pts)} point(s): a polygon needs at least 3")
    return pts


def _is_point(item) -> bool:
    return (len(item) == 2 and not isinstance(item, (str, bytes))
            and all(isinstance(v, numbers.Number) for v in item))


def polygons(zone):
    """The polygons of a zone given as points, checked (no frame needed), or
    None for an array, which zone_mask checks against the frame."""
    if isinstance(zone, np.ndarray) and not (zone.ndim == 2 and zone.shape[1] == 2):
        return None
    if isinstance(zone, (str, bytes)) or not hasattr(zone, "__len__") or len(zone) == 0:
        raise TypeError(f"a zone is a polygon, a list of polygons or a mask, not {zone!r}")
    parts = [zone] if all(_is_point(p) for p in zone) else list(zone)
    out = []
    for k, p in enumerate(parts):
        what = "zone" if len(parts) == 1 else f"zone polygon {k}"
        if isinstance(p, (str, bytes)) or not hasattr(p, "__len__"):
            raise TypeError(f"{what} must be a sequence of (x, y) points, not {p!r}")
        out.append(_polygon(p, what))
    return out


def zone_mask(zone, shape) -> np.ndarray:
    """The uint8 mask (255 = in the zone) of `zone` on a frame of `shape`
    (height, width): a polygon (a sequence of (x, y) integer points, at least
    3), several polygons filled together (a sequence of polygons, as one
    cv2.fillPoly call fills them: where they overlap an even number of times
    is out), or a 2-D array of that shape (nonzero = in). Polygons may cross
    or lie beyond the frame's border. An array of the frame's shape is a mask,
    any other (N, 2) array a polygon. A zone with no pixel in the frame is a
    ValueError, like any malformed one."""
    if (not isinstance(shape, (tuple, list)) or len(shape) != 2
            or not all(isinstance(n, numbers.Integral) and not isinstance(n, bool) and int(n) > 0
                       for n in shape)):
        raise ValueError(f"shape must be (height, width) of positive ints, got {shape!r}")
    h, w = int(shape[0]), int(shape[1])
    if isinstance(zone, np.ndarray) and zone.shape == (h, w):
        if zone.dtype.kind not in "biu":
            raise TypeError(f"a zone mask must be integer or bool, not {zone.dtype}")
        img = np.where(zone != 0, np.uint8(255), np.uint8(0))
    else:
        parts = polygons(zone)
        if parts is None:
            raise ValueError(f"a zone mask must be {h}x{w} (the frame), got {zone.shape}")
        img = np.zeros((h, w), np.uint8)
        edges: list = []
        for points in parts:
            _outline_and_edges(img, points, edges)
        _fill(img, edges)
    if not img.any():
        raise ValueError(f"the zone has no pixel inside the {w}x{h} frame")
    return img
