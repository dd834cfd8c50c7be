"""`gpualloc status` tells what the pool knows of its node agents (`node_watch.liveness`): nodes
without a live agent shown `no agent`, a start no agent has bound shown `started, not bound`, a
job bound on a node gone silent shown `unconfirmed`; a pool no node agent reports to as before."""

from __future__ import annotations

from datetime import timedelta

from support.builders import T0, ev

from gpualloc.agent.operator.status import lines, view
from gpualloc.solvers.planner.interpreter import Pool

S = timedelta(seconds=1)
POOL = {"gpus": 32, "gpus_per_node": 8, "horizon": 6}


def job(name: str) -> object:
    return ev("job.submitted", {"id": name, "kind": "training", "priority": 5, "gpus": 8, "duration": 4}, ref=name)


def beat(node: int) -> object:
    return ev("node.heartbeat", {"node": node, "interval_seconds": 10}, ref=node)


def test_status_shows_nodes_without_a_live_agent_and_starts_no_agent_has_bound():
    pool = Pool()
    pool.apply([ev("pool.configured", POOL)], T0)
    pool.apply([beat(0), beat(1), beat(2)], T0)
    pool.apply([job("kept"), job("lost")], T0 + S)
    node_of = {j: ((r.mask & -r.mask).bit_length() - 1) // 8 for j, r in pool.planner.running.items()}
    bound = ev("binding.reported", {"node": node_of["kept"], "job_id": "kept", "gpus": [], "status": "bound"})
    pool.apply([bound, beat(0), beat(1), beat(2)], T0 + 2 * S)
    early = view("p", pool.view, None, [], at=(T0 + 20 * S).timestamp())
    assert early["nodes"][3]["agent"] == "not reported yet" and early["nodes"][3]["state"] == "up"
    status = view("p", pool.view, None, [], at=(T0 + 31 * S).timestamp())
    nodes = {n["node"]: (n["state"], n["agent"]) for n in status["nodes"]}
    assert nodes[3] == ("no agent", "never reported") and nodes[0] == ("up", "live")
    binding = {r["id"]: r["binding"] for r in status["running"]}
    assert binding == {"kept": "bound", "lost": "started, not bound (30 s)"}
    text = "\n".join(lines(status))
    assert "node 3 no agent: 0 of 8 GPUs busy" in text and "node 3: agent never reported" in text
    assert "node agents: 3 live, 0 silent, 1 never reported" in text and "started, not bound (30 s)" in text
    # the agent of the node under `kept` stops: after the silence bound it is unconfirmed, not failed
    others = [beat(n) for n in (0, 1, 2) if n != node_of["kept"]]
    pool.apply(others, T0 + 40 * S)
    later = view("p", pool.view, None, [], at=(T0 + 41 * S).timestamp())
    assert {r["id"]: r["binding"] for r in later["running"]}["kept"] == "unconfirmed"
    assert later["nodes"][node_of["kept"]]["agent"].startswith("silent for ")


def test_a_pool_no_node_agent_reports_to_shows_no_agent_lines():
    pool = Pool()
    pool.apply([ev("pool.configured", POOL)], T0)
    pool.apply([job("a")], T0 + S)
    status = view("p", pool.view, None, [], at=(T0 + 3600 * S).timestamp())
    assert status["node_agents"] is None and {n["state"] for n in status["nodes"]} == {"up"}
    assert [r["binding"] for r in status["running"]] == [None]
    assert "node agents" not in "\n".join(lines(status))
