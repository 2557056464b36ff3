"""The built-in scene: a deterministic procedural video for the main job.

A textured background (gradients, tiles and grain), objects moving along
closed paths that cast soft-edged shadows, sensor noise and a slow lighting
drift. The motion repeats every `period` frames, so the whole loop is rendered
once (into pinned memory when a GPU is usable) and then streamed at no cost:
generating frames never limits the throughput being measured.
"""
import numpy as np

from . import _fastmog


def _background(height, width, channels, rng):
    y = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None]
    x = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :]
    base = 70.0 + 60.0 * x + 40.0 * y                                  # gradients
    tiles = ((np.arange(height)[:, None] // 96 + np.arange(width)[None, :] // 96) % 2)
    base = base + 12.0 * tiles.astype(np.float32)                      # floor tiles
    coarse = rng.normal(0.0, 10.0, (height // 16 + 2, width // 16 + 2)).astype(np.float32)
    base = base + np.repeat(np.repeat(coarse, 16, 0), 16, 1)[:height, :width]   # texture
    base = base + rng.normal(0.0, 4.0, (height, width)).astype(np.float32)      # grain
    if channels == 1:
        return base
    tint = np.array([0.9, 1.0, 1.1, 1.0][:channels], np.float32)
    return base[:, :, None] * tint


class BuiltinScene:
    """`frames(n)` yields n uint8 frames (H x W, or H x W x 3 for colour).

    count: render only the first `count` frames of the loop (they are the same
    frames as in the full loop), for runs shorter than a period. progress:
    called as progress(done, total) after each rendered frame.
    """

    def __init__(self, width=3840, height=2160, colour=False, period=32, seed=2024,
                 pinned=None, *, count=None, progress=None):
        if width < 16 or height < 16:
            raise ValueError("the built-in scene needs at least 16x16 pixels")
        self.width, self.height = width, height
        self.channels = 3 if colour else 1
        self.period = period
        rng = np.random.default_rng(seed)
        background = _background(height, width, self.channels, rng)
        if pinned is None:
            pinned = _fastmog.cuda_available()
        total = period if count is None else max(1, min(period, count))
        self._loop = []
        for i in range(total):
            self._loop.append(self._render(i, background, rng, pinned))
            if progress is not None:
                progress(i + 1, total)

    @property
    def shape(self):
        if self.channels == 1:
            return (self.height, self.width)
        return (self.height, self.width, self.channels)

    def _objects(self, i):
        """(top, left, height, width, brightness) of each object in frame i."""
        h, w = self.height, self.width
        t = 2.0 * np.pi * i / self.period
        out = []
        for k in range(5):
            oh, ow = h // (6 + k), w // (12 + 2 * k)
            cy = h * (0.5 + 0.3 * np.sin(t + 1.3 * k))
            cx = w * (0.5 + 0.38 * np.cos(t * (1 + k % 2) + 0.7 * k))
            top = int(np.clip(cy - oh / 2, 0, h - oh))
            left = int(np.clip(cx - ow / 2, 0, w - ow))
            out.append((top, left, oh, ow, 215.0 - 30.0 * k))
        return out

    def _render(self, i, background, rng, pinned):
        gain = 1.0 + 0.04 * np.sin(2.0 * np.pi * i / self.period)     # lighting drift
        frame = background * gain
        for top, left, oh, ow, value in self._objects(i):
            # shadow: the background darkened, offset down and to the right
            sy, sx = top + oh // 5, left + ow // 4
            ey, ex = min(sy + oh, self.height), min(sx + ow, self.width)
            frame[sy:ey, sx:ex] *= 0.6
            frame[top:top + oh, left:left + ow] = value
        frame = frame + rng.normal(0.0, 2.5, frame.shape).astype(np.float32)  # sensor noise
        frame = np.clip(frame, 0, 255).astype(np.uint8)
        if pinned:
            host = _fastmog.pinned_like(frame)
            host[...] = frame
            return host
        return frame

    def frames(self, n):
        if n > len(self._loop) < self.period:
            raise ValueError(f"only {len(self._loop)} frames were rendered (count=), "
                             f"{n} asked for")
        for i in range(n):
            yield self._loop[i % self.period]
