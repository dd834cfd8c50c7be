"""The operator commands (`gpualloc drain`, `cancel`, `fail`, `complete`, `resize`, `register-app`,
`submit`) against the real broker: each publishes its contract event (read back from its topic),
a running agent acts on what they say, and bad input exits 2 with one line naming the field and
the rule, publishing nothing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.builders import ROOT
from support.feature_jobs import LORA_7B
from support.kafka_broker import read_all, unique_topic

from gpualloc.agent.cli import main
from gpualloc.agent.operator.operate import live_pool
from gpualloc.agent.service.agent_service import AgentService
from gpualloc.bus.topics import Topics
from gpualloc.client import Client
from gpualloc.schemas.settings import AgentSettings, RollingFullMode

pytestmark = pytest.mark.kafka

FULL_13B = {**LORA_7B, "variant": "full", "params_b": 13, "layers": 40, "hidden_size": 5120, "zero_stage": 3}
FULL_13B["gradient_checkpointing"] = True  # sized by the forecasters: an out-of-memory failure re-sizes it


@pytest.fixture
def topics() -> Topics:
    return Topics.with_prefix(unique_topic("operate") + ".")


def cli(bootstrap: str, topics: Topics, capsys, *args: str) -> tuple[int, str, str]:
    """`gpualloc ARGS` in this process on the test's topics: (exit code, stdout, stderr)."""
    capsys.readouterr()
    code = main([*args, "--bootstrap", bootstrap, "--topic-prefix", topics.prefix])
    out, err = capsys.readouterr()
    return code, out, err


def published(bootstrap: str, topics: Topics, capsys, *args: str) -> dict[str, Any]:
    """The message a command published, as its `--json` prints it."""
    code, out, err = cli(bootstrap, topics, capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out.splitlines()[0])


def configure(bootstrap: str, topics: Topics, **config: Any) -> None:
    async def send() -> None:
        async with Client(bootstrap, topics=topics, source="test") as client:
            await client.configure(config)

    asyncio.run(send())


