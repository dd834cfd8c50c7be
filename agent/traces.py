"""Trace files: JSONL of contract events, read with a clear error per bad line, and derived
from the public Pollux workloads (Philly-sampled jobs, Apache-2.0; see shared/traces)."""

from __future__ import annotations

import csv
import math
from datetime import timedelta
from pathlib import Path

import orjson
from pydantic import ValidationError

from gpualloc.agent.loading import InputError, read_text
from gpualloc.schemas import describe
from gpualloc.schemas.events import parse_event, timestamp
from gpualloc.solvers.simulation.traces import T0

# Pollux gives no durations (its simulator derives them from throughput models): steps of
# 10 minutes per application, from the artifact's job sizes, and a priority per application.
POLLUX_APPS = {"ncf": (2, 3), "cifar10": (3, 4), "deepspeech2": (9, 6), "bert": (9, 7),
               "yolov3": (12, 5), "imagenet": (18, 8)}


def read_trace(path: str | Path) -> list:
    """Parsed (envelope, payload) pairs; InputError naming the line, field and rule."""
    return [parsed for _, parsed in _read(path)]


def read_trace_messages(path: str | Path) -> list[dict]:
    """The trace's messages as they go on the bus, each validated first."""
    return [message for message, _ in _read(path)]


def _read(path: str | Path) -> list[tuple[dict, tuple]]:
    events, problems = [], []
    for n, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            message = orjson.loads(line)
            events.append((message, parse_event(message)))
        except orjson.JSONDecodeError as e:
            problems.append(f"line {n}: not JSON ({e})")
        except ValidationError as e:
            problems += [f"line {n}: {msg}" for msg in describe(e)]
        except ValueError as e:
            problems.append(f"line {n}: {e}")
    if problems:
        raise InputError(str(path), problems[:20] + ([f"... and {len(problems) - 20} more"] if len(problems) > 20 else []))
    return events


def write_trace(path: str | Path, events: list[dict]) -> None:
    Path(path).write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))


def pollux_trace(csv_path: str | Path, gpus: int = 64, gpus_per_node: int = 8) -> list[dict]:
    """A Pollux workload as contract events on 10-minute steps: each job asks for its initial
    replica count rounded up to a power of two (at most a node), runs its application's duration."""
    out: list[dict] = []

    def emit(seconds: float, kind: str, payload: dict) -> None:
        out.append({"event_id": f"pollux-{len(out)}", "type": kind,
                    "occurred_at": timestamp(T0 + timedelta(seconds=seconds)), "pool": "default",
                    "schema_version": 1, "payload": payload})

    emit(0, "pool.configured", {"gpus": gpus, "gpus_per_node": gpus_per_node, "horizon": 24,
                                "step_minutes": 10, "time_decay": 0.99, "realtime_penalty": 8.0, "swap_cap": 2})
    with open(csv_path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            duration, priority = POLLUX_APPS.get(row["application"], (6, 5))
            size = min(gpus_per_node, 1 << max(0, math.ceil(math.log2(max(1, int(row["num_replicas"]))))))
            emit(float(row["time"]), "job.submitted",
                 {"id": row["name"], "kind": "training", "priority": priority, "gpus": size,
                  "duration": duration, "actual_duration": duration})
    return sorted(out, key=lambda e: e["occurred_at"])
