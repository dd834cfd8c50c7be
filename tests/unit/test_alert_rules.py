"""The alert rules shipped in deploy/prometheus name only metrics the agents export, and the node
agents' metrics read what the pool knows of its agents (`node_watch.liveness`)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry
from support.builders import T0, ev

from gpualloc.agent.metrics import AgentMetrics, NodeMetrics
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.node_watch import liveness

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "alerts.yaml"


def exported(*registries: CollectorRegistry) -> set[str]:
    """Every series name the registries export, whether a labelled series has a value yet or not
    (a counter's with its `_total`)."""
    families = [m for r in registries for m in r.collect()]
    return {m.name + ("_total" if m.type == "counter" else "") for m in families} | {
        s.name for m in families for s in m.samples
    }


def test_every_alert_names_metrics_the_agents_export():
    rules = [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]
    names = exported(AgentMetrics("p").registry, NodeMetrics("p", 0).registry)
    assert len(rules) >= 5
    for rule in rules:
        assert rule["alert"] and rule["annotations"]["summary"]
        used = set(re.findall(r"gpualloc_\w+", rule["expr"]))
        assert used and used <= names, f"{rule['alert']}: {sorted(used - names)} not exported"


def gauge(metrics: AgentMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, {"pool": "p", **labels})


def test_the_node_agents_metrics_count_live_silent_and_never_heard_nodes_and_late_starts():
    pool = Pool()
    config = {"gpus": 32, "gpus_per_node": 8, "horizon": 6}
    pool.apply([ev("pool.configured", config)], T0)
    beats = [ev("node.heartbeat", {"node": n, "interval_seconds": 10}, ref=n) for n in (0, 1, 2)]
    pool.apply(beats, T0)
    job = {"id": "j", "kind": "training", "priority": 1, "gpus": 8, "duration": 4}
    pool.apply([ev("job.submitted", job)], T0 + timedelta(seconds=1))
    pool.apply(beats[:2], T0 + timedelta(seconds=35))  # node 2 silent now, node 3 never heard
    metrics = AgentMetrics("p")
    assert gauge(metrics, "gpualloc_node_agents", state="silent") == 0  # exported at 0 from the start
    metrics.watched(liveness(pool.view, (T0 + timedelta(seconds=35)).timestamp()))
    counts = {s: gauge(metrics, "gpualloc_node_agents", state=s) for s in ("live", "silent", "never")}
    assert counts == {"live": 2, "silent": 1, "never": 1}
    assert gauge(metrics, "gpualloc_starts_unbound") == 1  # 34 s since its start, past the 10 s bound
