"""One solve at a time in a process of its own, collected by the agent when it asks.

The planners are pure Python: in a thread they would hold the GIL the event loop needs to go on
deciding arrivals, so they run in a spawned process (started at the first solve and kept for the
next). A result is collected, never pushed: the agent asks at the points where it may use one (a
step boundary), so what a replay does at those points is what the agent did.

No solver process outlives what started it. `close` terminates it, kills it after a short
grace and reaps it, whatever it is doing (a session restart, SIGTERM); a solve given a deadline
is killed when it passes it (its memory goes with it, the next solve starts a new process); an
idle one is ended by `release` when no solve is coming soon; a process whose agent died without
closing it ends by itself (`_start_worker`).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import resource
import signal
import threading
import time
from multiprocessing.connection import Connection
from typing import Any, Callable

PARENT_CHECK_S = 1.0  # how often a solver process looks for its agent
NICENESS = 10  # a solver process yields the CPU to the agent's passes, the broker and the clients
TERMINATE_GRACE_S = 1.0  # after SIGTERM, this long before SIGKILL


def _start_worker(parent: int, memory_bytes: int | None) -> None:
    """In the solver process: run within `memory_bytes` of address space (an allocation past it
    fails the solve, not the machine), and end once the agent that started it is gone (killed,
    or a test's event loop closed under it)."""
    os.setpgrp()  # its own process group: ended with what it started (CBC runs as a program)
    if memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _serve(conn: Connection, parent: int, memory_bytes: int | None) -> None:
    """The solver process's loop: a call in, its result (or the error it raised) out. From its
    first call that is not a start-up one it runs below the agent's priority: its work is
    background work (a plan wanted by the next boundary, not by the arrival waiting now). Its
    start-up (importing the planners, a fraction of a CPU second) runs at the agent's: niced, on
    a machine kept busy by other processes it would take seconds (about 6 s beside four busy
    loops on 2 cores), and the first plans made ahead would come after their boundaries."""
    _start_worker(parent, memory_bytes)
    background = False
    while True:
        try:
            solve, args, start_up = conn.recv()
        except EOFError:  # the agent closed its end
            return
        if not start_up and not background:
            os.nice(NICENESS)
            background = True
        try:
            reply = (True, solve(*args))
        except BaseException as exc:  # noqa: BLE001 - sent back as the solve's error (MemoryError too)
            reply = (False, f"{type(exc).__name__}: {exc}")
        conn.send(reply)


class SolveError(RuntimeError):
    """A solve that raised, or whose process ended or was killed before answering."""


class SolveProcess:
    """A solver process of the agent's. `memory_bytes`: its address-space limit (None: none)."""

    def __init__(self, memory_bytes: int | None = None) -> None:
        self.memory_bytes = memory_bytes
        self._process: multiprocessing.process.BaseProcess | None = None
        self._conn: Connection | None = None
        self._future: asyncio.Future | None = None
        self._killed: str | None = None  # why the running solve's process was killed
        self._timer: asyncio.TimerHandle | None = None
        self._reply: asyncio.Future | None = None  # the running solve's answer, read off the pipe
        self.last_error: str | None = None

    @property
    def pid(self) -> int | None:
        """The solver process's id while it runs (None: none started, or ended)."""
        return self._process.pid if self._process is not None and self._process.is_alive() else None

    @property
    def busy(self) -> bool:
        return self._future is not None and not self._future.done()

    @property
    def done(self) -> bool:
        """A solve has ended and waits to be taken."""
        return self._future is not None and self._future.done()

    def submit(
        self, solve: Callable[..., Any], *args: Any, deadline_s: float | None = None, start_up: bool = False
    ) -> bool:
        """Run `solve(*args)` in the process (picklable, importable there); False while a solve
        runs. A solve still running `deadline_s` after this has its process killed. `start_up`:
        a call that readies a new process (imports), run at the agent's priority (`_serve`)."""
        if self.busy:
            return False
        loop = asyncio.get_running_loop()
        self._start()
        self._killed = None
        self._future = loop.create_task(self._call(solve, args, start_up))
        if deadline_s is not None:
            self._timer = loop.call_later(deadline_s, self._overrun, deadline_s)
        return True

    def take(self) -> Any | None:
        """The ended solve's result, once (None while it runs, or when it failed: `last_error`
        says why)."""
        if not self.done:
            return None
        future, self._future = self._future, None
        assert future is not None  # done: a solve was submitted
        try:
            return future.result()
        except SolveError as exc:  # a solver crash must not take the agent down
            self.last_error = str(exc)
            return None

    async def wait(self) -> None:
        """Until the running solve (if any) ends: for tests."""
        if self._future is not None:
            await asyncio.wait([self._future])

    def release(self) -> None:
        """End the process if it is idle (no solve running or waiting to be taken), reaped in a
        thread of the running loop's: its memory goes without holding up the agent's pass. The
        next solve starts a new one."""
        if self._future is None and self._process is not None:
            self._end_process(wait=False)

    def close(self) -> None:
        """End the process now, whatever it is doing: SIGTERM, SIGKILL after TERMINATE_GRACE_S,
        reaped either way. A solve under way is dropped."""
        self._stop_timer()
        if self._future is not None and not self._future.done():
            self._future.cancel()
        self._future = None
        self._end_process()

    # ---- the process ------------------------------------------------------------------------------
    def _start(self) -> None:
        if self._process is not None and self._process.is_alive():
            return
        self._end_process()
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(
            target=_serve, args=(child, os.getpid(), self.memory_bytes), name="gpualloc-solver", daemon=True
        )
        self._process.start()
        child.close()

    async def _call(self, solve: Callable[..., Any], args: tuple, start_up: bool) -> Any:
        conn, loop = self._conn, asyncio.get_running_loop()
        try:
            # opened by `submit`'s `_start`; closed since only by a kill (past the deadline), which raises
            # here as a SolveError, as the pipe's use did before it was checked
            assert conn is not None, "the solver process ended before the call was handed over"
            # in a thread: a large call fills the pipe until the process (perhaps still starting) reads it
            await loop.run_in_executor(None, conn.send, (solve, args, start_up))
            self._reply = _receive(conn)
            ok, value = await self._reply
        except (EOFError, OSError) as exc:
            raise SolveError(self._killed or "the solver process ended before answering") from exc
        except Exception as exc:  # the call could not be handed over (not picklable, say)
            raise SolveError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            self._reply = None
            self._stop_timer()
        if not ok:
            raise SolveError(value)
        return value

    def _overrun(self, deadline_s: float) -> None:
        self._timer = None
        if self.busy:
            self._killed = f"killed after {deadline_s:.0f} s, past its deadline"
            self._end_process(wait=False)  # reaped in a thread: the agent's passes go on meanwhile

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _end_process(self, wait: bool = True) -> None:
        """Close the pipe (an idle process then returns on its own, cleaning up), then SIGTERM
        its group, then SIGKILL, each after TERMINATE_GRACE_S; reaped either way, here or
        (`wait` false) in a thread of the running loop's."""
        process, conn, self._process, self._conn = self._process, self._conn, None, None
        if conn is not None:
            if self._reply is not None:  # stop reading the pipe before it closes
                with contextlib.suppress(RuntimeError):  # no loop runs: none reads it
                    asyncio.get_running_loop().remove_reader(conn.fileno())
                if not self._reply.done():
                    self._reply.set_exception(EOFError())
            conn.close()
        if process is None:
            return
        first = TERMINATE_GRACE_S if self._reply is None else 0
        if wait:
            _reap(process, first)
        else:
            asyncio.get_running_loop().run_in_executor(None, _reap, process, first)


def _reap(process: multiprocessing.process.BaseProcess, first_wait: float) -> None:
    """Wait `first_wait` for the process to end, then SIGTERM its group and SIGKILL it, each
    after TERMINATE_GRACE_S; reaped either way."""
    process.join(first_wait)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not process.is_alive():
            break
        assert process.pid is not None  # alive: started
        _signal(process.pid, sig)
        process.join(TERMINATE_GRACE_S if sig == signal.SIGTERM else None)
    process.close()


def _signal(pid: int, sig: int) -> None:
    """`sig` to the solver process's group (itself and any program it runs), or to it alone
    while it has not made its group yet."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _receive(conn: Connection) -> asyncio.Future:
    """The next message on `conn`, read by the event loop once it is readable (no thread waits
    through a solve); EOFError when the process ended."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    fd = conn.fileno()

    def readable() -> None:
        loop.remove_reader(fd)
        if future.done():
            return
        try:
            future.set_result(conn.recv())
        except (EOFError, OSError) as exc:
            future.set_exception(exc)

    loop.add_reader(fd, readable)
    return future
