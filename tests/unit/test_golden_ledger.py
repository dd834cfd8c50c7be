"""The planning rules' version names the plans: a golden ledger of fixed streams (arrivals sized
by hand and by features, completions, cancellations, traffic, a node down and up, time limits,
plans made ahead, an adopted full-mode plan) is replayed at every test run, and any change to a
decision, a commit or the facts a pass recorded fails here unless `RULES` (solvers/release.py)
was bumped with it. A bump writes the new golden ledger:

    GPUALLOC_WRITE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_golden_ledger.py

and every agent of the new release then judges the older rules' entries by the contract
(`gpualloc audit`) instead of replaying them exactly."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import orjson
from test_ledger import RUN, live, stream

from gpualloc.agent.operator.audit import _comparable
from gpualloc.solvers.release import RULES

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / f"ledger-rules-{RULES}.json"
STREAMS = ((2026, [9, 20, 33, 47, 60, 71], [1, 0, 2], 30, {12: True, 40: False}), (7, [15, 30, 45], [2, 1], None, {}))


def digests(run: dict = RUN) -> list[str]:
    """Each message and each entry's facts and commits, as a short digest, in order."""
    out = []
    for seed, cuts, commits, adopt_at, aheads in STREAMS:
        _, outputs, entries, _ = live(stream(seed, 90), cuts, commits, adopt_at=adopt_at, run=run, aheads=aheads)
        for m in outputs:
            out.append(_digest(_comparable(m)))
        for e in entries:
            out.append(_digest({"facts": e.facts, "commits": [c.model_dump(mode="json") for c in e.commits]}))
    return out


def _digest(data: object) -> str:
    return hashlib.sha256(orjson.dumps(data, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def test_plans_change_only_with_a_rules_version():
    made = digests()
    if os.environ.get("GPUALLOC_WRITE_GOLDEN"):
        GOLDEN.write_bytes(orjson.dumps({"rules": RULES, "digests": made}, option=orjson.OPT_INDENT_2) + b"\n")
    assert GOLDEN.exists(), f"no golden ledger for rules {RULES}: write it (this module's docstring says how)"
    golden = orjson.loads(GOLDEN.read_bytes())
    assert golden["rules"] == RULES
    first = next((k for k, (a, b) in enumerate(zip(made, golden["digests"])) if a != b), None)
    assert first is None and len(made) == len(golden["digests"]), (
        f"the planner's messages or recorded facts changed (first at record {first} of {len(made)}, "
        f"golden {len(golden['digests'])}) under rules {RULES}: a change to what the planner decides is a "
        "new rules version: bump RULES in solvers/release.py and write the golden ledger (module docstring)"
    )


def test_the_golden_ledger_tells_other_plans_apart():
    """The check above can fail: a planner that decides otherwise (FIFO's order, or the hot
    path at another effort) makes records the golden ledger does not hold."""
    golden = orjson.loads(GOLDEN.read_bytes())["digests"]
    for run in ({**RUN, "policy": "fifo"}, {**RUN, "replan_work": 0}):
        assert digests(run) != golden
