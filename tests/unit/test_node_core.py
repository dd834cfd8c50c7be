"""The node agent's pure core (binding rules) and its binders, without a broker."""

from __future__ import annotations

import os
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples

from gpualloc.agent.node.binders import BindError, FileBinder, HookBinder, file_name, job_of
from gpualloc.agent.node.core import Action, NodeState
from gpualloc.schemas.commits import split
from gpualloc.schemas.events import envelope
from gpualloc.schemas.published import AllocationDecided, PlanCommitted

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def commit(
    seq: int, assignments: dict[str, list[int]], step: int | None = None, started: list[str] | None = None
) -> PlanCommitted:
    return PlanCommitted(
        step=seq if step is None else step,
        seq=seq,
        step_start=T0,
        assignments=assignments,
        source="heuristic",
        objective=0.0,
        started=started or [],
    )


def decision(job_id: str, gpus: list[int], action: str = "start", start_step: int | None = 0) -> AllocationDecided:
    return AllocationDecided(
        job_id=job_id,
        action=action,
        gpus=gpus,
        start_step=start_step,
        reason="test",
        input_event_id="in-" + job_id,
        latency_ms=0.1,
    )


def node(n: int = 0, size: int = 8) -> NodeState:
    return NodeState(node=n, first_gpu=n * size, gpus=size)


def kinds(actions: list[Action]) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(a.kind, a.job_id, a.local_ids) for a in actions]


# ---- the core -------------------------------------------------------------------------------


def test_fast_path_binds_start_at_once() -> None:
    s = node(1)
    [a] = s.on_decision(decision("j", [9, 10]))
    assert a == Action("bind", "j", (9, 10), (1, 2), 0)
    assert s.bound == {"j": (9, 10)}


def test_decisions_other_than_start_or_off_node_bind_nothing() -> None:
    s = node(0)
    assert s.on_decision(decision("p", [0, 1], action="planned", start_step=3)) == []
    assert s.on_decision(decision("q", [], action="queued", start_step=None)) == []
    assert s.on_decision(decision("other", [8, 9])) == []  # node 1's GPUs
    assert s.bound == {}
    assert s.is_app("p") is False and s.is_app("q") is False


def test_commit_after_fast_path_yields_nothing_new() -> None:
    s = node(0)
    assert len(s.on_decision(decision("j", [0, 1], start_step=1))) == 1
    assert s.on_commit(commit(1, {"j": [0, 1]}, started=["j"])) == []


def test_commit_reconciles_releases_then_binds() -> None:
    s = node(0)
    s.on_commit(commit(1, {"a": [0, 1], "b": [2, 3]}))
    actions = s.on_commit(commit(2, {"b": [2, 3], "c": [4]}))
    assert kinds(actions) == [("release", "a", (0, 1)), ("bind", "c", (4,))]
    assert s.bound == {"b": (2, 3), "c": (4,)}
    assert all(a.step == 2 for a in actions)


def test_node_local_mapping_and_multi_node_job() -> None:
    n0, n1 = node(0), node(1)
    c = commit(1, {"big": [6, 7, 8, 9], "far": [20]})
    assert kinds(n0.on_commit(c)) == [("bind", "big", (6, 7))]
    [a] = n1.on_commit(c)
    assert (a.global_ids, a.local_ids) == ((8, 9), (0, 1))


def test_redelivery_and_stale_seq_are_ignored() -> None:
    s = node(0)
    c1, c2 = commit(1, {"a": [0]}), commit(2, {"b": [1]})
    assert len(s.on_commit(c1)) == 1
    assert s.on_commit(c1) == []
    assert len(s.on_commit(c2)) == 2
    assert s.on_commit(c1) == []  # an older seq arriving late changes nothing
    assert s.bound == {"b": (1,)} and s.last == (2, 2)


def test_same_event_id_twice_yields_nothing() -> None:
    s = node(0)
    msg = envelope("plan.committed", commit(1, {"a": [0]}), T0, "e1")
    assert len(s.on_message(msg)) == 1
    assert s.on_message(msg) == []
    other_pool = envelope("plan.committed", commit(5, {"z": [0]}), T0, "e2", pool="other")
    assert s.on_message(other_pool) == []


def test_malformed_message_raises_value_error_and_changes_nothing() -> None:
    s = node(0)
    s.on_commit(commit(1, {"a": [0]}))
    bad = envelope("plan.committed", commit(2, {}), T0, "e3")
    bad["payload"]["seq"] = "two"
    with pytest.raises(ValueError):
        s.on_message(bad)
    with pytest.raises(ValueError):
        s.on_message({"type": "plan.committed"})
    assert s.bound == {"a": (0,)} and s.last == (1, 1)


