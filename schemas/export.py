"""JSON Schemas (2020-12) of the contracts, for teams that validate without Python: one per
event type (the whole envelope, its `type` fixed and its payload typed), `envelope.json` (any
event, the payload chosen by `type`), `scenario.json` and `plan.json`.

Made from the pydantic models, so they cannot drift from what the agent accepts, and committed
under `docs/contract/schemas/` so every change to them is deliberate (a test compares). Every
file's `$id` carries `REVISION`: an added field or a tightened rule bumps it; the envelope's
`schema_version` stays 1 until a meaning changes. Rules a schema cannot say (a rule between two
fields, a block's fit in a node) stay in the models and the contract's text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field, TypeAdapter, create_model

from gpualloc.schemas.events import OUTPUTS, PAYLOADS, Envelope
from gpualloc.schemas.features import FEATURES
from gpualloc.schemas.plan import Plan
from gpualloc.schemas.scenario import Scenario

REVISION = 14
BASE_URI = "https://gpualloc.dev/schemas"
DIALECT = "https://json-schema.org/draft/2020-12/schema"
EVENT_TYPES: dict[str, type[BaseModel]] = {**PAYLOADS, **OUTPUTS}


def _typed_envelope(kind: str, payload: type[BaseModel]) -> type[BaseModel]:
    """The envelope of one event type: `type` fixed, `payload` its model."""
    fields: dict[str, Any] = {name: (info.annotation, info) for name, info in Envelope.model_fields.items()}
    fields["type"] = (Literal[kind], ...)
    fields["payload"] = (payload, ...)
    name = "Event_" + kind.replace(".", "_")
    return create_model(name, __doc__=f"A `{kind}` event: the envelope, with its payload.", **fields)


def _typed_features(schema: dict[str, Any]) -> dict[str, Any]:
    """`job.submitted`'s `features` typed by its `kind` (the model validates them in a validator,
    which a schema generator cannot see)."""
    defs = schema.get("$defs", {})
    if "JobSubmitted" not in defs:
        return schema
    conditions = []
    for kind, model in sorted(FEATURES.items()):
        sub = model.model_json_schema(ref_template="#/$defs/{model}")
        defs.update(sub.pop("$defs", {}))
        defs[model.__name__] = sub
        conditions.append(
            {
                "if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]},
                "then": {
                    "properties": {"features": {"anyOf": [{"$ref": f"#/$defs/{model.__name__}"}, {"type": "null"}]}}
                },
            }
        )
    defs["JobSubmitted"]["allOf"] = conditions
    return schema


def _document(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"$schema": DIALECT, "$id": f"{BASE_URI}/r{REVISION}/{name}", **_typed_features(schema)}


def export_schemas() -> dict[str, dict[str, Any]]:
    """File name -> schema, for every file `gpualloc schemas export` writes."""
    typed = {kind: _typed_envelope(kind, model) for kind, model in sorted(EVENT_TYPES.items())}
    out = {f"{kind}.json": _document(f"{kind}.json", model.model_json_schema()) for kind, model in typed.items()}
    # a union built at run time: a value to mypy (Any), not a type it can check
    event: Any = Annotated[Union[tuple(typed.values())], Field(discriminator="type")]
    anyone: TypeAdapter[Any] = TypeAdapter(event)
    envelope = anyone.json_schema()
    envelope.update(
        title="Envelope",
        description="Any event of the contract (docs/contract/events.md): the "
        "payload's schema is the one its `type` names.",
    )
    out["envelope.json"] = _document("envelope.json", envelope)
    out["scenario.json"] = _document("scenario.json", Scenario.model_json_schema())
    out["plan.json"] = _document("plan.json", Plan.model_json_schema())
    return out


def schema_text(schema: dict[str, Any]) -> str:
    """A schema as its committed file holds it."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def write_schemas(folder: str | Path) -> list[Path]:
    """Write every schema into `folder` (created if missing); the paths written."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in export_schemas().items():
        path = out / name
        path.write_text(schema_text(schema), encoding="utf-8")
        written.append(path)
    return written
