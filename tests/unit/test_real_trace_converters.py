"""The public job-table converters (generators/philly.py, helios.py, acme.py over job_tables.py)
on small inline rows, the `gpualloc trace philly|helios|acme` command, and the bundled windows
(benchmarks/real_traces.py)."""

from __future__ import annotations

import csv

import pytest

from gpualloc.agent.cli import main
from gpualloc.agent.loading import InputError
from gpualloc.agent.traces import read_trace
from gpualloc.benchmarks.real_traces import TABLES, WINDOWS, converted, present, real_traces
from gpualloc.generators.acme import acme_events
from gpualloc.generators.helios import helios_events
from gpualloc.generators.job_table_files import job_table_trace
from gpualloc.generators.job_tables import DAY, TableJob, cut_job, median_window
from gpualloc.generators.philly import philly_events
from gpualloc.schemas.events import JobSubmitted, parse_event
from gpualloc.schemas.scenario import block_size_problems

PHILLY = ["job_id", "submit_time", "gpus", "duration"]
HELIOS = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"
ACME = "job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,duration,queue,gpu_time"


def rows(header: str | list[str], *lines: str) -> list[dict[str, str]]:
    names = header.split(",") if isinstance(header, str) else header
    return [dict(zip(names, line.split(","))) for line in lines]


def jobs(events: list[dict]) -> list:
    return [p for env, p in map(parse_event, events) if env.type == "job.submitted"]


def test_philly_rounds_gpus_up_counts_what_that_adds_and_drops_jobs_that_never_ran():
    table = rows(PHILLY, "a,100,3,600", "b,160,1,1200", "c,220,0,600", "d,280,2,0", "e,340,24,601")
    events, kept = philly_events(table)
    config = parse_event(events[0])[1]
    assert (config.gpus, config.gpus_per_node, config.step_minutes) == (64, 8, 10)
    sizes = {j.id: (j.gpus, j.duration, j.actual_duration, j.priority, j.kind) for j in jobs(events)}
    assert sizes == {
        "a": (4, 1, 1, 5, "training"),  # 3 GPUs -> 4; 600 s: one step
        "b": (1, 2, 2, 5, "training"),
        "e": (32, 2, 2, 5, "training"),  # 24 GPUs -> 32 (whole nodes); 601 s: two steps
    }
    assert (kept.rows, kept.kept, kept.never_ran, kept.no_gpus) == (5, 3, 1, 1)
    work = 3 * 600 + 1 * 1200 + 24 * 601
    assert kept.added_work == pytest.approx((4 * 600 + 1200 + 32 * 601 - work) / work)
    assert dict(kept.sizes) == {4: 1, 1: 1, 32: 1}
    at = [parse_event(e)[0].occurred_at for e in events[1:]]
    assert [(t - at[0]).total_seconds() for t in at] == [0, 60, 240]  # the first kept job at step 0


def test_the_pool_holds_the_largest_job_in_whole_nodes():
    events, _ = philly_events(rows(PHILLY, "big,0,100,60"), gpus=12)
    config, big = (p for _, p in map(parse_event, events))
    assert (config.gpus, big.gpus) == (128, 128)
    assert not list(block_size_problems(big.gpus, config.gpus, config.gpus_per_node, "big"))


def test_helios_runs_from_start_to_end_and_drops_cpu_jobs_and_jobs_never_started():
    table = rows(
        HELIOS,
        "1,u,vc,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-10 04:55:09,36848,0",
        "2,u,vc,0,8,1,COMPLETED,2020-06-09 18:41:02,2020-06-09 18:41:02,2020-06-09 19:41:02,3600,0",
        "3,u,vc,8,8,1,CANCELLED,2020-06-09 18:41:03,,,0,0",
        "4,u,vc,12,8,2,FAILED,2020-06-09 19:41:01,2020-06-09 20:00:00,2020-06-09 20:00:01,1,1139",
    )
    events, kept = helios_events(table)
    assert {j.id: (j.gpus, j.duration) for j in jobs(events)} == {"1": (1, 62), "4": (16, 1)}  # 36,848 s: 62 steps
    assert (kept.kept, kept.never_ran, kept.no_gpus) == (2, 1, 1)
    first, last = (parse_event(e)[0].occurred_at for e in (events[1], events[2]))
    assert (last - first).total_seconds() == 3600  # submission, not start, times the arrival


def test_acme_reads_offsets_and_makes_evaluation_batch_inference():
    table = rows(
        ACME,
        "5778432,u1,1,8,128,Evaluation,COMPLETED,2023-03-01 00:18:22+08:00,2023-03-01 00:18:54+08:00,"
        "2023-03-01 00:20:51+08:00,117,32,936.0",
        "5778469,u1,2,16,256,Pretrain,COMPLETED,2023-02-28 17:00:00+00:00,2023-02-28 17:10:00+00:00,"
        "2023-02-28 19:10:00+00:00,7200,600,115200.0",
        "5778470,u1,1,1,16,SFT,CANCELLED,2023-03-01 00:30:00+08:00,,,0,0,0",
    )
    events, kept = acme_events(table)
    assert [(j.id, j.kind, j.gpus, j.duration) for j in jobs(events)] == [
        ("5778432", "batch_inference", 8, 1),
        ("5778469", "training", 16, 12),
    ]
    assert kept.never_ran == 1
    a, b = (parse_event(e)[0].occurred_at for e in events[1:])
    assert (b - a).total_seconds() == 41 * 60 + 38  # 00:18:22+08:00 is 16:18:22Z, before 17:00:00Z


