"""`gpualloc explain`: a job walked through every state it can be in, on the messages the
dispatcher publishes (no broker), each state's last line saying where it stands; and `status`
saying the same now and counting the same holders."""

from __future__ import annotations

from datetime import timedelta

import orjson
from support.builders import T0
from support.feature_jobs import LORA_7B

from gpualloc.agent.operator.explain import explain_app_lines, explain_lines, gather, is_app
from gpualloc.agent.operator.status import lines, view
from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.bus.topics import Record
from gpualloc.solvers.planner.interpreter import Pool

STEP = timedelta(seconds=10)  # the compressed clock's step (the pool's own: 60 minutes)
FULL_13B = {**LORA_7B, "variant": "full", "params_b": 13, "layers": 40, "hidden_size": 5120, "zero_stage": 3}
FULL_13B["gradient_checkpointing"] = True


class Bus:
    """A dispatcher and every message on the bus (inputs and outputs) in publication order."""

    def __init__(self, gpus: int = 16) -> None:
        self.d = Dispatcher("default", interpreter=Pool(step_seconds=STEP.total_seconds()))
        self.messages: list[dict] = []
        self.n, self.now = 0, T0
        config = {"gpus": gpus, "gpus_per_node": 8, "horizon": 12, "step_minutes": 60}
        self.send("pool.configured", {**config, "gpu_type": "h100-80gb", "gpu_memory_gb": 80.0}, "gpualloc.config")

    def send(self, kind: str, payload: dict, topic: str = "gpualloc.jobs") -> None:
        self.n += 1
        message = {
            "event_id": f"e{self.n}",
            "type": kind,
            "occurred_at": self.now.isoformat(),
            "pool": "default",
            "payload": payload,
        }
        self.raw(topic, orjson.dumps(message))

    def raw(self, topic: str, value: bytes) -> None:
        self.n += 1
        self.messages.append(orjson.loads(value)) if value.startswith(b"{") else None
        for o in self.d.handle([Record(topic, 0, self.n, "default", value)], self.now):
            self.messages.append(o.message)

    def submit(self, job_id: str, **payload) -> None:
        self.send("job.submitted", {"id": job_id, "kind": "training", "priority": 5, **payload})

    def commit(self) -> None:
        """The step's commit at its boundary, then the clock to the next step."""
        self.now = T0 + self.d.interpreter.planner.now * STEP
        self.messages += [o.message for o in self.d.commit(self.now)]
        self.now += STEP / 2

    def explain(self, job_id: str) -> list[str]:
        return explain_lines(job_id, gather(job_id, "default", self.messages))