def test_app_set_changes_rebind_with_the_new_set() -> None:
    s = node(0)
    s.on_commit(commit(1, {"app": [0, 1]}))
    assert kinds(s.on_commit(commit(2, {"app": [0, 1, 2]}))) == [("bind", "app", (0, 1, 2))]
    assert kinds(s.on_commit(commit(3, {"app": [8]}))) == [("release", "app", (0, 1, 2))]  # moved off-node


def test_an_app_giving_up_some_of_its_gpus_here_has_them_shrunk_before_its_new_set_is_bound() -> None:
    s = node(0)
    s.on_commit(commit(1, {"app": [0, 1, 2, 3]}))
    assert kinds(s.on_commit(commit(2, {"app": [0, 1]}))) == [("shrink", "app", (2, 3)), ("bind", "app", (0, 1))]
    moved = s.on_commit(commit(3, {"app": [1, 4]}))  # gives up 0, takes 4
    assert kinds(moved) == [("shrink", "app", (0,)), ("bind", "app", (1, 4))]
    [shrink, _] = s.on_commit(commit(4, {"app": [4]}))
    s.failed(shrink)  # a failed shrink leaves the new set bound: the bind follows
    assert s.bound == {"app": (4,)}


def test_stale_decision_after_newer_commit_is_ignored() -> None:
    s = node(0)
    s.on_commit(commit(5, {"x": [0]}))
    assert s.on_decision(decision("old", [1], start_step=3)) == []
    assert s.on_decision(decision("held", [0], start_step=5)) == []  # GPU 0 is x's
    assert len(s.on_decision(decision("new", [1], start_step=6))) == 1


def test_resync_releases_stale_and_binds_missing() -> None:
    s = node(1)
    record = {"stale": [0, 1], "kept": [2], "moved": [3]}
    actions = s.resync(record, commit(9, {"kept": [10], "moved": [11, 12], "new": [15]}))
    assert kinds(actions) == [("release", "stale", (0, 1)), ("bind", "moved", (3, 4)), ("bind", "new", (7,))]
    assert s.resync({"a": [0]}, None) == [] and s.bound == {"a": (8,)}  # no commit: keep the record


def test_failed_bind_is_retried_and_failed_release_kept() -> None:
    s = node(0)
    [a] = s.on_commit(commit(1, {"a": [0]}))
    s.failed(a)
    assert s.bound == {}
    assert kinds(s.on_commit(commit(2, {"a": [0]}))) == [("bind", "a", (0,))]
    [r] = s.on_commit(commit(3, {}))
    s.failed(r)
    assert kinds(s.on_commit(commit(4, {}))) == [("release", "a", (0,))]


def test_job_or_app() -> None:
    s = node(0)
    s.on_commit(commit(1, {"old": [0]}))
    s.on_decision(decision("j", [1], start_step=2))
    s.on_commit(commit(2, {"old": [0], "j": [1], "k": [2], "app": [3]}, started=["j", "k"]))
    assert [s.is_app(x) for x in ("old", "j", "k", "app")] == [None, False, False, True]


ASSIGNMENTS = st.lists(st.integers(0, 5), min_size=16, max_size=16).map(
    lambda owners: {f"id{o}": [g for g in range(16) if owners[g] == o] for o in set(owners) if o}
)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(ASSIGNMENTS, min_size=1, max_size=8), st.data())
def test_replay_with_duplicates_tracks_the_last_commit(plans: list[dict[str, list[int]]], data: st.DataObject) -> None:
    commits = [envelope("plan.committed", commit(i + 1, a), T0, f"c{i}") for i, a in enumerate(plans)]
    # at-least-once delivery: each commit once in order, with redeliveries of earlier ones mixed in
    # (same event id, or a fresh one so that only the seq tells it is stale)
    stream = []
    for i, c in enumerate(commits):
        stream.append(c)
        for k, fresh in data.draw(st.lists(st.tuples(st.integers(0, i), st.booleans()), max_size=3)):
            stream.append({**commits[k], "event_id": f"again{len(stream)}"} if fresh else commits[k])
    for n in (0, 1):
        s, binder = node(n), {}
        for msg in stream:
            for a in s.on_message(msg):
                if a.kind == "bind":
                    binder[a.job_id] = a.local_ids
                else:
                    assert binder.pop(a.job_id) is not None
            seq = s.last[1]
            expected = {
                j: tuple(g - 8 * n for g in gs if 8 * n <= g < 8 * n + 8)
                for j, gs in commits[seq - 1]["payload"]["assignments"].items()
            }
            expected = {j: gs for j, gs in expected.items() if gs}
            assert binder == expected
            assert {j: tuple(g - 8 * n for g in gs) for j, gs in s.bound.items()} == expected
        assert s.last[1] == len(commits)


# ---- FileBinder -----------------------------------------------------------------------------


