"""`gpualloc bench scale` (benchmarks/scale.py): its phases at a tiny size through the real
broker, and failures reported as figures rather than raised. The figures at 256 to 4,096 GPUs
live in docs/results.md; this checks the harness, not the speed."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

from test_agent_kafka import listed_topics

from gpualloc.benchmarks.scale import ScaleResult, bounded, descendants, measure_scale, table


async def test_a_tiny_pool_goes_through_every_phase_and_leaves_no_topic(kafka_bootstrap):
    before = set(await listed_topics(kafka_bootstrap))
    # ids at the contract's limit: every record the bench sends must still be one the agent takes
    r = await measure_scale(kafka_bootstrap, 16, apps=1, queued=40, rate=50, seconds=2, step_seconds=1.0, id_chars=200)
    assert r.errors == {}, r.errors
    assert r.dead_letters == 0 and r.backlog_decided == r.queued and r.featured > 0 and r.backlog_s > 0
    assert r.arrivals >= 80 and r.decided == r.arrivals and 0 < r.p50_ms <= r.p99_ms
    assert r.commits >= 1 and 0 < r.boundary_p50_ms <= r.boundary_max_ms
    assert r.commit_max_bytes > 0 and r.commit_parts_max >= 1 and r.ledger_max_bytes > 0
    assert r.snapshots >= 1 and r.snapshot_max_bytes > 0
    assert r.agent_rss_mb > 0 and r.solver_processes >= 1 and r.solver_rss_mb > 0
    assert r.status_s > 0 and r.status_lines > 0
    assert r.recovery_s > 0 and r.sigterm_s is not None
    assert "16 GPUs" in table([r]) and "recovery after SIGKILL" in table([r])
    assert not {t for t in await listed_topics(kafka_bootstrap) if t.startswith("scale-")} - before


async def test_a_phase_that_fails_or_hangs_is_a_figure_not_a_crash():
    r = ScaleResult(16, 0, 0, 0, 48, 1.0, 10, 1)

    async def refused() -> None:
        raise RuntimeError("plan.committed of 1,500,000 bytes cannot be published: MessageSizeTooLargeError")

    assert await bounded(r, "commit", refused(), 1) is None
    assert await bounded(r, "status", asyncio.sleep(5), 0.05) is None
    assert r.errors["commit"].startswith("RuntimeError: plan.committed") and r.errors["status"] == "TimeoutError"
    assert "16 GPUs, commit: RuntimeError" in table([r])


def test_descendants_are_found_through_proc():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        assert child.pid in descendants(os.getpid())
    finally:
        child.kill()
        child.wait()
