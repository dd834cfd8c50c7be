"""`gpualloc bench traces`: pools sized to the offered load, whole-trace runs of FIFO and the
heuristic with and without the starvation bound, and the trade-off they make."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from gpualloc.agent.cli import main
from gpualloc.benchmarks.trace_bench import TraceRow, load_of, run_trace_bench, sized, traces, tradeoff
from gpualloc.schemas.events import envelope, parse_event


def test_a_pool_is_sized_to_the_offered_load_inside_the_span():
    name, events = traces(include_week=False)[0]
    assert name == "pollux-1"
    for load in (1.0, 1.25, 1.5):
        resized, gpus, pace = sized(events, load)
        assert pace == 1.0  # Pollux's jobs fit a pool its arrivals load
        offered = load_of(resized, gpus)
        assert gpus % 8 == 0 and abs(offered.span - load) < 0.15 * load and offered.trace > offered.span
        (config,) = [p for env, p in resized if env.type == "pool.configured"]
        assert config.gpus == gpus and config.gpus_per_node == 8


def test_the_bound_keeps_the_heuristic_completing_as_many_jobs_as_fifo_and_cuts_its_tail():
    (row,) = run_trace_bench(1.15, (24, 12), names={"pollux-3"})
    fifo, free = row.runs["fifo"], row.runs["heuristic"]
    assert all(r["legal"] for r in row.runs.values())
    assert row.runs["heuristic default"]["bound"] == 720  # five days of 10-minute steps
    for label in ("heuristic default", "heuristic B=24"):
        assert (
            row.runs[label]["completed"] >= fifo["completed"]
            and row.runs[label]["timely_value"] >= fifo["timely_value"]
        )
    for bound in (24, 12):
        bounded = row.runs[f"heuristic B={bound}"]
        assert bounded["queue_p99"] <= fifo["queue_p99"] + bound and bounded["queue_p99"] <= free["queue_p99"]
    assert row.runs["heuristic B=12"]["fairness_priority_classes"] > free["fairness_priority_classes"]
    assert row.runs["heuristic B=12"]["fairness_jobs"] > free["fairness_jobs"]
    for run in row.runs.values():
        assert run["completed"] + run["unfinished"] == run["submitted"] == 160
        assert run["wait"]["mean"] <= run["wait"]["max"] and run["jct"]["p90"] >= run["wait"]["p90"]
    assert set(row.users) == {"fifo", "greedy", "heuristic"}
    assert row.users["heuristic"].wait == row.runs["heuristic default"]["wait"]
    assert sum(g.jobs for g in row.users["fifo"].by_size.values()) == 160
    assert row.load_span <= row.load
    for label in ("heuristic", "heuristic default"):  # its windows, against the capacity bound
        assert 0 <= row.runs[label]["window_gap_p50"] <= row.runs[label]["window_gap_max"] < 0.05
    assert row.runs["fifo"]["window_gap_p50"] is None  # exempt from the floors the bound assumes


def test_by_completion_the_heuristic_cuts_mean_jct_and_reservations_cut_its_tail():
    (row,) = run_trace_bench(1.15, (), names={"pollux-3"}, completion=True)
    fifo = row.runs["fifo"]
    free, held = row.runs["heuristic/completion"], row.runs["heuristic/completion k=1 B=1"]
    assert free["value_model"] == held["value_model"] == "completion" and fifo["value_model"] == "gpu_steps"
    for run in (free, held):
        assert run["legal"] and run["completed"] == fifo["completed"] == 160
        assert run["jct"]["mean"] < 0.9 * fifo["jct"]["mean"] and run["wait"]["p50"] <= fifo["wait"]["p50"]
    assert held["wait"]["p99"] < free["wait"]["p99"]  # the oldest job's reservation bounds the tail
    assert set(row.users) == {"fifo", "greedy", "heuristic", "heuristic/completion", "heuristic/completion k=1 B=1"}


def test_the_tradeoff_is_read_per_bound():
    def run(timely, p99, done, wait=10.0, value_model="gpu_steps"):
        return {
            "value_model": value_model,
            "timely_value": timely,
            "queue_p99": p99,
            "completed": done,
            "wait": {"mean": wait, "p50": wait / 2, "p99": p99},
            "wait_by_size": {"<1": {"mean": wait / 4}, "1-10": {"mean": wait}, "10-100": {}},
            "jct": {"mean": wait + 5},
            "legal": True,
        }

    rows = [
        TraceRow(
            "a",
            8,
            1.2,
            1.0,
            1.0,
            {
                "fifo": run(100, 10, 50),
                "heuristic": run(200, 40, 49, 25.0),
                "heuristic B=6": {**run(180, 14, 50), "bound": 6},
                "heuristic B=2": {**run(90, 13, 50), "bound": 2},
                "heuristic/completion": run(9000, 11, 50, 6.0, "completion"),
            },
        )
    ]
    free, bounded, tight, completion = tradeoff(rows)
    assert free == {
        "label": "heuristic",
        "gain_kept_median": 1.0,
        "gain_kept_min": 1.0,
        "p99_over_fifo_mean": 30,
        "completes_as_many": 0,
        "worth_as_much": 1,
        "p99_within_bound": None,
        "traces": 1,
        "window_gap_p50_median": None,
        "window_gap_max": None,
        "wait_mean_over_fifo_median": 2.5,
        "jct_mean_over_fifo_median": 2.0,
        "users_targets": {
            "jct_0_7": 0,
            "median_wait": 0,
            "p99_1_1": 0,
            "largest_1_5": 0,
            "completions": 0,
            "legal": 1,
        },
    }
    assert (
        bounded["gain_kept_median"] == 0.8 and bounded["p99_over_fifo_mean"] == 4 and bounded["completes_as_many"] == 1
    )
    assert bounded["p99_within_bound"] == 1 and bounded["worth_as_much"] == 1
    assert tight["gain_kept_min"] == -0.1 and tight["p99_within_bound"] == 0 and tight["worth_as_much"] == 0
    # another value model's timely value is in other units: not weighed against FIFO's; its users' figures are
    assert completion["gain_kept_median"] is None and completion["worth_as_much"] is None
    assert completion["jct_mean_over_fifo_median"] == 0.73 and completion["users_targets"] == {
        "jct_0_7": 0,  # 11 against 15: 0.73x
        "median_wait": 1,
        "p99_1_1": 1,  # 11 against 10
        "largest_1_5": 1,  # the largest bucket with jobs, 1-10: 6 against 10
        "completions": 1,
        "legal": 1,
    }


@pytest.mark.slow
def test_the_command_prints_json_and_writes_the_chart(tmp_path, capsys, monkeypatch):
    from gpualloc.benchmarks import trace_bench

    everything = trace_bench.traces
    monkeypatch.setattr(trace_bench, "traces", lambda *include: everything(*include)[:1])  # one, for time
    chart, waits = tmp_path / "tradeoff.svg", tmp_path / "waits"
    argv = ["bench", "traces", "--starvation-steps", "12", "--json", "--chart", str(chart), "--wait-charts", str(waits)]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert [t["trace"] for t in data["traces"]] == ["pollux-1"]
    assert {p["label"] for p in data["tradeoff"]} == {"greedy", "heuristic", "heuristic default", "heuristic B=12"}
    assert chart.read_text().startswith("<svg") and "B=12" in chart.read_text()
    users = data["traces"][0]["users"]
    assert set(users) == {"fifo", "greedy", "heuristic"} and users["fifo"]["jobs"] == 160
    assert sum(g["jobs"] for g in users["fifo"]["by_size"].values()) == 160
    svg = (waits / "wait-pollux-1.svg").read_text()
    assert svg.startswith("<svg") and all(f">{p}</text>" in svg for p in ("fifo", "greedy", "heuristic"))


def test_a_trace_whose_largest_job_needs_a_big_pool_gets_its_arrivals_closer_together():
    """One 512-GPU job beside a hundred 1-GPU jobs an hour apart: a pool of 512 cannot be loaded
    by their pace, so the arrivals come closer until the load inside the span is the one asked."""
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    pool = {"gpus": 8, "gpus_per_node": 8, "horizon": 24, "step_minutes": 10, "time_decay": 0.99}
    raw = [envelope("pool.configured", pool, start, "cfg")]
    raw.append(envelope("job.submitted", job("big", 512, 6), start, "big"))
    raw += [envelope("job.submitted", job(f"j{k}", 1, 6), start + timedelta(hours=k), f"j{k}") for k in range(1, 100)]
    events = [parse_event(e) for e in raw]
    resized, gpus, pace = sized(events, 1.25)
    assert gpus == 512 and pace < 0.05
    assert abs(load_of(resized, gpus).span - 1.25) < 0.1 * 1.25
    times = [env.occurred_at for env, _ in resized]
    assert times[0] == start and times[-1] == start + (timedelta(hours=99) * pace)
    assert [p for _, p in resized][1:] == [p for _, p in events][1:]  # the jobs as they were


def job(job_id: str, gpus: int, steps: int) -> dict:
    return {"id": job_id, "kind": "training", "priority": 5, "gpus": gpus, "duration": steps}