def test_file_binder_writes_env_file_and_releases(tmp_path: Path) -> None:
    b = FileBinder(tmp_path)
    b.bind("job-1", [0, 1], [8, 9])
    text = (tmp_path / "job-1.env").read_text()
    assert text.splitlines() == ["CUDA_VISIBLE_DEVICES=0,1", "GPUALLOC_JOB=job-1", "GPUALLOC_GPUS=8,9"]
    b.bind("job-1", [2], [10])  # re-bind replaces
    assert b.bound() == {"job-1": [2]}
    assert [p.name for p in tmp_path.iterdir()] == ["job-1.env"]  # no temp file left behind
    b.release("job-1")
    b.release("job-1")  # releasing twice is fine
    assert b.bound() == {} and list(tmp_path.iterdir()) == []


def test_file_binder_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = FileBinder(tmp_path)
    b.bind("j", [0], [0])
    replaced: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(src: str, dst: str) -> None:
        replaced.append((os.fspath(src), os.fspath(dst)))
        assert (tmp_path / "j.env").read_text().startswith("CUDA_VISIBLE_DEVICES=0\n")  # old content intact
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    b.bind("j", [3], [3])
    [(src, dst)] = replaced
    assert Path(src).parent == tmp_path and Path(dst) == tmp_path / "j.env"
    assert (tmp_path / "j.env").read_text().startswith("CUDA_VISIBLE_DEVICES=3\n")


@pytest.mark.parametrize("job_id", ["../../etc/x", "..", ".", ".hidden", "a/b", "a b;rm -rf x", "ü", "%41"])
def test_file_binder_safe_names(tmp_path: Path, job_id: str) -> None:
    d = tmp_path / "binds"
    b = FileBinder(d)
    b.bind(job_id, [0], [0])
    [path] = list(d.iterdir())
    assert path.parent == d and not path.name.startswith(".") and "/" not in path.name
    assert set(path.name) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-%")
    assert job_of(path.name) == job_id and b.bound() == {job_id: [0]}
    assert list(tmp_path.iterdir()) == [d]  # nothing escaped the directory
    b.release(job_id)
    assert list(d.iterdir()) == []


def test_file_binder_quotes_the_job_for_sourcing(tmp_path: Path) -> None:
    FileBinder(tmp_path).bind("a;touch pwned", [0], [0])
    [path] = list(tmp_path.iterdir())
    assert "GPUALLOC_JOB='a;touch pwned'" in path.read_text()


@pytest.mark.parametrize("job_id", ["", "a\nb", "x" * 300])
def test_file_binder_rejects_bad_ids(tmp_path: Path, job_id: str) -> None:
    with pytest.raises(BindError):
        FileBinder(tmp_path).bind(job_id, [0], [0])
    assert list(tmp_path.iterdir()) == []


def test_file_name_round_trips() -> None:
    assert file_name("job-1.a_b") == "job-1.a_b.env"
    assert file_name("../x") == "%2E.%2Fx.env"


# ---- HookBinder -----------------------------------------------------------------------------

HOOK = textwrap.dedent("""\
    import json, os, sys
    log, args = sys.argv[1], sys.argv[2:]
    if os.environ.get("HOOK_FAIL"):
        sys.stderr.write("no such device\\n")
        sys.exit(3)
    with open(log, "a") as f:
        f.write(json.dumps({"args": args, "gpus": os.environ.get("GPUALLOC_GPUS")}) + "\\n")
    """)


def hook(tmp_path: Path) -> tuple[list[str], Path]:
    script, log = tmp_path / "hook.py", tmp_path / "calls.jsonl"
    script.write_text(HOOK)
    return [sys.executable, str(script), str(log)], log


def calls(log: Path) -> list[dict]:
    import json

    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_hook_binder_passes_ids_as_literal_arguments(tmp_path: Path) -> None:
    argv, log = hook(tmp_path)
    b = HookBinder(argv, state_dir=tmp_path / "state")
    b.bind("a;rm -rf x", [0, 1], [8, 9])
    b.bind("$(touch pwned) `id`", [2], [10])
    assert b.bound() == {"a;rm -rf x": [0, 1], "$(touch pwned) `id`": [2]}
    b.release("a;rm -rf x")
    assert [c["args"] for c in calls(log)] == [
        ["bind", "a;rm -rf x", "0,1"],
        ["bind", "$(touch pwned) `id`", "2"],
        ["release", "a;rm -rf x"],
    ]
    assert calls(log)[0]["gpus"] == "8,9"
    assert not (tmp_path / "x").exists() and not any(tmp_path.glob("pwned"))
    assert HookBinder(argv, state_dir=tmp_path / "state").bound() == {"$(touch pwned) `id`": [2]}  # survives