def wait_for(read: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    """`read()`'s first truthy value, tried until `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := read():
            return found
        time.sleep(0.2)
    raise AssertionError(f"no {what} within {timeout:.0f} s")


def messages(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    return asyncio.run(read_all(bootstrap, topic))


def commit_after(bootstrap: str, topics: Topics, sent: dict[str, Any]) -> dict[str, Any] | None:
    """The first commit made after the agent consumed message `sent` (its frontier past it)."""
    where = f"{sent['topic']}:{sent['partition']}"
    for m in messages(bootstrap, topics.commits):
        if m["payload"].get("frontier", {}).get(where, 0) > sent["offset"]:
            return m["payload"]
    return None


@contextlib.contextmanager
def running_agent(bootstrap: str, topics: Topics) -> Iterator[None]:
    """A pool agent on `topics` in a thread of its own (the CLI runs in this one, as a user's would)."""
    agent = AgentService(
        bootstrap,
        AgentSettings(step_seconds=0.5, full_mode=RollingFullMode(every=0), group_id=unique_topic("g")),
        topics,
    )
    started = threading.Event()
    loop: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def run() -> None:
        stop, ready = asyncio.Event(), asyncio.Event()
        loop.append((asyncio.get_running_loop(), stop))
        task = asyncio.create_task(agent.run(stop, ready))
        await asyncio.wait([task, asyncio.create_task(ready.wait())], return_when=asyncio.FIRST_COMPLETED)
        started.set()
        await task

    thread = threading.Thread(target=asyncio.run, args=(run(),), daemon=True)
    thread.start()
    assert started.wait(30) and thread.is_alive(), "the agent did not start"
    try:
        yield
    finally:
        running, stop = loop[0]
        running.call_soon_threadsafe(stop.set)
        thread.join(30)
        assert not thread.is_alive()


def test_each_command_publishes_its_event_on_its_topic(kafka_bootstrap, topics, capsys, tmp_path):
    pool = tmp_path / "pool.json"
    pool.write_text(json.dumps({"gpus": 32, "gpus_per_node": 8, "horizon": 6, "swap_cap": 1}))
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"id": "d", "kind": "training", "priority": 2, "gpus": 4, "duration": 3}))
    out = {
        "configure": published(kafka_bootstrap, topics, capsys, "configure", str(pool)),
        "drain": published(kafka_bootstrap, topics, capsys, "drain", "3", "--detail", "disk errors"),
        "undrain": published(kafka_bootstrap, topics, capsys, "undrain", "3"),
        "node-down": published(kafka_bootstrap, topics, capsys, "node-down", "2"),
        "cancel": published(kafka_bootstrap, topics, capsys, "cancel", "a", "--detail", "not needed"),
        "fail": published(kafka_bootstrap, topics, capsys, "fail", "b", "--reason", "out_of_memory"),
        "complete": published(
            kafka_bootstrap, topics, capsys, "complete", "c", "--gpus", "4", "--peak-memory-gb", "61.5", "--duration", "3"
        ),
        "resize": published(kafka_bootstrap, topics, capsys, "resize", "48"),
        "submit": published(kafka_bootstrap, topics, capsys, "submit", str(job), "--no-wait"),
        "register-app": published(
            kafka_bootstrap, topics, capsys, "register-app", "chat", "--priority", "5", "--min-gpus", "1",
            "--profile", ",".join(["2"] * 24),
        ),
    }  # fmt: skip
    by_id = {
        m["event_id"]: m for t in (topics.config, topics.jobs, topics.traffic) for m in messages(kafka_bootstrap, t)
    }
    for command, sent in out.items():
        on_topic = by_id[sent["event_id"]]  # as printed, so on its topic
        assert {k: sent[k] for k in on_topic} == on_topic and on_topic["pool"] == "default", command
        assert sent["topic"] == topics.of_type(on_topic["type"]), command
    payloads = {command: (sent["type"], sent["payload"]) for command, sent in out.items()}
    assert payloads["drain"] == ("node.status", {"node": 3, "state": "drained", "detail": "disk errors"})
    assert payloads["undrain"][1]["state"] == "up" and payloads["node-down"][1] == {
        "node": 2,
        "state": "down",
        "detail": "",
    }
    assert payloads["cancel"] == ("job.cancelled", {"id": "a", "detail": "not needed", "source": None})
    assert payloads["fail"][0] == "job.failed" and payloads["fail"][1]["reason"] == "out_of_memory"
    used = payloads["complete"][1]["used"]
    assert (used["gpus"], used["peak_memory_gb"], used["duration"], used["steps"]) == (4, 61.5, 3, None)
    assert payloads["configure"][0] == "pool.configured" and payloads["configure"][1]["gpus"] == 32
    assert payloads["configure"][1]["setup_seconds"] == 5.0  # the set-up window `configure` writes by default
    kind, config = payloads["resize"]  # the pool's configuration kept, its size changed
    assert kind == "pool.configured" and (config["gpus"], config["gpus_per_node"], config["horizon"]) == (48, 8, 6)
    assert config["swap_cap"] == 1 and config["setup_seconds"] == 5.0
    assert payloads["submit"][0] == "job.submitted" and payloads["submit"][1]["gpus"] == 4
    kind, app = payloads["register-app"]
    assert kind == "app.registered" and (app["id"], app["priority"], app["min_gpus"], app["profile"]) == (
        "chat",
        5.0,
        1,
        [2] * 24,
    )

    code, line, _ = cli(kafka_bootstrap, topics, capsys, "cancel", "a")  # the line: type, id, pool, where, event id
    [cancelled] = [m for m in messages(kafka_bootstrap, topics.jobs) if m["event_id"] in line]
    assert code == 0 and line.startswith("job.cancelled a: pool default, ") and f"{topics.jobs}:0:" in line
    assert cancelled["type"] == "job.cancelled" and line.rstrip().endswith(cancelled["event_id"])


