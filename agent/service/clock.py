"""The agent's clock: the wall time read once, then carried forward by the monotonic clock.

Step boundaries and the `now` of every pass come from here, so a wall-clock jump while the agent
runs (an NTP step, a VM resumed) neither commits a burst of steps nor stalls the pool; only a
restart reads the wall clock again. What a restart then finds is bounded by the catch-up rule in
the service (at most `agent.catch_up_steps` commits a pass) and by the boundary rule (nothing is
committed before the next step's start, so after a backward jump the pool waits for wall time
to pass the last committed step).
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Callable


class Clock:
    def __init__(self, wall: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic):
        self._monotonic = monotonic
        self._wall0, self._mono0 = wall(), monotonic()

    def now(self) -> datetime:
        elapsed = self._monotonic() - self._mono0
        return datetime.fromtimestamp(self._wall0, timezone.utc) + timedelta(seconds=elapsed)
