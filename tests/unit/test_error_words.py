"""The words of a refusal: a value that is not JSON says what a message is and quotes its start;
a missing field with a misspelt one beside it names the misspelling."""

from __future__ import annotations

import orjson
import pytest
from pydantic import ValidationError
from support.builders import T0

from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.bus.topics import Record
from gpualloc.schemas.errors import describe
from gpualloc.schemas.events import JobSubmitted
from gpualloc.schemas.scenario import Scenario


def _reasons(*values: bytes) -> list[str]:
    """The dead letters' reasons for `values` sent to a configured pool."""
    d = Dispatcher("default")
    config = {"event_id": "c", "type": "pool.configured", "occurred_at": T0.isoformat(), "payload": {"gpus": 8}}
    records = [Record("gpualloc.config", 0, 0, "default", orjson.dumps(config))]
    records += [Record("gpualloc.jobs", 0, k, "default", v) for k, v in enumerate(values)]
    out = d.handle(records, T0)
    return [o.message["payload"]["reason"] for o in out if o.message["type"] == "input.rejected"]


def test_plain_text_on_a_topic_is_told_what_a_message_is():
    (reason,) = _reasons(b"hello world, this is text")
    assert reason == (
        "value: not JSON: a message is one JSON object (the envelope); got text starting 'hello world,' "
        "(unreadable at character 0)"
    )


def test_a_misspelt_required_field_is_named_beside_the_missing_one():
    job = {"id": "a", "kind": "training", "priorty": 3, "gpus": 1, "duration": 2}
    with pytest.raises(ValidationError) as e:
        JobSubmitted.model_validate(job)
    assert describe(e.value) == ["priority: Field required", "priorty: unknown field (did you mean 'priority'?)"]
    with pytest.raises(ValidationError) as e:  # nested: the misspelling's path is the field's
        Scenario.model_validate({"name": "s", "gpus": 8, "jobs": [job]})
    assert "jobs[0].priorty: unknown field (did you mean 'priority'?)" in describe(e.value)
    message = {"event_id": "e1", "type": "job.submitted", "occurred_at": T0.isoformat(), "payload": job}
    (reason,) = _reasons(orjson.dumps(message))
    assert reason == "priority: Field required; priorty: unknown field (did you mean 'priority'?)"


def test_unknown_fields_stay_allowed_and_far_ones_are_not_blamed():
    job = {"id": "a", "kind": "training", "priority": 3, "gpus": 1, "duration": 2, "team": "x"}
    assert JobSubmitted.model_validate(job).id == "a"  # the contract adds fields: an unknown one is no error
    with pytest.raises(ValidationError) as e:
        JobSubmitted.model_validate({k: v for k, v in job.items() if k != "priority"})
    assert describe(e.value) == ["priority: Field required"]