def decision_of(bootstrap: str, topics: Topics, event_id: str) -> dict[str, Any] | None:
    """The agent's `allocation.decided` answering input event `event_id`."""
    found = [m["payload"] for m in messages(bootstrap, topics.decisions)]
    return next((d for d in found if d["input_event_id"] == event_id), None)


def test_a_running_agent_acts_on_drain_fail_and_cancel(kafka_bootstrap, topics, capsys, tmp_path):
    configure(kafka_bootstrap, topics, gpus=64, gpus_per_node=8, horizon=12, gpu_type="h100-80gb", gpu_memory_gb=80.0)
    with running_agent(kafka_bootstrap, topics):
        drain = published(kafka_bootstrap, topics, capsys, "drain", "0", "--detail", "maintenance")
        wait_for(lambda: commit_after(kafka_bootstrap, topics, drain), "commit after the drain")

        big = tmp_path / "big.json"
        big.write_text(json.dumps({"id": "big", "kind": "training", "priority": 9, "features": FULL_13B}))
        first = published(kafka_bootstrap, topics, capsys, "submit", str(big))  # waits for its decision
        decided = decision_of(kafka_bootstrap, topics, first["event_id"])
        assert decided is not None and decided["action"] == "start", decided
        ran = len(decided["gpus"])
        failed = published(kafka_bootstrap, topics, capsys, "fail", "big", "--reason", "out_of_memory")
        again = wait_for(lambda: decision_of(kafka_bootstrap, topics, failed["event_id"]), "re-sized decision")
        assert again["job_id"] == "big" and len(again["gpus"]) >= 2 * ran, again  # decided anew, larger

        for k in range(7):
            job = tmp_path / f"j{k}.json"
            job.write_text(json.dumps({"id": f"j{k}", "kind": "training", "priority": 1, "gpus": 8, "duration": 4}))
            code, out, err = cli(kafka_bootstrap, topics, capsys, "submit", str(job))
            lines = out.splitlines()
            assert code == 0 and lines[0].startswith(f"job.submitted j{k}: pool default, "), err
            assert lines[1].startswith(f"decided   j{k}: "), out  # the decision, as `tail` prints it
        decisions = [m["payload"] for m in messages(kafka_bootstrap, topics.decisions)]
        assert all(not set(d["gpus"]) & set(range(8)) for d in decisions), decisions  # none on the drained node
        started = sum(d["action"] == "start" for d in decisions if d["job_id"].startswith("j"))
        assert started == (56 - len(again["gpus"])) // 8  # the 56 GPUs not drained, less big's

        cancelled = published(kafka_bootstrap, topics, capsys, "cancel", "big")
        after = wait_for(lambda: commit_after(kafka_bootstrap, topics, cancelled), "commit after the cancel")
        assert "big" not in after["assignments"]
    assert messages(kafka_bootstrap, topics.deadletter) == []  # every command's event was taken