def test_explain_says_where_a_job_stands_in_every_state():
    bus = Bus()
    bus.submit("hog", gpus=8, duration=30, priority=9)
    bus.submit("a", gpus=8, duration=2, priority=9)
    bus.submit("wide", gpus=16, duration=2, priority=1)  # no 16-GPU block while hog runs
    bus.submit("p", gpus=8, duration=1)  # after `a`
    bus.submit("huge", gpus=32, duration=1)  # more than the pool: decided rejected
    bus.send("job.submitted", {"id": "neg", "kind": "training", "priority": -5, "gpus": 1, "duration": 1})
    bus.raw("gpualloc.jobs", b"hello world")
    bus.commit()  # step 0
    assert bus.explain("p")[-1] == (  # one commit: no step length to tell times by
        "now: step 0 committed at 00:00:00 UTC (seq 1) - waiting, planned at step 2 on GPUs 8-15: until then its "
        "block is held by a (now)"
    )
    bus.commit()  # step 1

    *_, now = bus.explain("p")
    assert now.startswith("now: step 1 committed at 00:00:10 UTC (seq 2); step 2 starts at 00:00:20 UTC - ")
    assert now.endswith(
        "waiting, planned at step 2 (00:00:20 UTC, in 10 s) on GPUs 8-15: until then its block is held by a (now)"
    )
    *_, now = bus.explain("wide")
    assert "waiting; no block in the 12-step window of the latest commit (seq 2)" in now
    *_, now = bus.explain("a")
    assert now.endswith("running on GPUs 8-15 since step 0 (00:00:00 UTC)")

    lines = bus.explain("huge")
    assert "decided rejected" in lines[1] and "waiting" not in "\n".join(lines)
    assert lines[-1].split(" - ", 1)[1].startswith("rejected, never planned: ")
    lines = bus.explain("neg")  # dead-lettered: its submission, the dead letter, never waiting
    assert "rejected job.submitted (event e13, gpualloc.jobs:0:" in lines[1] and "priority" in lines[1]
    assert lines[-1].split(" - ", 1)[1].startswith("rejected, never planned: priority") and "waiting" not in lines[-1]

    bus.commit()  # step 2: `a` runs past its planned end (2 steps from step 0)
    *_, now = bus.explain("a")
    assert now.endswith(
        "running on GPUs 8-15 since step 0 (00:00:00 UTC), past its planned end at step 2 (00:00:20 UTC) "
        "(2 steps): it keeps its GPUs until it ends"
    )
    bus.send("job.completed", {"id": "a"})
    bus.commit()  # step 3: `p` starts on a's GPUs
    lines = bus.explain("p")
    assert "started at step 3 (00:00:30 UTC) on GPUs 8-15 (commit seq 4)" in lines[-2]
    assert lines[-1].endswith("running on GPUs 8-15 since step 3 (00:00:30 UTC)")
    assert bus.explain("a")[-1].endswith("completed; it holds no GPUs and is not planned")

    bus.send("job.completed", {"id": "p"})
    bus.send("job.cancelled", {"id": "wide"})
    assert bus.explain("p")[-1].endswith(" - completed; it holds no GPUs and is not planned")
    assert bus.explain("wide")[-1].endswith(" - cancelled; it holds no GPUs and is not planned")

    bus.submit("once", gpus=8, duration=4, requeue=False)
    bus.send("job.failed", {"id": "once", "reason": "error", "detail": "segfault"})
    lines = bus.explain("once")
    assert lines[-2].endswith("failed (error): segfault")
    assert lines[-1].endswith(" - failed (error); it holds no GPUs and is not planned")
    bus.submit("again", gpus=8, duration=4)
    bus.send("job.failed", {"id": "again", "detail": "node lost"})
    lines = bus.explain("again")
    assert lines[-2].endswith("failed: node lost; re-queued (it allows it)")
    assert "waiting" in lines[-1] and "running" not in lines[-1]

    # the time limit's notice, as the pool agent publishes it (any failure reason reads the same)
    bus.messages.append(
        {
            "type": "job.failed",
            "pool": "default",
            "occurred_at": bus.now.isoformat(),
            "payload": {"id": "hog", "reason": "time_limit", "source": "agent", "detail": "30 steps"},
        }
    )
    lines = bus.explain("hog")
    assert lines[-2].endswith("failed (time_limit) on GPUs 0-7 by agent: 30 steps")
    assert lines[-1].endswith(" - failed (time_limit); it holds no GPUs and is not planned")
    assert not any("waiting" in line for line in lines)


def test_explain_shows_an_out_of_memory_re_size_and_the_promise_at_the_new_size():
    bus = Bus(gpus=64)
    bus.submit("r", features=FULL_13B)
    bus.commit()
    ran = len(bus.d.interpreter.planner.running["r"].mask.bit_count() * [0])
    bus.send("job.failed", {"id": "r", "reason": "out_of_memory", "detail": "CUDA OOM"})
    lines = bus.explain("r")
    size = (bus.d.interpreter.planner.queued.get("r") or bus.d.interpreter.planner.running["r"].spec).gpus
    assert size >= 2 * ran
    assert lines[-3].endswith(f"failed (out_of_memory) on GPUs 0-{ran - 1}: CUDA OOM")
    assert f"re-sized to {size} GPUs after running out of memory at {ran}; decided " in lines[-2]
    old = f"GPUs 0-{ran - 1}"
    assert old not in lines[-1] and (f"{size} GPUs" in lines[-1] or f"GPUs 0-{size - 1}" in lines[-1])
    bus.commit()  # the next commit holds it at its new size
    lines = bus.explain("r")
    assert old not in lines[-1] and str(size - 1) in lines[-1]
    assert "running" in lines[-1] or "planned at step" in lines[-1]


