"""This release, as its ledger records it and its reports name it: the package's version, the
planning rules' version, the ledger's schema, and which implementation of the heuristic runs.

`RULES` names what the planner decides from the same inputs: a change to any plan, decision or
commit a ledger replay would make is a new rules version (a golden ledger in the tests fails on a
change made without one). An agent replays the entries of its own rules exactly and holds the
entries of older rules to the facts they recorded (`gpualloc.solvers.planner.facts`); it refuses
a ledger or snapshot written by a newer release, whose meaning it cannot know.
"""

from __future__ import annotations

from typing import Any, Literal

from gpualloc import __version__
from gpualloc.solvers.policies.heuristic.native import AVAILABLE

# the planning rules' version. 1: the first; 2: a job submitted without a time limit gets the pool's default in
# force at its `occurred_at` (under 1, the default of the configuration the pool holds when it decides the job;
# kept for replays), and the heuristic grows an app to its demand within its ceiling at every step it holds the
# GPU (under 1 it could hold the GPU past a step where the app is back at its ceiling: a plan breaking R3);
# 3: node agents known alive (`node.heartbeat`: a silent node takes no new work, an unbound start is re-queued);
# a job given more GPUs than the apps' floors leave is rejected (it waited for ever), decisions warn of a forecast
# past the job's time limit and name what keeps an explicit size from fitting now; a reactive grant leaves out of
# the app's set its GPUs on nodes that take no new work
RULES = 3
LEDGER_SCHEMA = 2  # 1: entries without `facts` (rules 1); 2: entries record the facts their pass changed


class NewerRelease(ValueError):
    """A record written by a release newer than this one."""


def package_version() -> str:
    """The installed package's version ("0+unknown" when it runs from a tree not installed)."""
    return __version__


def heuristic_implementation() -> Literal["compiled", "python"]:
    """Which implementation of the heuristic plans here: the compiled one (solvers/native), or
    the Python reference (the same plans, 16-60x slower) where it was not built."""
    return "compiled" if AVAILABLE else "python"


def release() -> dict[str, Any]:
    """This release's names, as a ledger entry's `run` and `status --json` carry them."""
    return {
        "version": package_version(),
        "rules": RULES,
        "schema": LEDGER_SCHEMA,
        "heuristic": heuristic_implementation(),
    }


def release_words() -> str:
    """This release in words: `gpualloc 0.2.0 (rules 1, ledger schema 2, heuristic compiled)`."""
    r = release()
    return f"gpualloc {r['version']} (rules {r['rules']}, ledger schema {r['schema']}, heuristic {r['heuristic']})"


def refuse_newer(run: dict[str, Any], what: str) -> None:
    """NewerRelease when a record's `run` names a ledger schema or rules newer than this
    release's (`what`: the record, in words); a record without them is of schema 1, rules 1."""
    schema, rules = run.get("schema", 1), run.get("rules", 1)
    if not isinstance(schema, int) or not isinstance(rules, int):
        raise NewerRelease(f"{what}: its release is unreadable (schema {schema!r}, rules {rules!r})")
    if schema > LEDGER_SCHEMA or rules > RULES:
        raise NewerRelease(
            f"{what}: written by a newer release (schema {schema}, rules {rules}); this is {release_words()}: "
            "upgrade this agent, or roll the pool back as docs/operations.md says"
        )
