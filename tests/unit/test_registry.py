"""The policy registry: one module plus one entry makes a policy that the CLI, the plan schema,
the simulator and the validator all know; online policies are compositions of entries."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from support.builders import app, batch, make

from gpualloc.agent.cli import main
from gpualloc.generators.traces import generate_trace
from gpualloc.schemas import Plan
from gpualloc.schemas.events import parse_event
from gpualloc.solvers import POLICIES
from gpualloc.solvers.grid import to_grid
from gpualloc.solvers.legality import R4
from gpualloc.solvers.policies import online_policy, plan_names, policy
from gpualloc.solvers.policies.fifo import fifo_schedule
from gpualloc.solvers.policies.solution import Policy, Solution
from gpualloc.solvers.simulation.report import executed_violations
from gpualloc.solvers.simulation.simulator import SimOptions, simulate

MIXED = "benchmarks/scenarios/mixed_control.json"


@pytest.fixture
def lazy(monkeypatch):
    """A new policy, registered the way the README says: one entry (here its module is FIFO's
    packing without reservations, dressed as a policy of its own)."""
    entry = Policy(
        "lazy",
        "Lazy",
        "#ff7f0e",
        lambda problem, options: Solution(fifo_schedule(problem)),
        exempt=frozenset({"R3-realtime", R4}),
    )
    monkeypatch.setitem(POLICIES, "lazy", entry)
    return entry


def test_names_aliases_and_plan_names_resolve_to_one_entry():
    assert policy("milp") is policy("full-mode") is POLICIES["full-mode"]
    assert policy("full-mode").output_name == "milp" and "milp" in plan_names()
    with pytest.raises(ValueError, match="scheduler: 'quantum' is not one of"):
        policy("quantum")


def test_online_policies_compose_registered_ones():
    assert online_policy("heuristic+milp") == online_policy("full-mode")
    full = online_policy("full-mode")
    assert (full.name, full.hot.name, full.full_mode.name) == ("full-mode", "heuristic", "full-mode")
    assert online_policy("fifo+full-mode").name == "fifo+full-mode"
    assert online_policy("heuristic").full_mode is None
    with pytest.raises(ValueError, match="cannot answer arrivals"):
        online_policy("full-mode+heuristic")


def test_exemptions_are_the_registrys_data():
    _, problem = make(4, 3, [app("r", [2, 2, 2], swap_cap=0, current=[0])])
    grid = to_grid(problem, fifo_schedule(problem))  # FIFO reserves the peak at once: 1 -> 2 GPUs
    assert [v.rule for v in policy("heuristic").check(problem, grid)] == ["R4"]
    assert policy("fifo").check(problem, grid) == []


def test_a_new_policy_is_one_entry_everywhere(lazy, tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["solve", MIXED, "--scheduler", "lazy", "--out", str(out)]) == 0
    plan = Plan.model_validate_json(out.read_text())
    assert plan.scheduler == "lazy" and plan.metrics.scheduled > 0
    assert main(["check", MIXED, str(out)]) == 0 and "legal" in capsys.readouterr().out
    events = [parse_event(e) for e in generate_trace(gpus=8, days=1, jobs=6, apps=1, seed=1)]
    sim = simulate(events, SimOptions(policies=("lazy", "heuristic")))
    assert set(sim.runs) == {"lazy", "heuristic"}
    assert executed_violations(sim, sim.runs["lazy"]) == []
    assert online_policy("lazy").colour == "#ff7f0e"


def test_an_unregistered_scheduler_in_a_plan_file_is_named(tmp_path, capsys):
    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps({"scenario": "x", "scheduler": "lazy", "grid": []}))
    assert main(["check", MIXED, str(bad)]) == 2
    assert "scheduler: Input should be a registered policy" in capsys.readouterr().err


def test_solution_certificate_becomes_plan_fields(monkeypatch, tmp_path):
    certified = replace(POLICIES["heuristic"], solve=lambda p, o: Solution(fifo_schedule(p), {"bound": 1.5}))
    monkeypatch.setitem(POLICIES, "heuristic", certified)
    out = tmp_path / "plan.json"
    main(["solve", MIXED, "--out", str(out)])
    assert json.loads(out.read_text())["bound"] == 1.5


def test_a_policy_breaking_rules_is_caught_by_its_own_check():
    _, problem = make(4, 2, [batch("a", 2, 2)])
    schedule = fifo_schedule(problem)
    schedule.batch["a"] = (0, 0b101)
    assert [v.rule for v in policy("heuristic").check(problem, to_grid(problem, schedule))] == ["R3"]
