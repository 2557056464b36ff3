"""From masks to motion: morphology and connected regions (so far on the
host, fastmog.cpu.morphology and fastmog.cpu.connected_components, bit for
bit OpenCV's) and zones. The structuring elements (_element), the regions
found (_regions), the zones (_zones, polygons filled as cv2.fillPoly
fills them), the events (_events) and the detector's logic (_detector) are
shared by every face of the motion step."""
from ._detector import FrameMotion, ZoneMotion
from ._element import OPS, SHAPES, structuring_element
from ._events import Event
from ._regions import Regions
from ._zones import zone_mask

__all__ = ["OPS", "Event", "FrameMotion", "Regions", "SHAPES", "ZoneMotion",
           "structuring_element", "zone_mask"]
