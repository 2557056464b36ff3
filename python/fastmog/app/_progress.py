"""The progress line: one line on stderr redrawn in place, only on a terminal."""
import sys
import time


class Progress:
    """`update(done)` redraws at most five times a second; `close()` erases the
    line, so the report that follows starts on a clean line."""

    def __init__(self, label, total=None, stream=None):
        self.label, self.total = label, total
        self.stream = sys.stderr if stream is None else stream
        self.enabled = self.stream.isatty()
        self.started = time.perf_counter()
        self.last = 0.0
        self.width = 0

    def update(self, done, total=None):
        if not self.enabled:
            return
        total = total if total is not None else self.total
        now = time.perf_counter()
        if now - self.last < 0.2 and done != total:
            return
        self.last = now
        rate = done / max(now - self.started, 1e-9)
        line = f"fastmog: {self.label} "
        if total:
            filled = int(30 * min(done, total) / total)
            line += "[" + "#" * filled + "." * (30 - filled) + f"] {done}/{total} "
        else:
            line += f"{done} "
        line += f"{rate:.1f} frames/s"
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)

    def close(self):
        if self.enabled and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0
