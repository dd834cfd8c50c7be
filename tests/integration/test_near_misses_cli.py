"""A field that nearly names a known one is refused by every command that publishes an event
(and by `gpualloc.client`) with "did you mean", exit 2 and no traceback, before any broker is
reached; one nowhere near a known field passes, as the contract allows added fields."""

from __future__ import annotations

import json

import pytest
from support.feature_jobs import LORA_7B

from gpualloc.agent.cli import main
from gpualloc.client import message_near_misses, validated
from gpualloc.schemas.events import JobCompleted, PoolConfigured

NOWHERE = ["--bootstrap", "127.0.0.1:1"]  # no broker: a refusal comes before any connection


def write(tmp_path, name: str, value) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(value))
    return str(path)


@pytest.mark.parametrize(
    "command, value, needle",
    [
        (["configure"], {"gpus": 16, "gpus_per_nod": 8}, "gpus_per_nod: unknown field; did you mean gpus_per_node?"),
        (["configure"], {"gpus": 16, "time_limt": 4}, "time_limt: unknown field; did you mean time_limit?"),
        (
            ["submit", "--no-wait"],
            {"id": "j", "kind": "training", "priority": 1, "features": {**LORA_7B, "lora_rnak": 8}},
            "features.lora_rnak: unknown field; did you mean lora_rank?",
        ),
        (
            ["submit", "--no-wait"],
            {"id": "j", "kind": "training", "priority": 1, "gpus": 2, "duratoin": 3},
            "duratoin: unknown field; did you mean duration?",
        ),
        (["register-app", "--file"], {"id": "a", "priority": 2, "min_gpu": 1}, "min_gpu: unknown field; did you mean"),
    ],
)
def test_a_near_miss_exits_2_saying_what_was_meant(tmp_path, capsys, command, value, needle):
    assert main([*command, write(tmp_path, "x.json", value), *NOWHERE]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_the_agents_config_file_and_a_published_trace_refuse_near_misses(tmp_path, capsys):
    config = write(tmp_path, "pool.json", {"gpus": 16, "gpu_typ": "h100-80gb"})
    assert main(["agent", "--config", config, *NOWHERE]) == 2
    assert "gpu_typ: unknown field; did you mean gpu_type?" in capsys.readouterr().err
    event = {"event_id": "e", "type": "job.completed", "occurred_at": "2026-01-05T00:00:00+00:00", "pool": "default"}
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps({**event, "payload": {"id": "j", "used": {"gpu": 2}}}) + "\n")
    assert main(["publish", str(trace), *NOWHERE]) == 2
    assert "event 0: payload.used.gpu: unknown field; did you mean gpus?" in capsys.readouterr().err


def test_a_field_nowhere_near_a_known_one_passes_and_the_agent_still_ignores_near_misses():
    assert validated(PoolConfigured, {"gpus": 16, "team": "vision"}).gpus == 16
    assert validated(JobCompleted, {"id": "j", "used": {"gpus": 2, "note": "x"}}).used.gpus == 2
    with pytest.raises(ValueError, match=r"used\.gpu: unknown field; did you mean gpus\?"):
        validated(JobCompleted, {"id": "j", "used": {"gpu": 2}})
    assert message_near_misses({"event_id": "e", "typ": "x", "payload": {}}) == [
        "typ: unknown field; did you mean type?"
    ]
    assert PoolConfigured.model_validate({"gpus": 16, "gpus_per_nod": 8}).gpus_per_node is None  # the contract's way
