"""One solve at a time in a process of its own, collected by the agent when it asks.

The planners are pure Python: in a thread they would hold the GIL the event loop needs to go on
deciding arrivals, so they run in a spawned process (one per use, started once a session). A
result is collected, never pushed: the agent asks at the points where it may use one (a step
boundary), so what a replay does at those points is what the agent did.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
import os
import threading
import time
from typing import Any, Callable

PARENT_CHECK_S = 1.0  # how often a solver process looks for its agent
NICENESS = 10  # a solver process yields the CPU to the agent's passes, the broker and the clients


def _start_worker(parent: int) -> None:
    """In the solver process: run below the agent's priority (its work is background work: a
    plan wanted by the next boundary, not by the arrival waiting now), and end once the agent
    that started it is gone. A process pool's workers outlive a parent that died without
    shutting it down (killed, or a test's event loop closed under it), each holding its memory
    for good."""
    os.nice(NICENESS)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(0)
    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


class SolveProcess:
    def __init__(self) -> None:
        self._pool = concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                                            initializer=_start_worker, initargs=(os.getpid(),))
        self._future: asyncio.Future | None = None
        self.last_error: str | None = None

    @property
    def busy(self) -> bool:
        return self._future is not None and not self._future.done()

    @property
    def done(self) -> bool:
        """A solve has ended and waits to be taken."""
        return self._future is not None and self._future.done()

    def submit(self, solve: Callable[..., Any], *args: Any) -> bool:
        """Run `solve(*args)` in the process (picklable, importable there); False while a solve runs."""
        if self.busy:
            return False
        self._future = asyncio.get_running_loop().run_in_executor(self._pool, solve, *args)
        return True

    def take(self) -> Any | None:
        """The ended solve's result, once (None while it runs, or when it failed: `last_error`
        says why)."""
        if not self.done:
            return None
        future, self._future = self._future, None
        try:
            return future.result()
        except Exception as exc:  # a solver crash must not take the agent down
            self.last_error = f"{type(exc).__name__}: {exc}"
            return None

    async def wait(self) -> None:
        """Until the running solve (if any) ends: for tests and for a clean shutdown."""
        if self._future is not None:
            await asyncio.wait([self._future])

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
