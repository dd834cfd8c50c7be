"""A real Kafka broker for integration tests: the `kafka_bootstrap` fixture and small helpers.

The broker comes from, in order: $KAFKA_BOOTSTRAP_SERVERS (CI starts one with `make kafka-up`),
a testcontainers KafkaContainer when a Docker engine answers, else deploy/kafka/kafka.sh on a free
port (a local JVM broker, no Docker). With none of them the tests skip, or fail when CI=true.
`local_broker(secure=True)` starts a SASL (and SASL_SSL) broker the same way.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import orjson
import pytest

if TYPE_CHECKING:
    from testcontainers.community.kafka import KafkaContainer

KAFKA_SH = Path(__file__).resolve().parents[2] / "deploy" / "kafka" / "kafka.sh"

# Consumer kwargs for quick group joins and failure detection on a one-node test broker.
FAST_GROUP: dict[str, Any] = {
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 500,
    "max_poll_interval_ms": 30000,
    "auto_offset_reset": "earliest",
    "metadata_max_age_ms": 5000,
}


def unique_topic(prefix: str = "t") -> str:
    """A fresh topic name, so tests never see each other's messages on a shared broker."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def _free_ports(n: int) -> list[int]:
    """n distinct free loopback ports (all held open together, so they differ)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def _container() -> KafkaContainer | None:
    """A started KafkaContainer if a Docker engine answers (the CLI alone is not enough), else
    None: also when the image cannot be pulled, so the local broker still gets its chance."""
    try:
        import docker

        docker.from_env(timeout=2).ping()
    except Exception:
        return None
    from testcontainers.community.kafka import KafkaContainer

    container = (
        KafkaContainer()
        .with_kraft()  # one node: the transaction log needs RF 1 too
        .with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
        .with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
    )
    try:
        return container.start()
    except Exception:
        with contextlib.suppress(Exception):
            container.stop()
        return None


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"no Kafka broker in CI: {reason}", pytrace=False)
    pytest.skip(f"no Kafka broker: {reason}")


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """ "host:port" of a running broker for the whole session (see the module docstring)."""
    if servers := os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        yield servers
        return
    if container := _container():
        try:
            yield container.get_bootstrap_server()
        finally:
            container.stop()
        return
    with local_broker() as broker:
        yield broker.bootstrap


@dataclass(frozen=True)
class LocalBroker:
    bootstrap: str  # the client port: PLAINTEXT, or SASL_PLAINTEXT when secure
    ssl_bootstrap: str | None = None  # secure: the SASL_SSL port
    cafile: Path | None = None  # secure: the CA that signed the broker's certificate
    directory: Path | None = None  # its data, log and pid file (kafka.sh's GPUALLOC_KAFKA_DIR)


@contextlib.contextmanager
def local_broker(secure: bool = False, sasl_user: str = "admin", sasl_password: str = "") -> Iterator[LocalBroker]:
    """deploy/kafka/kafka.sh up on free ports for the block, then down; secure: SASL_PLAINTEXT
    (SCRAM-SHA-512 and PLAIN for `sasl_user`) on the client port and SASL_SSL on a second one.
    Skips (fails under CI=true) when the broker cannot start, e.g. without java."""
    port, controller_port, internal_port, ssl_port = _free_ports(4)
    env = {
        **os.environ,
        "KAFKA_PORT": str(port),
        "KAFKA_CONTROLLER_PORT": str(controller_port),
        "GPUALLOC_KAFKA_DIR": tempfile.mkdtemp(prefix=f"gpualloc-kafka-{port}-"),
        "KAFKA_OWNER_PID": str(os.getpid()),
    }  # the broker dies with this session if killed
    if secure:
        env.update(
            GPUALLOC_KAFKA_SECURITY="sasl",
            KAFKA_INTERNAL_PORT=str(internal_port),
            KAFKA_SSL_PORT=str(ssl_port),
            KAFKA_SASL_USER=sasl_user,
            KAFKA_SASL_PASSWORD=sasl_password,
        )

    def down() -> None:
        subprocess.run(["bash", str(KAFKA_SH), "down"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(env["GPUALLOC_KAFKA_DIR"], ignore_errors=True)  # also if `up` failed early

    try:  # the first run fetches the jars with Maven (seconds; minutes on a slow mirror)
        up = subprocess.run(["bash", str(KAFKA_SH), "up"], env=env, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        down()
        _unavailable(f"kafka.sh up: {exc}")
    if up.returncode != 0:
        down()
        _unavailable(f"kafka.sh up exited {up.returncode}:\n{up.stderr[-3000:]}")
    try:
        cafile = Path(env["GPUALLOC_KAFKA_DIR"]) / "tls" / "ca.pem"
        yield LocalBroker(
            up.stdout.strip().splitlines()[-1],
            f"127.0.0.1:{ssl_port}" if secure else None,
            cafile if secure else None,
            Path(env["GPUALLOC_KAFKA_DIR"]),
        )
    finally:
        down()


def port_open(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
        return True
    return False


async def read_all(bootstrap: str, topic: str) -> list[dict]:
    """Every committed message of `topic` so far (to each partition's end as of the call),
    decoded, in order per partition (tombstones left out); none for a topic not made yet. Not "until a second of
    silence": the agent writes its ledger more often than once a second (a cut before each
    boundary, then the commit), so a topic that never falls silent would never be read out."""
    from aiokafka import TopicPartition

    from gpualloc.bus.admin import partition_counts
    from gpualloc.bus.history import read_range, reader

    count = (await partition_counts(bootstrap, [topic])).get(topic, 0)
    if not count:
        return []
    consumer = reader(bootstrap)
    await consumer.start()
    try:
        records = await read_range(consumer, {TopicPartition(topic, p): 0 for p in range(count)})
        return [orjson.loads(r.value) for r in records if r.value is not None]  # not tombstones
    finally:
        await consumer.stop()
