"""The exported JSON Schemas: committed, valid 2020-12, and in agreement with the models on the
bundled data and on what the models refuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from support.feature_jobs import LORA_7B

from gpualloc.agent.cli import main
from gpualloc.benchmarks import DATA_DIR
from gpualloc.schemas.export import EVENT_TYPES, REVISION, export_schemas, schema_text

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "contract" / "schemas"
SCHEMAS = export_schemas()


def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(SCHEMAS[name])


def test_the_committed_schemas_are_the_export():
    committed = {p.name: p.read_text(encoding="utf-8") for p in COMMITTED.glob("*.json")}
    exported = {name: schema_text(schema) for name, schema in SCHEMAS.items()}
    assert sorted(committed) == sorted(exported)
    changed = [name for name in exported if committed[name] != exported[name]]
    assert not changed, (
        f"{changed} differ from docs/contract/schemas: run `gpualloc schemas export "
        "docs/contract/schemas`, and bump schemas.export.REVISION for a change other teams see"
    )


def test_every_schema_is_2020_12_with_its_revision_in_its_id():
    assert set(SCHEMAS) == {f"{t}.json" for t in EVENT_TYPES} | {"envelope.json", "scenario.json", "plan.json"}
    for name, schema in SCHEMAS.items():
        Draft202012Validator.check_schema(schema)
        assert schema["$id"].endswith(f"/r{REVISION}/{name}")


@pytest.mark.slow
def test_every_bundled_event_scenario_and_plan_validates():
    envelope, n = validator("envelope.json"), 0
    for path in sorted((DATA_DIR / "traces").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            assert not list(envelope.iter_errors(event)), (path.name, event["event_id"])
            assert not list(validator(f"{event['type']}.json").iter_errors(event))
            n += 1
    assert n > 9000
    scenarios = sorted((DATA_DIR / "scenarios").glob("*.json")) + sorted(
        (DATA_DIR / "corpus" / "scenarios").glob("*.json")
    )
    for path in scenarios:
        assert not list(validator("scenario.json").iter_errors(json.loads(path.read_text()))), path.name
    plans = sorted((DATA_DIR / "corpus" / "plans").glob("*.json"))
    assert len(plans) >= 300
    for path in plans:
        assert not list(validator("plan.json").iter_errors(json.loads(path.read_text()))), path.name


def event(kind: str, payload: dict, **envelope) -> dict:
    return {
        "event_id": "e1",
        "type": kind,
        "occurred_at": "2026-01-05T00:00:00Z",
        "pool": "default",
        "schema_version": 1,
        "payload": payload,
        **envelope,
    }


JOB = {"id": "j", "kind": "training", "priority": 3, "gpus": 4, "duration": 2}
LORA = LORA_7B


@pytest.mark.parametrize(
    "message",
    [
        event("job.submitted", {**JOB, "gpus": 3}),  # not a power of two
        event("job.submitted", {**JOB, "priority": 0}),
        event("job.submitted", {**JOB, "features": {**LORA, "epochs_typo": 1}}),  # an unknown feature
        event("job.submitted", {**JOB, "features": {**LORA, "tensor_parallel": 3}}),
        event(
            "job.submitted", {**JOB, "kind": "quantization", "features": LORA}
        ),  # training features, quantization job
        event("job.submitted", {"id": "a", "priority": 3, "min_gpus": 1}),  # another type's payload
        event("job.submitted", JOB, schema_version=2),
        event("no.such.type", {}),
        event("traffic.observed", {"app": "chat", "requests_per_s": -1}),
        event("pool.configured", {"gpus": 0}),
    ],
)
def test_what_the_models_refuse_the_envelope_schema_refuses(message):
    assert list(validator("envelope.json").iter_errors(message))


def test_features_valid_for_their_kind_pass():
    ok = event("job.submitted", {"id": "f", "kind": "training", "priority": 3, "features": LORA})
    quant = event(
        "job.submitted",
        {"id": "q", "kind": "quantization", "priority": 3, "features": {"params_b": 7, "algorithm": "gptq", "bits": 4}},
    )
    assert not list(validator("envelope.json").iter_errors(ok)) and not list(
        validator("job.submitted.json").iter_errors(quant)
    )


def test_the_export_command_writes_every_file(tmp_path, capsys):
    assert main(["schemas", "export", str(tmp_path / "out")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(SCHEMAS)
    assert f"revision {REVISION}" in capsys.readouterr().out