def test_bad_input_exits_2_with_one_line_naming_the_field_and_publishes_nothing(
    kafka_bootstrap, topics, capsys, tmp_path
):
    configure(kafka_bootstrap, topics, gpus=32, gpus_per_node=8)
    before = {t: len(messages(kafka_bootstrap, t)) for t in (topics.config, topics.jobs, topics.traffic)}
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"id": "x", ')
    no_size = tmp_path / "no_size.json"
    no_size.write_text('{"id": "x", "kind": "training", "priority": 1}')
    sized = tmp_path / "pool.json"
    sized.write_text('{"gpus": 32, "gpus_per_node": 8}')
    cases = [
        (("fail", "j", "--reason", "oom"), "fail: reason: Input should be 'out_of_memory'"),
        (("drain", "-1"), "drain: node: Input should be greater than or equal to 0"),
        (("drain", "4"), "drain: node: must be a node of pool 'default', 0 to 3 (32 GPUs in nodes of 8; got 4)"),
        (("undrain", "9"), "undrain: node: must be a node of pool 'default', 0 to 3"),
        (("resize", "30"), "resize: gpus_per_node: must divide gpus (8 does not divide 30)"),
        (("resize", "0"), "resize: gpus: Input should be greater than or equal to 1"),
        (("resize", "8192"), "resize: gpus: Input should be less than or equal to 4096"),
        (("cancel", "x" * 201), "cancel: id: String should have at most 200 characters"),
        (("complete", "j", "--gpus", "0"), "complete: used.gpus: Input should be greater than or equal to 1"),
        (("register-app", "chat"), "register-app: priority: give --priority P"),
        (("register-app", "chat", "--priority", "0"), "register-app: priority: Input should be greater than 0"),
        (("register-app", "chat", "--priority", "1", "--profile", "1,2"), "register-app: profile: List should"),
        (
            ("register-app", "bad", "--priority", "1", "--min-gpus", "5", "--max-gpus", "4"),
            "register-app: max_gpus: must be >= min_gpus (4 < 5)",
        ),
        (("submit", str(bad_json)), f"{bad_json}: not JSON"),
        (("configure", str(no_size)), "configure: gpus: Field required"),
        (("configure", str(sized), "--setup-seconds", "-1"), "configure: setup_seconds: Input should be greater"),
        (("submit", str(no_size)), "submit: gpus, duration: give both, or features for the forecaster"),
    ]
    for args, needle in cases:
        code, out, err = cli(kafka_bootstrap, topics, capsys, *args)
        assert code == 2 and out == "", (args, code, out, err)
        assert err.startswith(f"gpualloc: {needle}") and len(err.splitlines()) == 1, (args, err)
    after = {t: len(messages(kafka_bootstrap, t)) for t in before}
    assert after == before

    proc = subprocess.run(  # as a user runs it: no traceback
        [sys.executable, "-m", "gpualloc", "fail", "j", "--reason", "oom", "--bootstrap", kafka_bootstrap],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("gpualloc: fail: reason: Input should be 'out_of_memory'")
    assert len(proc.stderr.splitlines()) == 1


def test_without_an_agent_resize_refuses_and_submit_says_nothing_answered(kafka_bootstrap, topics, capsys, tmp_path):
    code, out, err = cli(kafka_bootstrap, topics, capsys, "resize", "16")
    assert code == 2 and out == ""
    assert err.splitlines()[-1].startswith("gpualloc: resize: gpus: pool 'default' has no pool.configured on ")
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"id": "d", "kind": "training", "priority": 2, "gpus": 4, "duration": 3}))
    code, out, err = cli(kafka_bootstrap, topics, capsys, "submit", str(job), "--timeout", "1")
    sent = [m["event_id"] for m in messages(kafka_bootstrap, topics.jobs)]  # none where the answers' topics are not
    assert code == 1 and out == "".join(f"job.submitted d: pool default, {topics.jobs}:0:0, event {e}\n" for e in sent)
    last = err.splitlines()[-1]  # the broker may make the answers' topics when asked about them
    assert last.startswith("gpualloc: submit: ") and last.endswith("agent running?)") and "1 s" in last, err