def test_status_and_explain_agree_on_now_and_on_what_holds_gpus_right_after_a_burst():
    bus = Bus(gpus=32)
    bus.commit()
    bus.commit()  # step 1 committed; the clock in step 2
    for k in range(10):  # ten starts after the commit: their node agents bind them at once
        bus.submit(f"j{k}", gpus=4 if k < 2 else 2, duration=4)
    commit = next(m["payload"] for m in reversed(bus.messages) if m["type"] == "plan.committed")
    status = view("default", bus.d.interpreter.planner, commit, [], length=STEP)
    assert status["usage"]["batch"] == 24 and status["usage"]["idle"] == 32 - 24
    assert sum(n["busy"] for n in status["nodes"]) == 24 and len(status["running"]) == 10
    assert status["now"] == 1
    head = next(line for line in lines(status) if line.startswith("now: "))
    assert head.startswith("now: step 1 committed at 00:00:10 UTC (seq 2, heuristic, objective ")
    assert head.endswith("; step 2 starts at 00:00:20 UTC")
    *_, now = bus.explain("j0")
    assert now.startswith("now: step 1 committed at 00:00:10 UTC (seq 2); step 2 starts at 00:00:20 UTC - running")


def test_a_second_submission_of_a_live_job_is_told_beside_it_never_as_its_state():
    bus = Bus(gpus=32)
    bus.submit("a", gpus=8, duration=30)
    bus.submit("w", gpus=32, duration=2)  # waits for `a`
    bus.commit()
    bus.submit("a", gpus=8, duration=30)  # the same file sent again: a duplicate id
    again = bus.messages[-2]["event_id"]
    bus.submit("w", gpus=32, duration=2)
    bus.commit()
    lines = bus.explain("a")
    assert lines[-1].endswith(
        f"running on GPUs 0-7 since step 0 (00:00:00 UTC); a second submission (event {again}) was rejected: "
        "job id 'a' is already queued or running"
    )
    assert "never planned" not in lines[-1]
    assert f"a second submission (event {again}) was rejected" in lines[-2] and lines[-2].endswith("it stays running")
    *_, now = bus.explain("w")
    assert " - waiting" in now and "a second submission" in now and "never planned" not in now
    commit = next(m["payload"] for m in reversed(bus.messages) if m["type"] == "plan.committed")
    status = view("default", bus.d.interpreter.planner, commit, [], length=STEP)
    assert [r["id"] for r in status["running"]] == ["a"] and [q["id"] for q in status["queue"]] == ["w"]


def test_explain_tells_an_app_its_registration_or_its_rejection_and_what_status_says_of_it():
    bus = Bus(gpus=32)
    bus.send("app.registered", {"id": "chat", "priority": 5, "min_gpus": 1, "max_gpus": 4}, "gpualloc.traffic")
    bus.submit("a", gpus=8, duration=30)
    bus.commit()
    bus.send("app.registered", {"id": "bad", "priority": 5, "min_gpus": 5, "max_gpus": 4}, "gpualloc.traffic")
    event = next(m["event_id"] for m in bus.messages if m["type"] == "app.registered" and m["payload"]["id"] == "bad")
    bus.send("traffic.observed", {"app": "chat", "gpus": 3}, "gpualloc.traffic")  # granted at once
    bus.commit()

    bad = gather("bad", "default", bus.messages)
    assert is_app("bad", bad) and not is_app("a", gather("a", "default", bus.messages))
    told = explain_app_lines("bad", bad, None)
    assert told[0].endswith(f"registration published (event {event}): priority 5, 5-4 GPUs")
    assert f"rejected app.registered (event {event}, gpualloc.traffic:0:" in told[1] and "max_gpus" in told[1]
    assert told[-1].split(" - ", 1)[1].startswith("rejected, never registered: max_gpus")
    assert not any("waiting" in line for line in told)

    commit = next(m["payload"] for m in reversed(bus.messages) if m["type"] == "plan.committed")
    status = view("default", bus.d.interpreter.planner, commit, [], length=STEP)
    assert [a["id"] for a in status["apps"]] == ["chat"]  # the pool holds no `bad`
    (row,) = status["apps"]
    assert (row["need"], row["held"], row["shortfall"]) == (3, 3, 0)
    told = explain_app_lines("chat", gather("chat", "default", bus.messages), row)
    assert told[-2] == (
        "now: step 1 committed at 00:00:10 UTC (seq 3); step 2 starts at 00:00:20 UTC - registered: "
        f"need 3 (observed), held 3 (GPUs {row['gpus']})  (min 1, max 4)"
    )
    assert told[-1].startswith(f"  forecast from step 2 at demand quantile {row['forecast']['quantile']:g}: ")
    assert any("reactive commit of step 0" in line and "observed demand 3 GPUs" in line for line in told)
    text = lines(status)
    assert f"  chat             need 3 (observed), held 3 (GPUs {row['gpus']})  (min 1, max 4)" in text
    assert told[-1].strip() in [line.strip() for line in text]  # the same forecast, the same words
