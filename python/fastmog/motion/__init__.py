"""From masks to motion: morphology and connected regions (so far on the
host, fastmog.cpu.morphology and fastmog.cpu.connected_components, bit for
bit OpenCV's). The structuring elements (_element) and the regions found
(_regions) are shared by every face of the motion step."""
from ._element import OPS, SHAPES, structuring_element
from ._regions import Regions

__all__ = ["OPS", "Regions", "SHAPES", "structuring_element"]
