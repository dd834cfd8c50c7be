"""What `status` and `explain` say alike: steps with their wall-clock time, GPU runs, and the work
that stands between a queued job and its planned start."""

from __future__ import annotations

from datetime import timedelta

from gpualloc.agent.operator.words import Holders, at_step, duration, now_words, promised, span, step_length

COMMIT = {"step": 10, "seq": 12, "step_start": "2026-12-04T13:53:00+00:00"}
MINUTE = timedelta(minutes=1)


def test_a_step_is_told_with_its_time_counted_from_the_latest_commit():
    assert at_step(COMMIT, MINUTE, 22) == "step 22 (14:05:00 UTC, in 12 min)"
    assert at_step(COMMIT, MINUTE, 7) == "step 7 (13:50:00 UTC, 3 min before)"
    assert at_step(COMMIT, MINUTE, 22, relative=False) == "step 22 (14:05:00 UTC)"
    assert at_step(COMMIT, None, 22) == "step 22" and at_step(None, MINUTE, 22) == "step 22"
    assert at_step(COMMIT, timedelta(hours=1), 10 + 24 * 3) == "step 82 (2026-12-07 13:53 UTC, in 3 d)"
    assert now_words(COMMIT, MINUTE) == "step 10 committed at 13:53:00 UTC (seq 12); step 11 starts at 13:54:00 UTC"
    assert now_words(COMMIT, None) == "step 10 committed at 13:53:00 UTC (seq 12)"
    assert [duration(timedelta(seconds=s)) for s in (45, 720, 12_000, 7_200, 180_000)] == [
        "45 s",
        "12 min",
        "3 h 20 min",
        "2 h",
        "2 d 2 h",
    ]
    first = {"step": 4, "step_start": "2026-12-04T13:47:00+00:00"}
    assert step_length([first, COMMIT]) == MINUTE and step_length([COMMIT]) is None


def test_gpus_read_as_runs():
    assert span([13, 0, 1, 2, 3, 8, 9, 10, 11]) == "0-3,8-11,13" and span([]) == "" and span([5]) == "5"


def test_a_reason_names_what_holds_the_block_just_before_the_start_not_who_holds_it_now():
    plan = {
        "gpus": 16,
        "steps": 24,
        "holders": {
            "pretrain-a": [[0, 8, 0, 8]],  # holds the block now, gone by step 8
            "b": [[0, 4, 8, 16]],  # holds half of it up to the start
            "c": [[4, 8, 12, 16]],
            "job": [[0, 8, 16, 20]],
            "elsewhere": [[8, 16, 0, 24]],
        },
    }
    found = Holders(plan).promise("job")
    assert found == (16, list(range(8)), {"b": 8, "c": 12}, 16)
    text = promised(found, COMMIT, MINUTE, {"b": 3, "c": 2})
    assert text == (
        "planned at step 26 (14:09:00 UTC, in 16 min) on GPUs 0-7: until then its block is held by "
        "b (priority 3, from step 18) and c (priority 2, from step 22)"
    )
    assert "pretrain-a" not in text and "elsewhere" not in text
    free = {"gpus": 16, "steps": 24, "holders": {"a": [[0, 8, 0, 5]], "job": [[0, 8, 9, 10]]}}
    assert promised(Holders(free).promise("job"), COMMIT, MINUTE, {}).endswith("its block is free from step 15")
    many = {
        "gpus": 16,
        "steps": 4,
        "holders": {f"h{g}": [[g, g + 1, 0, 2]] for g in range(8)} | {"job": [[0, 8, 2, 3]]},
    }
    assert promised(Holders(many).promise("job"), COMMIT, None, {}).endswith(
        "held by h0 (now), h1 (now), h2 (now) and 5 others"
    )
    assert Holders(plan).promise("nobody") is None
