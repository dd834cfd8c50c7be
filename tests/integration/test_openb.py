"""The openb (Alibaba GPU trace v2023) converter: which pods become jobs, their sizes, durations,
priorities and arrival times; bad rows named by line and column."""

from __future__ import annotations

import pytest

from gpualloc.agent.cli import main
from gpualloc.agent.loading import InputError
from gpualloc.generators.openb import openb_events
from gpualloc.generators.trace_files import openb_trace
from gpualloc.schemas.events import parse_event

DAY = 86400


def pod(name, gpus, created, scheduled, deleted, qos="LS", milli=1000):
    return {
        "name": name,
        "num_gpu": str(gpus),
        "gpu_milli": str(milli),
        "qos": qos,
        "creation_time": str(created),
        "scheduled_time": "" if scheduled is None else str(scheduled),
        "deletion_time": str(deleted),
    }


def test_pods_become_jobs_of_whole_gpus_in_the_window():
    rows = [
        pod("cpu-only", 0, 1 * DAY + 5, 1 * DAY + 6, 1 * DAY + 900),
        pod("share", 1, 1 * DAY + 60, 1 * DAY + 120, 1 * DAY + 120 + 1500, qos="BE", milli=300),
        pod("three", 3, 1 * DAY, 1 * DAY + 10, 1 * DAY + 10 + 599),
        pod("pending", 2, 1 * DAY + 30, None, 3 * DAY),
        pod("forever", 8, 2 * DAY, 2 * DAY, 40 * DAY, qos="Guaranteed"),
        pod("too-early", 1, 0, 10, 20),
        pod("too-late", 1, 3 * DAY, 3 * DAY, 3 * DAY + 60),
    ]
    events = openb_events(rows, gpus=16, days=2, end_day=3, max_steps=144)
    config, *jobs = [p for _, p in map(parse_event, events)]
    assert (config.gpus, config.gpus_per_node, config.step_minutes) == (16, 8, 10)
    assert [j.id for j in jobs] == ["three", "share", "forever"]  # by creation; no GPU, pending, outside: dropped
    sizes = {j.id: (j.gpus, j.duration, j.priority) for j in jobs}
    assert sizes == {"three": (4, 1, 6), "share": (1, 3, 2), "forever": (8, 144, 8)}  # 599 s: a step; cut at a day
    first = parse_event(events[1])[0].occurred_at
    assert (parse_event(events[-1])[0].occurred_at - first).total_seconds() == DAY  # the first pod at step 0


def test_bad_rows_are_named_and_the_command_wants_its_csv(tmp_path, capsys):
    bad = tmp_path / "pods.csv"
    bad.write_text(
        "name,num_gpu,gpu_milli,qos,creation_time,deletion_time,scheduled_time\n"
        "a,two,1000,LS,1,2,1\nb,1,1000,LS,1,2,soon\n"
    )
    with pytest.raises(InputError) as e:
        openb_trace(bad)
    assert "line 2: num_gpu: must be a number" in str(e.value) and "line 3: scheduled_time" in str(e.value)
    assert main(["trace", "openb", "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "pod list CSV" in capsys.readouterr().err