@pytest.mark.parametrize(
    "row, field",
    [
        ({"job_id": "a", "submit_time": "soon", "gpus": "1", "duration": "1"}, "submit_time"),
        ({"job_id": "a", "submit_time": "1", "gpus": "1.5", "duration": "1"}, "gpus"),
        ({"job_id": "a", "submit_time": "1", "gpus": "1", "duration": "-3"}, "duration"),
        ({"job_id": "a", "submit_time": "1", "gpus": "1", "duration": "inf"}, "duration"),
    ],
)
def test_a_bad_philly_value_is_named(row, field):
    with pytest.raises(ValueError, match=f"^{field}: "):
        cut_job(row)


def test_a_bad_helios_time_is_named():
    table = rows(HELIOS, "1,u,vc,1,1,1,COMPLETED,2020-06-09 18:41:01,yesterday,2020-06-10 04:55:09,36848,0")
    with pytest.raises(ValueError, match="^start_time: must be a date and time"):
        helios_events(table)


def test_the_median_window_is_chosen_by_its_gpu_work():
    work = [5, 1, 3, 4, 2]  # GPU-seconds submitted on days 0..4; day 4 is not a whole window
    table = [TableJob(f"j{d}", d * DAY + 10, 1, w) for d, w in enumerate(work)]
    assert median_window(table, 1) == (2 * DAY + 10, 3 * DAY + 10)  # of 1, 3, 4, 5: the lower median, 3
    assert median_window(table[:1], 1) == (10, 11)  # under a window: the whole table
    events, kept = philly_events(rows(PHILLY, *(f"j{d},{d * DAY + 10:.0f},1,{w}" for d, w in enumerate(work))), days=1)
    assert [j.id for j in jobs(events)] == ["j2"] and kept.rows == 1


def test_the_command_converts_a_table_and_names_a_bad_row(tmp_path, capsys):
    good = tmp_path / "philly.csv"
    good.write_text("job_id,submit_time,gpus,duration\na,0,3,600\nb,60,0,60\n")
    out = tmp_path / "t.jsonl"
    assert main(["trace", "philly", str(good), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "1 of 2 jobs kept (0 never ran, 1 without GPUs)" in said and "adds 33.3% GPU-work" in said
    assert [p.gpus for _, p in read_trace(out) if isinstance(p, JobSubmitted)] == [4]
    bad = tmp_path / "bad.csv"
    bad.write_text(HELIOS + "\n1,u,vc,two,1,1,COMPLETED,2020-06-09 18:41:01,,,0,0\n")
    with pytest.raises(InputError, match="line 2: gpu_num: must be a whole number"):
        job_table_trace("helios", bad)
    assert main(["trace", "acme", str(bad), "--out", str(out)]) == 2
    assert "line 1: type: missing column" in capsys.readouterr().err
    assert main(["trace", "helios", "--out", str(out)]) == 2
    assert "give the job table CSV" in capsys.readouterr().err


def test_helios_and_acme_also_read_the_compact_cut_the_bundled_windows_are_kept_in(tmp_path):
    cut = tmp_path / "cut.csv"
    cut.write_text("job_id,submit_time,gpus,duration\nx,0,1016,600\ny,30,8,0\n")
    for source in ("helios", "acme"):
        events, kept = job_table_trace(source, cut)
        assert [(p.id, p.gpus) for p in jobs(events)] == [("x", 1024)] and events[0]["payload"]["gpus"] == 1024
        assert (kept.never_ran, events[1]["event_id"]) == (1, f"{source}-1")


def test_a_job_beyond_the_contracts_limits_is_named(tmp_path):
    with pytest.raises(ValueError, match="^job 'huge': gpus: 5000 is more than the contract's 4096"):
        philly_events(rows(PHILLY, "huge,0,5000,60"))
    long = tmp_path / "long.csv"
    long.write_text("job_id,submit_time,gpus,duration\nslow,0,1,60000001\n")  # 100,001 steps of 10 minutes
    with pytest.raises(InputError, match="job 'slow': duration: 60000001 s is more than the contract's 100000 steps"):
        job_table_trace("philly", long)


@pytest.mark.parametrize("name", sorted(WINDOWS))
def test_each_window_parses_and_every_job_fits_its_pool(name):
    if name not in present():
        pytest.skip(
            f"{name}: its cut {WINDOWS[name][1]} is not under {TABLES} (third-party data, kept outside the repository)"
        )
    events = dict(real_traces())[name]
    (start, config), *submitted = events
    assert start.type == "pool.configured" and all(env.type == "job.submitted" for env, _ in submitted)
    for _, job in submitted:
        assert not list(block_size_problems(job.gpus, config.gpus, config.gpus_per_node, job.id))
        assert job.duration == job.actual_duration >= 1
    with open(TABLES / WINDOWS[name][1], newline="") as f:
        table = list(csv.DictReader(f))
    _, kept = converted()[name]
    assert len(submitted) == kept.kept == len(table) - kept.never_ran - kept.no_gpus > 100
    assert [p.id for _, p in submitted] == [r["job_id"] for r in table]  # the cut is in submission order
