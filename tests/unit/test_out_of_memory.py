"""`job.failed` with `reason: out_of_memory`: the forecasters learn the job needs more there, and
a job whose count was forecast is decided anew at least the next count up; others as any failure."""

from __future__ import annotations

import pytest
from support.builders import T0, ev
from support.feature_jobs import LORA_7B

from gpualloc.schemas.events import JobFailed, parse_event
from gpualloc.solvers.planner.effects import Decided, Failed
from gpualloc.solvers.planner.interpreter import Pool

FULL_13B = {**LORA_7B, "variant": "full", "params_b": 13, "layers": 40, "hidden_size": 5120, "zero_stage": 3}
FULL_13B["gradient_checkpointing"] = True  # without, its activations alone pass an H100 at any count


def pool(gpus: int = 64) -> Pool:
    p = Pool()
    config = {"gpus": gpus, "gpus_per_node": 8, "horizon": 12, "step_minutes": 60}
    p.apply([ev("pool.configured", {**config, "gpu_type": "h100-80gb", "gpu_memory_gb": 80.0})], T0)
    return p


def submit(p: Pool, job_id: str, **payload) -> Decided:
    [decided] = p.apply([ev("job.submitted", {"id": job_id, "kind": "training", "priority": 5, **payload})], T0)
    assert isinstance(decided, Decided)
    return decided


def test_a_forecast_job_out_of_memory_is_decided_anew_larger_and_teaches_the_forecasters():
    p = pool()
    first = submit(p, "j", features=FULL_13B).decision
    assert first.action == "start"
    ran = len(first.gpus)
    effects = p.apply([ev("job.failed", {"id": "j", "reason": "out_of_memory", "detail": "CUDA OOM"})], T0)
    failed, decided = effects
    again = p.planner.queued.get("j") or p.planner.running["j"].spec
    assert isinstance(failed, Failed) and isinstance(decided, Decided) and decided.decision.job_id == "j"
    assert failed.detail == f"CUDA OOM; re-queued at {again.gpus} GPUs after running out of memory at {ran}"
    assert again.gpus >= 2 * ran and again.forecast is not None and again.forecast.gpus == again.gpus
    later = submit(p, "k", features=FULL_13B).decision  # the same job again: sized no smaller
    assert (p.planner.queued.get("k") or p.planner.running["k"].spec).gpus >= 2 * ran or later.action == "queued"


def test_a_job_whose_count_was_given_or_that_failed_otherwise_is_re_queued_as_it_was():
    p = pool()
    submit(p, "given", gpus=4, duration=3, features=FULL_13B)
    [failed] = p.apply([ev("job.failed", {"id": "given", "reason": "out_of_memory"})], T0)
    assert isinstance(failed, Failed) and p.planner.queued["given"].gpus == 4
    submit(p, "plain", features=FULL_13B)
    gpus = (p.planner.queued.get("plain") or p.planner.running["plain"].spec).gpus
    [failed] = p.apply([ev("job.failed", {"id": "plain", "reason": "error", "detail": "segfault"})], T0)
    assert failed.detail == "segfault" and p.planner.queued["plain"].gpus == gpus


def test_a_job_the_pool_cannot_give_more_is_dropped_with_the_reason():
    p = pool(gpus=8)
    submit(p, "big", features=FULL_13B)
    p.apply([ev("job.failed", {"id": "big", "reason": "out_of_memory"})], T0)
    for _ in range(4):  # each failure doubles it, until the pool has no more to give
        if "big" not in p.planner.queued and "big" not in p.planner.running:
            break
        effects = p.apply([ev("job.failed", {"id": "big", "reason": "out_of_memory"})], T0)
    assert "big" not in p.planner.queued and "big" not in p.planner.running
    assert "dropped" in effects[0].detail


def failure(reason: str) -> dict:
    return {
        "event_id": "f",
        "type": "job.failed",
        "pool": "p",
        "occurred_at": T0.isoformat(),
        "payload": {"id": "j", "reason": reason},
    }


def test_the_reason_is_read_and_a_bad_one_named():
    _, payload = parse_event(failure("out_of_memory"))
    assert isinstance(payload, JobFailed) and payload.reason == "out_of_memory"
    with pytest.raises(ValueError, match="reason"):
        parse_event(failure("tired"))
