"""Progress of a long run on stderr (`simulate`, `bench corpus`), for the person waiting: one
line when a part ends, and in between at most one line every `every_s` seconds. The pure core
only counts (`progress(what, done, total)`); the clock is here."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """A `progress(what, done, total)` callback that writes "gpualloc COMMAND: WHAT done/total
    UNIT (pct%), elapsed s" lines to `out`."""

    def __init__(self, command: str, unit: str, out: TextIO | None = None, every_s: float = 5.0) -> None:
        self.command, self.unit, self.out, self.every_s = command, unit, out or sys.stderr, every_s
        self.began = self.last = time.monotonic()

    def __call__(self, what: str, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self.last < self.every_s:
            return
        self.last = now
        share = f" ({done / total:.0%})" if total else ""
        self.out.write(f"gpualloc {self.command}: {what} {done}/{total} {self.unit}{share}, {now - self.began:.0f} s\n")
        self.out.flush()
