"""A release names itself where operators look: the agent's metrics, `status`, the demo; and it
refuses records of a newer release by name."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from gpualloc.agent.metrics import AgentMetrics
from gpualloc.agent.operator.status import agent_release, release_line
from gpualloc.solvers.release import LEDGER_SCHEMA, RULES, NewerRelease, package_version, refuse_newer, release


def test_the_metrics_name_the_release_and_the_heuristic_that_runs():
    text = generate_latest(AgentMetrics("p").registry).decode()
    r = release()
    assert (
        f'gpualloc_release_info{{heuristic="{r["heuristic"]}",pool="p",rules="{RULES}",schema="{LEDGER_SCHEMA}",'
        f'version="{package_version()}"}} 1.0'
    ) in text


def test_status_names_the_agents_release_and_warns_of_the_python_reference():
    compiled = agent_release({"version": "0.2.0", "rules": 1, "schema": 2, "heuristic": "compiled"})
    assert release_line(compiled) == ["agent: gpualloc 0.2.0 (rules 1, ledger schema 2, heuristic compiled)"]
    (line,) = release_line(agent_release({"version": "0.2.0", "rules": 1, "schema": 2, "heuristic": "python"}))
    assert "heuristic python) - the Python reference: 16-60x slower" in line
    assert agent_release({"policy": "heuristic"}) == {
        "version": "unknown",
        "rules": 1,
        "schema": 1,
        "heuristic": "unknown",
    }
    assert release_line(None) == []


def test_records_of_a_newer_release_are_refused_and_older_ones_taken():
    refuse_newer({}, "ledger entry 1")  # written before releases were named: schema 1, rules 1
    refuse_newer({"rules": RULES, "schema": LEDGER_SCHEMA}, "ledger entry 2")
    with pytest.raises(
        NewerRelease, match=rf"ledger entry 3: written by a newer release \(schema {LEDGER_SCHEMA}, rules {RULES + 1}\)"
    ):
        refuse_newer({"rules": RULES + 1, "schema": LEDGER_SCHEMA}, "ledger entry 3")
    with pytest.raises(NewerRelease, match="unreadable"):
        refuse_newer({"rules": "two"}, "ledger entry 4")
