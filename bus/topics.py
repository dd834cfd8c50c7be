"""Topic names on the bus (the events contract's defaults, all configurable) and the message
codec: UTF-8 JSON values, UTF-8 string keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from aiokafka.partitioner import murmur2


@dataclass(frozen=True)
class Topics:
    jobs: str = "gpualloc.jobs"
    traffic: str = "gpualloc.traffic"
    config: str = "gpualloc.config"
    decisions: str = "gpualloc.decisions"
    commits: str = "gpualloc.commits"
    bindings: str = "gpualloc.bindings"
    deadletter: str = "gpualloc.deadletter"
    ledger: str = "gpualloc.ledger"  # per transaction: the inputs consumed, in order, and the commits made
    state: str = "gpualloc.state"  # compacted: each pool's latest snapshot

    @classmethod
    def with_prefix(cls, prefix: str) -> "Topics":
        """Every default name with `prefix` in front: isolated topics for tests and demos."""
        return cls(**{name: prefix + value for name, value in cls().__dict__.items()})

    def of_type(self, event_type: str) -> str:
        """The topic an event type travels on."""
        if event_type == "pool.snapshot":
            return self.state
        if event_type == "node.heartbeat":  # node agents write one topic: their reports'
            return self.bindings
        return {
            "job.": self.jobs,
            "app.": self.traffic,
            "traffic.": self.traffic,
            "pool.": self.config,
            "node.": self.config,
            "allocation.": self.decisions,
            "plan.": self.commits,
            "binding.": self.bindings,
            "input.": self.deadletter,
            "pass.": self.ledger,
        }[event_type.split(".")[0] + "."]

    @property
    def prefix(self) -> str:
        """What `with_prefix` put in front of the names (empty for the defaults)."""
        return self.ledger.removesuffix(Topics.ledger)

    def transactional_id(self, pool: str) -> str:
        """The pool agent's transactional id: `gpualloc-<pool>`, behind the topic prefix when
        there is one, so deployments that share a cluster under other prefixes never fence
        each other's agents."""
        return f"{self.prefix}gpualloc-{pool}"

    @property
    def inputs(self) -> tuple[str, ...]:
        """What the pool agent consumes."""
        return (self.config, self.jobs, self.traffic, self.bindings)


def encode(message: dict[str, Any]) -> bytes:
    return orjson.dumps(message)


def decode(value: bytes) -> Any:
    """The JSON value; ValueError with a readable reason for bytes that are not UTF-8 JSON."""
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError as e:
        start = value[:START].decode("utf-8", "replace")
        raise ValueError(
            f"not JSON: a message is one JSON object (the envelope); got text starting {start!r} "
            f"(unreadable at character {e.pos})"
        ) from None


START = 12  # characters of a value that is not JSON quoted in the reason


def key_of(message: dict[str, Any]) -> str:
    """The contract's message key: the pool on every input topic (so a pool's records share one
    partition number on all of them) and on the agent's pool-wide topics; the job id on the
    decisions topic."""
    if message.get("type") == "allocation.decided":
        return str(message.get("payload", {}).get("job_id"))
    return str(message.get("pool", "default"))


def partition_of(key: str, partitions: int) -> int:
    """The partition Kafka's default partitioner (murmur2, as the Java client's) gives `key`:
    where a pool's records land on each input topic."""
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions


@dataclass(frozen=True)
class Record:
    """A consumed message, as the shell passes it in."""

    topic: str
    partition: int
    offset: int
    key: str | None
    value: bytes | None  # None: a null value (a tombstone), which is dead-lettered
