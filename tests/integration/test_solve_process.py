"""Solver processes end with what started them: closed whatever they are doing, killed past a
deadline, held to a memory limit, and none left behind by an agent's session restarts."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time

import pytest

from gpualloc.agent.service.solve_process import TERMINATE_GRACE_S, SolveProcess


def children(pid: int | None = None) -> set[int]:
    """The live solver processes `pid` (this process) started, from /proc (psutil may not be
    installed): its spawned children, not multiprocessing's resource tracker."""
    pid = pid or os.getpid()
    pids: set[int] = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            pids.update(int(p) for p in f.read().split())
    return {p for p in pids if _state(p) not in (None, "Z") and b"spawn_main" in _cmdline(p)}


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


async def gone(pid: int, within_s: float = 5.0) -> bool:
    """Has the solver process `pid` ended within `within_s` (it is reaped in a thread)?"""
    deadline = time.monotonic() + within_s
    while pid in children() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return pid not in children()


def _allocate(n: int) -> int:
    return len(bytearray(n))


async def test_close_ends_a_busy_solver_process_at_once_and_reaps_it():
    process = SolveProcess()
    assert process.submit(os.getpid)
    await process.wait()
    pid = process.take()
    assert pid == process.pid and pid in children()
    assert process.submit(time.sleep, 600)  # a solve that would outlive any shutdown
    await asyncio.sleep(0.2)
    began = time.monotonic()
    process.close()
    assert time.monotonic() - began < TERMINATE_GRACE_S + 1
    assert pid not in children() and _state(pid) is None  # gone and reaped, not a zombie
    assert process.pid is None and not process.busy and process.take() is None


@pytest.mark.slow
async def test_a_solve_past_its_deadline_is_killed_and_the_next_solve_gets_a_new_process():
    process = SolveProcess()
    try:
        process.submit(time.sleep, 600, deadline_s=1.0)
        began = time.monotonic()
        first = process.pid
        await process.wait()
        assert time.monotonic() - began < 5
        assert process.take() is None and "past its deadline" in process.last_error
        assert await gone(first)
        process.submit(os.getpid)
        await process.wait()
        assert process.take() not in (None, first)
    finally:
        process.close()


async def test_a_solve_over_the_memory_limit_fails_alone():
    process = SolveProcess(memory_bytes=1 << 30)
    try:
        process.submit(_allocate, 2 << 30)
        await process.wait()
        assert process.take() is None and process.last_error.startswith("MemoryError")
        process.submit(_allocate, 1 << 20)  # the same process goes on
        await process.wait()
        assert process.take() == 1 << 20
    finally:
        process.close()


async def test_a_solve_that_raises_reports_its_error():
    process = SolveProcess()
    try:
        process.submit(int, "x")
        await process.wait()
        assert process.take() is None and process.last_error.startswith("ValueError")
    finally:
        process.close()
    assert not multiprocessing.active_children()


async def test_a_call_that_cannot_be_handed_over_reports_its_error():
    process = SolveProcess()
    try:
        process.submit(int, lambda: 1)  # a lambda is not picklable: the call never reaches the process
        await process.wait()
        assert process.take() is None and "pickle" in process.last_error.lower()
    finally:
        process.close()
    assert not multiprocessing.active_children()


def _stubborn() -> None:
    """A solve that ignores SIGTERM: its process ends only by SIGKILL, TERMINATE_GRACE_S later."""
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(600)


@pytest.mark.slow
async def test_killing_a_solve_past_its_deadline_does_not_hold_up_the_loop():
    process = SolveProcess()
    gaps, ticking = [], True

    async def tick() -> None:
        last = time.monotonic()
        while ticking:
            await asyncio.sleep(0.02)
            gaps.append(time.monotonic() - last)
            last = time.monotonic()

    ticker = asyncio.create_task(tick())
    try:
        process.submit(_stubborn, deadline_s=1.0)
        first = process.pid
        await process.wait()
        assert process.take() is None and "past its deadline" in process.last_error
        assert await gone(first)  # SIGTERM ignored, SIGKILL after the grace
    finally:
        ticking = False
        await ticker
        process.close()
    assert max(gaps) < TERMINATE_GRACE_S / 2  # the loop went on while the process was ended