def test_nodes_and_sizes_at_the_contract_limits(kafka_bootstrap, topics, capsys, tmp_path):
    configure(kafka_bootstrap, topics, gpus=32, gpus_per_node=8)
    assert published(kafka_bootstrap, topics, capsys, "resize", "4096")["payload"]["gpus"] == 4096
    assert published(kafka_bootstrap, topics, capsys, "drain", "511")["payload"]["node"] == 511  # the last node
    code, _, err = cli(kafka_bootstrap, topics, capsys, "drain", "512")
    assert (
        code == 2
        and err
        == "gpualloc: drain: node: must be a node of pool 'default', 0 to 511 (4096 GPUs in nodes of 8; got 512)\n"
    )
    code, _, err = cli(kafka_bootstrap, topics, capsys, "resize", "4104")
    assert code == 2 and err == "gpualloc: resize: gpus: Input should be less than or equal to 4096\n"
    app = tmp_path / "app.json"
    app.write_text(json.dumps({"id": "chat", "priority": 2, "max_gpus": 4096}))
    assert published(kafka_bootstrap, topics, capsys, "register-app", "--file", str(app))["payload"]["max_gpus"] == 4096
    code, _, err = cli(kafka_bootstrap, topics, capsys, "register-app", "--file", str(app), "--priority", "3")
    assert code == 2 and err.startswith("gpualloc: register-app: --file: holds the whole app")


def live_gpus(bootstrap: str, topics: Topics) -> int | None:
    pool = asyncio.run(live_pool(bootstrap, topics, "default"))
    return None if pool is None else pool.view.config.gpus


def job_file(tmp_path, id: str, gpus: int, duration: int = 10) -> str:
    path = tmp_path / f"{id}.json"
    path.write_text(json.dumps({"id": id, "kind": "training", "priority": 2, "gpus": gpus, "duration": duration}))
    return str(path)


def test_submit_exits_4_on_a_rejected_decision_0_on_one_taken_and_0_without_waiting(
    kafka_bootstrap, topics, capsys, tmp_path
):
    configure(kafka_bootstrap, topics, gpus=32, gpus_per_node=8, horizon=12)
    with running_agent(kafka_bootstrap, topics):
        code, out, err = cli(kafka_bootstrap, topics, capsys, "submit", job_file(tmp_path, "a", 8))
        assert code == 0 and out.splitlines()[1].startswith("decided   a: "), (out, err)
        for job, why in (("a", "job id 'a' is already queued or running"), ("huge", "larger than the pool")):
            code, out, err = cli(
                kafka_bootstrap, topics, capsys, "submit", job_file(tmp_path, job, 64 if job == "huge" else 8)
            )
            assert code == 4, (job, out, err)  # neither a timeout (1) nor a dead letter (2)
            assert out.splitlines()[1].startswith(f"decided   {job}: ") and "rejected" in out.splitlines()[1], out
            assert err.startswith(f"gpualloc: submit: job {job!r} rejected: ") and why in err, err
        code, out, err = cli(kafka_bootstrap, topics, capsys, "submit", job_file(tmp_path, "later", 64), "--no-wait")
        assert code == 0 and len(out.splitlines()) == 1  # published, its decision not awaited


