"""Every rejection of the contract ("Input that is rejected") gives a message naming the field."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError
from support.builders import app, batch, scenario_dict

from gpualloc.schemas import Scenario, describe


def messages(data: dict) -> list[str]:
    with pytest.raises(ValidationError) as info:
        Scenario.model_validate(data)
    lines = describe(info.value)
    assert lines, "a rejection must come with at least one message"
    return lines


def assert_names(lines: list[str], field: str, *words: str) -> None:
    """Some line names `field` (e.g. `jobs[1].gpus`; the "(id 'x')" tag is ignored) and the rule."""
    plain = [re.sub(r" \(id '[^']*'\)", "", line) for line in lines]
    hits = [line for line in plain if field in line and all(w in line for w in words)]
    assert hits, f"no message names {field!r} with {words}: {lines}"


def test_valid_scenario_is_accepted():
    sc = Scenario.model_validate(scenario_dict(4, 3, [batch("a", 2, 1), app("r", [1, 2, 1], current=[3])]))
    assert sc.node_size == 4 and [j.id for j in sc.jobs] == ["a", "r"]


def test_duplicate_ids():
    assert_names(messages(scenario_dict(4, 2, [batch("a", 1, 1), batch("a", 2, 1)])), "jobs[1]", "duplicate id")


@pytest.mark.parametrize(
    "mutate, field, rule",
    [
        (lambda d: d.update(gpus=0), "gpus", "greater than or equal to 1"),
        (lambda d: d.update(horizon=0), "horizon", "greater than or equal to 1"),
        (lambda d: d.update(time_decay=0), "time_decay", "greater than 0"),
        (lambda d: d.update(time_decay=1.5), "time_decay", "less than or equal to 1"),
        (lambda d: d.update(realtime_penalty=-1), "realtime_penalty", "greater than or equal to 0"),
        (lambda d: d.update(swap_cap=-1), "swap_cap", "greater than or equal to 0"),
        (lambda d: d.update(step_minutes=0), "step_minutes", "greater than or equal to 1"),
        (lambda d: d["jobs"][0].update(priority=0), "jobs[0].priority", "greater than 0"),
        (lambda d: d["jobs"][0].update(duration=0), "jobs[0].duration", "greater than or equal to 1"),
        (lambda d: d["jobs"][0].update(arrival=-1), "jobs[0].arrival", "greater than or equal to 0"),
        (lambda d: d["jobs"][0].update(gpus=3), "jobs[0].gpus", "power of two"),
        (lambda d: d["jobs"][0].update(gpus=2.0), "jobs[0].gpus", "integer"),
        (lambda d: d["jobs"][0].update(kind="gaming"), "jobs[0]", "tag"),
        (lambda d: d["jobs"][1].update(demand=[1, -1]), "jobs[1].demand[1]", "greater than or equal to 0"),
        (lambda d: d["jobs"][1].update(swap_cap=-2), "jobs[1].swap_cap", "greater than or equal to 0"),
        (lambda d: d["jobs"][1].update(max_gpus=5), "jobs[1].max_gpus", "above the pool size"),
        (lambda d: d.update(gpus_per_node=3), "gpus_per_node", "must divide gpus"),
    ],
)
def test_field_out_of_range(mutate, field, rule):
    data = scenario_dict(4, 2, [batch("a", 1, 1), app("r", [1, 1])])
    mutate(data)
    assert_names(messages(data), field, rule)


def test_demand_of_wrong_length():
    assert_names(messages(scenario_dict(4, 3, [app("r", [1, 1])])), "jobs[0].demand", "horizon=3")


def test_running_gpus_out_of_range():
    data = scenario_dict(4, 2, [batch("a", 2, 3, running=([3, 4], 1))])
    assert_names(messages(data), "jobs[0].running.gpus", "out of range")


def test_running_gpus_shared_by_two_running_jobs():
    data = scenario_dict(4, 2, [batch("a", 2, 3, running=([0, 1], 1)), batch("b", 1, 3, running=([1], 2))])
    assert_names(messages(data), "jobs[1]", "running.gpus", "already held by running job 'a'")


def test_running_gpus_must_match_size():
    data = scenario_dict(4, 2, [batch("a", 2, 3, running=([0], 1))])
    assert_names(messages(data), "jobs[0].running.gpus", "exactly gpus=2")


def test_current_overlapping_a_running_job():
    data = scenario_dict(4, 2, [batch("a", 2, 3, running=([0, 1], 1)), app("r", [1, 1], current=[1, 2])])
    assert_names(messages(data), "jobs[1]", "current", "held by running job 'a'")


def test_current_shared_by_two_apps():
    data = scenario_dict(4, 2, [app("r", [1, 1], current=[0, 1]), app("s", [1, 1], current=[1])])
    assert_names(messages(data), "current", "also the current GPU of 'r'")


def test_min_above_max():
    data = scenario_dict(4, 2, [app("r", [1, 1], min_gpus=3, max_gpus=2)])
    assert_names(messages(data), "jobs[0]", "min_gpus", "above max_gpus")


def test_floors_plus_running_above_the_pool():
    # Step 0: floors 2 + running 3 = 5 > 4 GPUs.
    data = scenario_dict(
        4, 2, [batch("a", 2, 3, running=([0, 1], 1)), batch("b", 1, 3, running=([2], 1)), app("r", [1, 1], min_gpus=2)]
    )
    assert_names(messages(data), "min_gpus", "step 0", "exceeds gpus (4)")


def test_batch_larger_than_the_pool():
    assert_names(messages(scenario_dict(4, 2, [batch("a", 8, 1)])), "jobs[0].gpus", "larger than the pool")


def test_batch_larger_than_a_node_and_not_whole_nodes():
    data = scenario_dict(12, 2, [batch("a", 8, 1)], gpus_per_node=6)
    assert_names(messages(data), "jobs[0].gpus", "whole nodes", "gpus_per_node 6")


def test_every_breach_is_reported_at_once():
    data = scenario_dict(4, 2, [batch("a", 1, 1), batch("a", 8, 1), app("r", [1], min_gpus=2, max_gpus=1)])
    lines = messages(data)
    assert_names(lines, "jobs[1]", "duplicate id")
    assert_names(lines, "jobs[1].gpus", "larger than the pool")
    assert_names(lines, "jobs[2].demand", "horizon=2")
    assert_names(lines, "jobs[2]", "min_gpus", "above max_gpus")


def test_invalid_json_names_the_document():
    with pytest.raises(ValidationError) as info:
        Scenario.model_validate_json('{"name": ')
    assert any("Invalid JSON" in line for line in describe(info.value))


def test_current_overlapping_a_running_job_listed_later():
    data = scenario_dict(4, 2, [app("r", [1, 1], current=[1]), batch("a", 2, 3, running=([0, 1], 1))])
    assert_names(messages(data), "jobs[0]", "current", "held by running job 'a'")


def test_current_that_cannot_reach_its_floor_or_ceiling_at_step_zero():
    # R4 lets an app add or shed only swap_cap GPUs at step 0, so `current` must be within
    # swap_cap of [min_gpus, max_gpus].
    low = scenario_dict(6, 2, [app("r", [3, 3], current=[0], min_gpus=4, swap_cap=2)])
    assert_names(messages(low), "jobs[0].current", "min_gpus=4")
    high = scenario_dict(6, 2, [app("r", [1, 1], current=[0, 1, 2, 3], max_gpus=1, swap_cap=2)])
    assert_names(messages(high), "jobs[0].current", "max_gpus=1")
