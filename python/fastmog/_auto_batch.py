"""batch="auto": the overlapped pipeline picks its frames per launch from what
its own first launches measure on the GPU.

Batching makes MOG2's kernel cheaper per frame (the model is read and written
once per K frames) but cannot make the copies faster, and a larger K costs
latency, memory and the time to allocate it: on the lent H200 the main job on
the built-in 4K grey scene, whose kernel (about 0.13 ms a frame) is under the
copies (0.168 ms a frame with both directions busy), ran at 5,717 frames/s
with K = 1 and 5,046 with K = 8 (benchmarks/MAIN_JOB_RESULTS.md). So K grows
only while the kernel is the slowest stage: each candidate, smallest first,
is timed over a few launches (CUDA events on the three streams, read when
the launch's masks are due, so nothing waits for them), and the first whose
kernel time per frame is under MARGIN times the slower copy stage's
(measured one frame a launch) is kept. If none is, the one whose kernel
was fastest per frame is. The masks are the same whatever K is.
"""
import statistics

CANDIDATES = (1, 2, 4, 8)     # tried in this order
WARM = 2                      # first launches left out: a model's first frames, first allocations
FRAMES = 8                    # frames timed per candidate, in at least MIN_LAUNCHES launches
MIN_LAUNCHES = 3
MARGIN = 0.9                  # a kernel this close to the copies leaves them no slack


class AutoBatch:
    """The pipeline's choice of K. It asks `batch` for its next launch's K and
    `timing` whether to time that launch, and hands every timed launch to
    `add` once its masks are due. `chosen` is None until the choice is made
    (a short video may end first); `describe()` says why in one line.
    `largest` is the largest K asked for so far, `ahead` the largest a launch
    may yet hold (the next candidate while measuring): a reader's ring of
    frames must outlast that many per slot (app/_loop._host_frames)."""

    def __init__(self):
        self.batch = self.largest = CANDIDATES[0]
        self.chosen = None
        self.kernel = {}              # K -> MOG2's kernel, ms a frame, per timed launch
        # The slower copy stage, ms a frame, from launches of one frame: a
        # larger launch's upload span also holds the host's pace between its
        # frames (a decoder's), which is not the copies' cost.
        self.copies = []
        self._warm = WARM
        self._under = False           # chosen for a kernel under the copies (else fastest)

    @property
    def timing(self):
        return self.chosen is None

    @property
    def ahead(self):
        if self.chosen is not None or self.largest == CANDIDATES[-1]:
            return self.largest
        return CANDIDATES[CANDIDATES.index(self.largest) + 1]

    def add(self, k, kernel_ms, upload_ms, download_ms):
        """One launch of k frames: its kernel's and its copies' times (ms, the
        whole launch; download_ms 0 when the masks stay on the GPU)."""
        if self.chosen is not None:
            return
        if self._warm:
            self._warm -= 1
            return
        self.kernel.setdefault(k, []).append(kernel_ms / k)
        if k == 1:
            self.copies.append(max(upload_ms, download_ms))
        if k != self.batch or len(self.kernel[k]) < max(MIN_LAUNCHES, FRAMES // k):
            return
        if self._median(k) <= MARGIN * statistics.median(self.copies):
            self.batch = self.chosen = k
            self._under = True
        elif k == CANDIDATES[-1]:
            self.batch = self.chosen = min(self.kernel, key=self._median)
        else:
            self.batch = self.largest = CANDIDATES[CANDIDATES.index(k) + 1]

    def _median(self, k):
        return statistics.median(self.kernel[k])

    def describe(self):
        if self.chosen is None:
            return (f"{_frames(self.batch)} a launch, not measured to the end (the frames "
                    f"ended first, or checkpoints cut every launch short)")
        copies = statistics.median(self.copies)
        if self._under:
            return (f"{_frames(self.chosen)} a launch: MOG2's kernel took "
                    f"{self._median(self.chosen):.3f} ms a frame, under {MARGIN} of the "
                    f"copies' {copies:.3f} ms")
        tried = ", ".join(f"K={k} {self._median(k):.3f}" for k in sorted(self.kernel))
        return (f"{_frames(self.chosen)} a launch: MOG2's kernel was the slowest stage at "
                f"every K tried (ms a frame: {tried}; the copies {copies:.3f})")


def _frames(k):
    return f"{k} frame{'s' if k > 1 else ''}"