def test_a_reconfiguration_names_what_it_changes_and_refuses_to_fail_work_unless_forced(
    kafka_bootstrap, topics, capsys, tmp_path
):
    configure(kafka_bootstrap, topics, gpus=40, gpus_per_node=8, horizon=12)
    with running_agent(kafka_bootstrap, topics):
        for k in range(5):  # the pool full: five 8-GPU jobs running
            code, out, err = cli(kafka_bootstrap, topics, capsys, "submit", job_file(tmp_path, f"r{k}", 8))
            assert code == 0 and out.splitlines()[1].startswith(f"decided   r{k}: start "), (out, err)
        code, out, err = cli(kafka_bootstrap, topics, capsys, "submit", job_file(tmp_path, "q", 32))
        assert code == 0 and out.splitlines()[1].startswith(("decided   q: planned", "decided   q: queued")), out
        decided = {m["payload"]["job_id"]: m["payload"]["gpus"] for m in messages(kafka_bootstrap, topics.decisions)}
        leaving = sorted(job for job, gpus in decided.items() if job.startswith("r") and min(gpus) >= 24)
        assert len(leaving) == 2

        older = tmp_path / "older.json"  # an older file: fewer GPUs, and a time limit
        older.write_text(json.dumps({"gpus": 24, "gpus_per_node": 8, "horizon": 12, "time_limit": 30}))
        before = len(messages(kafka_bootstrap, topics.config))
        code, out, err = cli(kafka_bootstrap, topics, capsys, "configure", str(older))
        lines = err.splitlines()
        assert code == 2 and out == "", (out, err)
        assert lines[0] == "gpualloc: configure: gpus: refused: it fails 3 jobs (give --force to publish it anyway):"
        assert sorted(lines[1:]) == sorted(
            [
                *(
                    f"gpualloc: configure:   running job {job!r} on GPUs {min(decided[job])}-{max(decided[job])}: "
                    "the pool shrank to 24 GPUs and its GPUs left it"
                    for job in leaving
                ),
                "gpualloc: configure:   queued job 'q': its 32 GPUs no longer fit the pool of 24 GPUs",
            ]
        ), err
        code, out, err = cli(kafka_bootstrap, topics, capsys, "resize", "32")  # the same refusal for resize
        assert code == 2 and out == "" and err.startswith("gpualloc: resize: gpus: refused: it fails 1 job ("), err
        assert err.splitlines()[1].startswith(f"gpualloc: resize:   running job {leaving[-1]!r} on GPUs 32-39: "), err
        assert len(messages(kafka_bootstrap, topics.config)) == before  # nothing published

        code, out, err = cli(kafka_bootstrap, topics, capsys, "configure", str(older), "--force")
        assert code == 0 and out.startswith("pool.configured gpus 24 (was 40), time_limit 30 (was none): "), out
        warned = err.splitlines()
        assert len(warned) == 3 and all(x.startswith("gpualloc: configure: warning (--force): fails ") for x in warned)
        wait_for(lambda: live_gpus(kafka_bootstrap, topics) == 24, "the shrink taken by the agent")
        code, out, err = cli(kafka_bootstrap, topics, capsys, "resize", "48")  # growing fails nothing
        assert code == 0 and err == "" and out.startswith("pool.configured gpus 48 (was 24): "), (out, err)
        wait_for(lambda: live_gpus(kafka_bootstrap, topics) == 48, "the growth taken by the agent")
        newer = tmp_path / "newer.json"  # what the agent would dead-letter is refused here, unpublished
        newer.write_text(json.dumps({"gpus": 48, "gpus_per_node": 8, "horizon": 12, "rules": 999}))
        before = len(messages(kafka_bootstrap, topics.config))
        code, out, err = cli(kafka_bootstrap, topics, capsys, "configure", str(newer), "--force")
        assert code == 2 and out == "" and err.startswith("gpualloc: configure: rules: this configuration needs"), err
        assert len(messages(kafka_bootstrap, topics.config)) == before


def test_register_app_refuses_what_the_live_pools_agent_would_dead_letter(kafka_bootstrap, topics, capsys, tmp_path):
    configure(kafka_bootstrap, topics, gpus=16, gpus_per_node=8, horizon=12)
    with running_agent(kafka_bootstrap, topics):
        code, out, err = cli(kafka_bootstrap, topics, capsys, "submit", job_file(tmp_path, "big", 16))
        assert code == 0 and out.splitlines()[1].startswith("decided   big: start "), (out, err)
        before = len(messages(kafka_bootstrap, topics.traffic))
        code, out, err = cli(
            kafka_bootstrap, topics, capsys, "register-app", "chat", "--priority", "2", "--min-gpus", "4"
        )
        assert code == 2 and out == "" and err.startswith("gpualloc: register-app: min_gpus: "), err
        assert len(err.splitlines()) == 1 and len(messages(kafka_bootstrap, topics.traffic)) == before
        code, out, err = cli(kafka_bootstrap, topics, capsys, "register-app", "chat", "--priority", "2")
        assert code == 0 and out.startswith("app.registered chat: "), (out, err)  # no floor: taken
