"""One truth for every operator view: an app's "need" and "short" are its observed need (the
contract's, `need.observed_need`) in `status`, `explain` and the shortfall metric alike, its
forecast is told as one with the quantile `--json` gives, and a refused input never rewrites a
live job or a registered app (`states`)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from gpualloc.agent.metrics import AgentMetrics
from gpualloc.agent.operator.states import App, Fold, Job
from gpualloc.agent.operator.status import lines, view
from gpualloc.solvers.planner.need import needs
from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.records import AppSpec, PoolConfig


def _shortfall_metric(planner: Planner, assignments: dict[str, list[int]], step: int) -> float:
    metrics = AgentMetrics("p")
    payload = {"step": step, "seq": 1, "source": "heuristic", "objective": 0.0, "assignments": assignments}
    metrics.committed(payload, planner.config.gpus, 0, 0, needs(planner.apps, step, planner.config.gpus))
    registry: CollectorRegistry = metrics.registry
    return registry.get_sample_value("gpualloc_realtime_shortfall_gpus", {"pool": "p"})


def test_status_and_the_shortfall_metric_count_short_against_the_observed_need_not_the_forecast():
    planner = Planner(PoolConfig(gpus=16, gpus_per_node=8, horizon=6))
    planner.realtime.register_app(AppSpec("chat", priority=5, min_gpus=1, max_gpus=8))
    planner.realtime.observe_traffic("chat", 0, 2)
    commit = planner.boundary.tick()  # step 0: chat holds the 2 GPUs it was seen to need
    planner.realtime.observe_traffic("chat", 1, 4)  # seen ahead: the next plan's forecast, not a need now
    assignments = {k: list(v) for k, v in commit.assignments.items()}
    payload = {"step": 0, "seq": 1, "step_start": "2026-12-01T00:00:00+00:00", "source": "heuristic"}
    status = view("p", planner, payload | {"objective": 1.0, "assignments": assignments}, [])
    (chat,) = status["apps"]
    assert (chat["need"], chat["held"], chat["shortfall"]) == (2, 2, 0)
    assert chat["forecast"]["steps"][0] == 4 and chat["forecast"]["from_step"] == 1
    assert _shortfall_metric(planner, assignments, 0) == 0
    text = "\n".join(lines(status))
    assert "chat             need 2 (observed), held 2 (GPUs 14-15)  (min 1, max 8)" in text and "SHORT" not in text
    # the quantile as `--json` gives it, the forecast labelled as one
    assert f"forecast from step 1 at demand quantile {chat['forecast']['quantile']:g}: 4, 4, 4" in text

    planner.realtime.observe_traffic("chat", 0, 3)  # a larger need in the committed step: short by 1
    status = view("p", planner, payload | {"objective": 1.0, "assignments": assignments}, [])
    assert status["apps"][0]["shortfall"] == 1 == _shortfall_metric(planner, assignments, 0)
    assert "need 3 (observed), held 2 (GPUs 14-15), SHORT 1" in "\n".join(lines(status))


def test_a_refused_second_submission_leaves_a_live_job_as_it_is():
    job = Job()
    assert job.submitted({"gpus": 4, "duration": 10})
    assert job.decided({"action": "start", "gpus": [0, 1, 2, 3], "start_step": 3, "reason": "", "input_event_id": "s1"})
    assert not job.submitted({"gpus": 8, "duration": 1})  # a second submission while it runs
    refusal = {"action": "rejected", "reason": "job id 'a' is already queued or running", "input_event_id": "s2"}
    assert not job.decided(refusal)
    assert (job.state, job.gpus, job.since, job.size) == ("running", [0, 1, 2, 3], 3, 4)
    assert [r.words() for r in job.refused] == [
        "a second submission (event s2) was rejected: job id 'a' is already queued or running"
    ]
    job.ended("completed")
    assert job.submitted({"gpus": 2, "duration": 1})  # its id is free again: a new job
    assert job.decided({"action": "rejected", "reason": "too big", "input_event_id": "s3"})
    assert (job.state, job.why) == ("rejected", "too big")


def test_an_app_is_registered_only_by_a_registration_no_dead_letter_answers():
    app = App()
    app.registered({"id": "x", "min_gpus": 1}, "r1")
    assert app.state == "registered"
    app.registered({"id": "x", "min_gpus": 5, "max_gpus": 4}, "r2")
    app.dead_letter("app.registered", "r2", "max_gpus: must be >= min_gpus")
    assert app.state == "registered" and app.accepted[0] == "r1"  # it keeps its registration
    assert [r.event_id for r in app.refused] == ["r2"]
    bad = App()
    bad.registered({"id": "bad", "min_gpus": 5, "max_gpus": 4}, "b1")
    bad.dead_letter("app.registered", "b1", "max_gpus: must be >= min_gpus")
    assert (bad.state, bad.why) == ("rejected", "max_gpus: must be >= min_gpus")

    fold = Fold()  # the same from the messages on the bus
    fold.read({"type": "app.registered", "pool": "p", "event_id": "b1", "payload": {"id": "bad"}})
    letter = '{"event_id": "b1", "type": "app.registered", "pool": "p", "payload": {"id": "bad"}}'
    fold.read({"type": "input.rejected", "pool": "p", "payload": {"reason": "no", "original": letter}})
    assert fold.app("p", "bad").state == "rejected"


def test_a_follow_keeps_only_live_jobs():
    fold = Fold()
    job = {"id": "a", "kind": "training", "priority": 5, "gpus": 4, "duration": 2}
    fold.read({"type": "job.submitted", "pool": "p", "event_id": "s1", "payload": job})
    decision = {"job_id": "a", "action": "start", "gpus": [0, 1, 2, 3], "reason": "", "input_event_id": "s1"}
    fold.read({"type": "allocation.decided", "pool": "p", "payload": decision})
    assert fold.job("p", "a").state == "running"
    fold.read({"type": "job.completed", "pool": "p", "payload": {"id": "a"}})
    assert ("p", "a") not in fold.jobs  # its id is free: a later submission is a new job
    letter = '{"event_id": "s2", "type": "job.submitted", "pool": "p", "payload": {"id": "b"}}'
    fold.read({"type": "job.submitted", "pool": "p", "event_id": "s2", "payload": {"id": "b"}})
    fold.read({"type": "input.rejected", "pool": "p", "payload": {"reason": "no", "original": letter}})
    assert fold.jobs == {}
