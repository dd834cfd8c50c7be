"""The Apache Kafka Java client as an upstream producer in tests: tests/java/ContractProducer.java,
compiled once per session against the broker's own kafka-clients jar (no build tool), and run with
the codec jars it loads on demand. Upstream platforms are mostly Java; the agent must read what
that client writes (its batching, every codec, headers, null keys and values).

Without javac, java or the jars the tests skip with the reason, and fail under CI=true (as the
broker fixture does): `.ci/run` installs a JDK and `make kafka-up` fetches the jars.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

SOURCE = Path(__file__).resolve().parent / "java" / "ContractProducer.java"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")  # every compression.type Kafka has
JARS = ("kafka-clients", "lz4-java", "snappy-java", "zstd-jni", "slf4j-api")  # the client, its codecs, its log API
NULL = r"\N"
TIMEOUT_S = 120


@dataclass(frozen=True)
class Rec:
    """One record as a producer sends it: None for a null key or a null value (a tombstone)."""

    topic: str
    key: str | None
    value: bytes | None
    headers: tuple[tuple[str, str], ...] = ()

    def line(self) -> str:
        """ContractProducer's input line (the values are compact JSON: no tab, no newline)."""
        value = NULL if self.value is None else self.value.decode()
        headers = ";".join(f"{k}={v}" for k, v in self.headers)
        return f"{self.topic}\t{NULL if self.key is None else self.key}\t{value}\t{headers}\n"


def kafka_libs() -> Path:
    """Where deploy/kafka/kafka.sh keeps the broker's jars: $GPUALLOC_KAFKA_CACHE/libs, by default
    ~/.cache/gpualloc/kafka/libs (the script's own lookup)."""
    cache = os.environ.get("GPUALLOC_KAFKA_CACHE") or str(Path.home() / ".cache" / "gpualloc" / "kafka")
    return Path(cache) / "libs"


def _missing(reason: str) -> NoReturn:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the Java producer cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"the Java producer cannot run: {reason}")


@dataclass(frozen=True)
class JavaProducer:
    """The compiled ContractProducer: `send` runs it, one JVM and one producer per call."""

    classpath: str

    @classmethod
    def build(cls, out: Path) -> JavaProducer:
        """Compile into `out`; skips (fails under CI=true) without javac, java or a jar."""
        for tool in ("javac", "java"):
            if shutil.which(tool) is None:
                _missing(f"{tool} not found (a JDK 17+; .ci/run installs default-jdk-headless)")
        libs, jars = kafka_libs(), []
        for name in JARS:
            found = sorted(libs.glob(f"{name}-[0-9]*.jar"))
            if not found:
                _missing(f"no {name} jar in {libs} (deploy/kafka/kafka.sh up fetches them)")
            jars.append(str(found[-1]))
        javac = subprocess.run(
            ["javac", "-cp", jars[0], "-d", str(out), str(SOURCE)], capture_output=True, text=True, timeout=TIMEOUT_S
        )
        assert javac.returncode == 0, f"javac {SOURCE.name} exited {javac.returncode}:\n{javac.stderr}"
        return cls(os.pathsep.join([str(out), *jars]))

    async def send(self, bootstrap: str, records: Sequence[Rec], codec: str) -> None:
        """Send `records` in one producer session with `compression.type=codec`, off the event loop
        (an agent in the same loop keeps running). Checks the producer's metrics: one request for
        them all (each partition's records in one batch), compressed unless the codec is none."""
        proc = await asyncio.create_subprocess_exec(
            "java",
            "-cp",
            self.classpath,
            "ContractProducer",
            bootstrap,
            f"compression.type={codec}",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate("".join(r.line() for r in records).encode()), TIMEOUT_S)
        assert proc.returncode == 0, f"ContractProducer exited {proc.returncode}:\n{err.decode()}"
        metrics = {name: float(value) for name, value in (line.split("=", 1) for line in out.decode().splitlines())}
        assert metrics["record-send-total"] == metrics["records-per-request-avg"] == len(records), metrics
        assert (metrics["compression-rate-avg"] < 1) == (codec != "none"), metrics
