"""The regions of a mask, as cv2.connectedComponentsWithStats gives them
without its background row."""
from __future__ import annotations

import dataclasses

import numpy as np

from ._element import whole_number


@dataclasses.dataclass(frozen=True)
class Regions:
    """count regions; stats[i] = (x, y, width, height, area) of region i + 1
    (N x 5 int32, cv2's CC_STAT_LEFT, TOP, WIDTH, HEIGHT, AREA), centroids[i]
    its (x, y) centre (N x 2 float64); labels, when asked for, the H x W int32
    image of region numbers (0: background, or a region under min_area): a
    numpy array from the host face, a GpuMat (left on the GPU) from the GPU's."""

    count: int
    stats: np.ndarray
    centroids: np.ndarray
    labels: np.ndarray | None = None

    def __len__(self):
        return self.count

    @property
    def boxes(self) -> np.ndarray:
        """N x 4 int32: x, y, width, height of each region."""
        return self.stats[:, :4]

    @property
    def areas(self) -> np.ndarray:
        return self.stats[:, 4]


def check_options(connectivity, min_area, foreground):
    """The labelling options, checked before any work."""
    if isinstance(connectivity, bool) or connectivity not in (4, 8):
        raise ValueError(f"connectivity must be 4 or 8, not {connectivity!r}")
    return (int(connectivity), whole_number(min_area, "min_area", 0, 2**62),
            whole_number(foreground, "foreground", 0, 255))