def test_the_hook_is_told_which_gpus_an_app_gives_up(tmp_path: Path) -> None:
    argv, log = hook(tmp_path)
    b = HookBinder(argv, state_dir=tmp_path / "state")
    b.bind("app", [0, 1, 2], [8, 9, 10])
    b.shrink("app", [2])
    b.bind("app", [0, 1], [8, 9])
    assert [c["args"] for c in calls(log)] == [
        ["bind", "app", "0,1,2"],
        ["release", "app", "2"],
        ["bind", "app", "0,1"],
    ]
    assert b.bound() == {"app": [0, 1]}


def test_hook_binder_failure_raises_bind_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv, _ = hook(tmp_path)
    b = HookBinder(argv)
    monkeypatch.setenv("HOOK_FAIL", "1")
    with pytest.raises(BindError, match="exited 3: no such device"):
        b.bind("j", [0], [0])
    assert b.bound() == {}


def test_hook_binder_timeout_and_missing_command(tmp_path: Path) -> None:
    slow = tmp_path / "slow.py"
    slow.write_text("import time; time.sleep(10)\n")
    with pytest.raises(BindError, match="timed out"):
        HookBinder([sys.executable, str(slow)], timeout=0.5).bind("j", [0], [0])
    with pytest.raises(BindError, match="cannot run"):
        HookBinder([str(tmp_path / "missing")]).release("j")


# ---- the command line -----------------------------------------------------------------------


def parser():
    from gpualloc.agent.cli import build_parser

    return build_parser()


def test_cli_parses_a_node_agent() -> None:
    from gpualloc.agent.cli.arguments import settings_of

    args = parser().parse_args(
        [
            "node-agent",
            "--node",
            "1",
            "--gpus",
            "8-15",
            "--bootstrap",
            "h:9092",
            "--hook",
            "/bin/true",
            "x",
            "--bind-dir",
            "d",
        ]
    )
    assert (args.node, args.gpus, args.hook, args.bind_dir, settings_of(args).pool) == (
        1,
        range(8, 16),
        ["/bin/true", "x"],
        "d",
        "default",
    )


@pytest.mark.parametrize("bad", ["7-3", "a-b", "-1", "1-", "0-x"])
def test_cli_bad_gpu_range_names_the_option(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["node-agent", "--node", "0", f"--gpus={bad}", "--bootstrap", "h:1", "--bind-dir", "d"])
    assert "--gpus" in capsys.readouterr().err


def test_cli_needs_a_binder(capsys: pytest.CaptureFixture[str]) -> None:
    from gpualloc.agent.cli import main

    assert main(["node-agent", "--node", "0", "--gpus", "0-7", "--bootstrap", "h:1"]) == 2
    assert "--bind-dir" in capsys.readouterr().err


def test_a_commit_split_into_parts_is_applied_once_all_its_parts_are_in() -> None:
    s = node(0)
    first = envelope("plan.committed", commit(1, {"old": [0, 1], "keep": [2]}), T0, "default:commit:1")
    assert kinds(s.on_message(first)) == [("bind", "keep", (2,)), ("bind", "old", (0, 1))]
    assignments = {f"j{k}": [k % 8] for k in range(3, 8)} | {"keep": [2]} | {f"far{k}": [100 + k] for k in range(40)}
    parts = split(envelope("plan.committed", commit(2, assignments, started=["j3"]), T0, "default:commit:2"), 500)
    assert (
        len(parts) >= 3 and parts[0]["event_id"] == "default:commit:2" and parts[1]["event_id"] == "default:commit:2:2"
    )
    last = parts.pop(1)
    for p in parts:  # a part alone changes nothing: the commit releases what it no longer assigns only whole
        assert s.on_message(p) == [] and s.bound == {"keep": (2,), "old": (0, 1)}
    assert s.on_message(parts[0]) == []  # a redelivered part
    actions = s.on_message(last)
    assert kinds(actions) == [("release", "old", (0, 1))] + [("bind", f"j{k}", (k,)) for k in range(3, 8)]
    assert s.last == (2, 2) and s.bound == {"keep": (2,)} | {f"j{k}": (k,) for k in range(3, 8)}
    assert s.on_message({**last, "event_id": "again"}) == []  # a part of a commit already applied


def test_a_part_names_its_place_in_the_commit() -> None:
    with pytest.raises(ValueError, match="part: 3 must be at most parts"):
        PlanCommitted(step=1, seq=1, step_start=T0, assignments={}, source="heuristic", objective=0.0, part=3, parts=2)
    with pytest.raises(ValueError, match=r"holders\['a'\]\[0\].*within 8 GPUs x 4 steps"):
        PlanCommitted(
            step=1,
            seq=1,
            step_start=T0,
            assignments={},
            source="heuristic",
            objective=0.0,
            plan={"gpus": 8, "steps": 4, "holders": {"a": [[0, 9, 0, 1]]}},
        )
