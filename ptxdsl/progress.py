"""A one-line progress display for long command-line runs (fuzz campaigns, benchmarks).

It rewrites one line of a terminal (carriage return, no newline) at most every `interval`
seconds, and stays silent where the stream is not a terminal (CI logs, pipes) unless asked.
The caller keeps its own tally; `close()` ends the line so the tally printed after it, on
Ctrl-C too, starts on a clean line.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """`Progress("fence", total=2000).update(done)` draws `fence  400/2000 (20%) 12.3/s`."""

    def __init__(self, label: str, total: int | None = None, *, stream: TextIO | None = None,
                 enabled: bool | None = None, interval: float = 0.5, unit: str = ""):
        self.label, self.total, self.unit = label, total, unit
        self.stream = sys.stderr if stream is None else stream
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled, self.interval = enabled, interval
        self.t0 = time.perf_counter()
        self._last = float("-inf")
        self._width = 0
        self.done = 0

    def line(self) -> str:
        elapsed = max(time.perf_counter() - self.t0, 1e-9)
        of = f"/{self.total} ({100 * self.done // max(self.total, 1)}%)" if self.total else ""
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.label} {self.done}{of}{unit} {self.done / elapsed:.1f}/s"

    def update(self, done: int, force: bool = False) -> None:
        self.done = done
        now = time.perf_counter()
        if not self.enabled or (not force and now - self._last < self.interval):
            return
        self._last = now
        text = self.line()
        # pad over a longer previous line: \r only moves the cursor
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = len(text)

    def close(self) -> None:
        """Erase the line (the caller prints the final tally in its own words)."""
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
        self._width = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
