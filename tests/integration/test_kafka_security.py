"""Kafka security settings (`kafka.*`, GPUALLOC_KAFKA__*): bad combinations exit 2 naming the
field, a password never shows (repr, str, --help, logs, errors) and may come from a file; and the
real CLI on a local SASL broker: the agent and a node agent log in with SCRAM-SHA-512, the
upstream producer with PLAIN, `tail` over SASL_SSL; a wrong password or a plaintext client
against the SASL port exits 2 naming what to fix."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import orjson
import pytest
from support.kafka_broker import LocalBroker, local_broker, read_all, unique_topic

from gpualloc.agent.cli import main
from gpualloc.agent.node.binders import FileBinder
from gpualloc.bus import clients
from gpualloc.bus.topics import Topics
from gpualloc.schemas.events import envelope
from gpualloc.schemas.settings import KafkaSecurity, load_settings

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = f"pw-{uuid.uuid4().hex}"  # unique, so finding it anywhere is a leak
LOGIN = {
    "GPUALLOC_KAFKA__SECURITY_PROTOCOL": "SASL_PLAINTEXT",
    "GPUALLOC_KAFKA__SASL_MECHANISM": "SCRAM-SHA-512",
    "GPUALLOC_KAFKA__SASL_USERNAME": "admin",
}  # all but the password
SCRAM = {**LOGIN, "GPUALLOC_KAFKA__SASL_PASSWORD": PASSWORD}


@pytest.fixture(autouse=True)
def plaintext_again(monkeypatch) -> Iterator[None]:
    """In-process CLI runs configure the clients: each test starts and ends with the default."""
    for name in [n for n in os.environ if n.startswith("GPUALLOC_KAFKA__")] + ["GPUALLOC_SETTINGS"]:
        monkeypatch.delenv(name, raising=False)
    yield


def run_cli(monkeypatch, capsys, env: dict[str, str], *args: str) -> tuple[int, str]:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out + out.err


# ---- settings ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "env, needle",
    [
        (
            {"GPUALLOC_KAFKA__SECURITY_PROTOCOL": "SASL_SSL"},
            "kafka.sasl_mechanism: required with security_protocol SASL_SSL",
        ),
        (
            {"GPUALLOC_KAFKA__SECURITY_PROTOCOL": "SASL_PLAINTEXT", "GPUALLOC_KAFKA__SASL_MECHANISM": "PLAIN"},
            "kafka.sasl_username: required with security_protocol SASL_PLAINTEXT",
        ),
        (
            {**SCRAM, "GPUALLOC_KAFKA__SASL_PASSWORD_FILE": "/etc/hostname"},
            "kafka.sasl_password: give it or sasl_password_file, not both",
        ),
        (LOGIN, "kafka.sasl_password: required with security_protocol SASL_PLAINTEXT (or sasl_password_file)"),
        (
            {"GPUALLOC_KAFKA__SASL_USERNAME": "admin"},
            "kafka.sasl_username: only with security_protocol SASL_PLAINTEXT or SASL_SSL (it is PLAINTEXT)",
        ),
        (
            {"GPUALLOC_KAFKA__SECURITY_PROTOCOL": "SASL_PLAINTEXT", "GPUALLOC_KAFKA__SASL_MECHANISM": "GSSAPI"},
            "kafka.sasl_mechanism: Input should be 'PLAIN', 'SCRAM-SHA-256' or 'SCRAM-SHA-512'",
        ),
        (
            {"GPUALLOC_KAFKA__SECURITY_PROTOCOL": "SSL", "GPUALLOC_KAFKA__SSL_KEYFILE": "/etc/hostname"},
            "kafka.ssl_keyfile: needs ssl_certfile",
        ),
        (
            {"GPUALLOC_KAFKA__SECURITY_PROTOCOL": "SSL", "GPUALLOC_KAFKA__SSL_CAFILE": "/no/ca.pem"},
            "kafka.ssl_cafile: Path does not point to a file",
        ),
        ({"GPUALLOC_KAFKA__CONNECT_TIMEOUT_S": "0"}, "kafka.connect_timeout_s: Input should be greater than 0"),
    ],
)
def test_a_bad_combination_exits_2_naming_the_field(monkeypatch, capsys, env, needle):
    code, output = run_cli(monkeypatch, capsys, env, "tail", "--bootstrap", "127.0.0.1:1")
    assert code == 2 and f"gpualloc: settings: {needle}" in output


def test_the_password_never_shows(monkeypatch, capsys):
    for name, value in SCRAM.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert settings.kafka.sasl_secret() == PASSWORD
    for text in (repr(settings), str(settings), settings.model_dump_json(), repr(settings.kafka)):
        assert PASSWORD not in text and "**********" in text
    assert main(["agent", "--help"]) == 0
    assert PASSWORD not in capsys.readouterr().out
    # a bad setting beside it: the error names the field, the password stays out of it
    code, output = run_cli(
        monkeypatch, capsys, {"GPUALLOC_KAFKA__SECURITY_PROTOCOL": "SSL"}, "tail", "--bootstrap", "127.0.0.1:1"
    )
    assert code == 2 and "kafka.sasl_password: only with security_protocol" in output and PASSWORD not in output


def test_retries_log_no_password(monkeypatch, capsys, caplog):
    env = {**SCRAM, "GPUALLOC_KAFKA__CONNECT_TIMEOUT_S": "0.3"}
    code, output = run_cli(monkeypatch, capsys, env, "tail", "--bootstrap", "127.0.0.1:1")
    assert code == 2 and "retrying" in caplog.text and "--bootstrap: cannot reach Kafka" in output
    assert PASSWORD not in caplog.text + output


def test_a_password_file_is_read_when_a_client_is_made(tmp_path, monkeypatch):
    secret = tmp_path / "password"
    secret.write_text("first\n")  # `echo` style: the newline is not part of it
    for name, value in {**LOGIN, "GPUALLOC_KAFKA__SASL_PASSWORD_FILE": str(secret)}.items():
        monkeypatch.setenv(name, value)
    kafka = load_settings().kafka
    assert kafka.sasl_secret() == "first" and "first" not in repr(kafka)
    secret.write_text("rotated")
    assert kafka.sasl_secret() == "rotated"


@pytest.mark.parametrize("content, needle", [(b"\n", "is empty"), (b"\xff\xfe", "cannot read it")])
def test_an_unusable_password_file_is_named(tmp_path, monkeypatch, capsys, content, needle):
    secret = tmp_path / "password"
    secret.write_bytes(content)
    code, output = run_cli(
        monkeypatch,
        capsys,
        {**LOGIN, "GPUALLOC_KAFKA__SASL_PASSWORD_FILE": str(secret)},
        "tail",
        "--bootstrap",
        "127.0.0.1:1",
    )
    assert code == 2 and f"kafka.sasl_password_file: {needle}" in output


# ---- a real SASL broker ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def secure_kafka() -> Iterator[LocalBroker]:
    with local_broker(secure=True, sasl_password=PASSWORD) as broker:
        yield broker


def cli_env(**settings: str) -> dict[str, str]:
    """The environment of a CLI subprocess: these GPUALLOC_KAFKA__* settings and no others."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUALLOC_KAFKA__")}
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    return env | {f"GPUALLOC_KAFKA__{k.upper()}": v for k, v in settings.items()}


def scram() -> dict[str, str]:
    return cli_env(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="admin",
        sasl_password=PASSWORD,
    )


def gpualloc(args: list[str], env: dict[str, str], out: Path) -> subprocess.Popen:
    with out.open("wb") as f:
        return subprocess.Popen(
            [sys.executable, "-m", "gpualloc", *args], cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT
        )


def finished(proc: subprocess.Popen, out: Path) -> str:
    """The output of `proc`, once it exited 0."""
    assert proc.wait(timeout=30) == 0, out.read_text()
    return out.read_text()


async def until(check: Callable[[], object], seconds: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.25)


async def test_a_pool_runs_through_sasl(secure_kafka, tmp_path):
    """The agent and a node agent (SCRAM-SHA-512), tail over SASL_SSL with the password in a file,
    and the upstream producer of this test (PLAIN) share one SASL broker."""
    prefix = unique_topic("sasl") + "."
    topics = Topics.with_prefix(prefix)
    config = tmp_path / "pool.json"
    config.write_text(json.dumps({"gpus": 8, "gpus_per_node": 8, "horizon": 6, "step_minutes": 60}))
    secret = tmp_path / "password"
    secret.write_text(PASSWORD + "\n")
    bus = ["--bootstrap", secure_kafka.bootstrap, "--topic-prefix", prefix]
    logs = {name: tmp_path / f"{name}.log" for name in ("agent", "node", "tail")}
    agent = gpualloc(
        ["agent", *bus, "--config", str(config), "--policy", "heuristic", "--step-seconds", "0.5"],
        scram(),
        logs["agent"],
    )
    node = gpualloc(
        ["node-agent", "--node", "0", "--gpus", "0-7", "--bind-dir", str(tmp_path / "node0"), *bus],
        scram(),
        logs["node"],
    )
    tail = gpualloc(
        ["tail", "--from-beginning", "--bootstrap", secure_kafka.ssl_bootstrap, "--topic-prefix", prefix],
        cli_env(
            security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_username="admin",
            sasl_password_file=str(secret),
            ssl_cafile=str(secure_kafka.cafile),
        ),
        logs["tail"],
    )
    procs = [agent, node, tail]
    login = KafkaSecurity(
        security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_username="admin", sasl_password=PASSWORD
    )
    try:
        producer = await clients.started(clients.producer(clients.Broker(secure_kafka.bootstrap, login)), "upstream")
        try:
            job = envelope(
                "job.submitted",
                {"id": "train-1", "kind": "training", "priority": 5, "gpus": 4, "duration": 20},
                datetime.now(timezone.utc),
                "e-train-1",
            )
            await producer.send_and_wait(topics.jobs, orjson.dumps(job), key=b"default")
        finally:
            await producer.stop()
        await until(lambda: "decided   train-1: start" in logs["tail"].read_text(), 60, "tail's decision line")
        await until(lambda: "train-1" in FileBinder(tmp_path / "node0").bound(), 30, "the node agent's binding")
        decisions = [
            m["payload"] for m in await read_all(clients.Broker(secure_kafka.bootstrap, login), topics.decisions)
        ]
        assert [(d["job_id"], d["action"]) for d in decisions] == [("train-1", "start")]
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
    output = "".join(finished(proc, log) for proc, log in zip(procs, logs.values()))
    assert "agent stopped: " in output and "1 decisions" in output
    assert PASSWORD not in output and "Unclosed" not in output and "Traceback" not in output


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_a_wrong_password_exits_2_naming_the_setting(secure_kafka, mechanism):
    wrong = f"wrong-{uuid.uuid4().hex}"
    env = cli_env(
        security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism, sasl_username="admin", sasl_password=wrong
    )
    proc = subprocess.run(
        [sys.executable, "-m", "gpualloc", "tail", "--bootstrap", secure_kafka.bootstrap],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert (
        f"gpualloc: kafka.sasl_password: Kafka at {secure_kafka.bootstrap}: tail consumer: the broker refused "
        f"the {mechanism} login of 'admin'" in proc.stderr
    )
    assert "GPUALLOC_KAFKA__SASL_PASSWORD" in proc.stderr and wrong not in proc.stderr and PASSWORD not in proc.stderr
    assert "retrying" not in proc.stderr and "Unclosed" not in proc.stderr


@pytest.mark.parametrize(
    "settings, port, needle",
    [
        (
            {},
            "bootstrap",
            "--bootstrap: cannot reach Kafka at {bootstrap}: agent admin: KafkaConnectionError: "
            "Connection at {bootstrap} closed; the broker hung up: does its listener want another "
            "kafka.security_protocol (GPUALLOC_KAFKA__SECURITY_PROTOCOL, now PLAINTEXT)?",
        ),
        (
            {
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-512",
                "sasl_username": "admin",
                "sasl_password": PASSWORD,
            },
            "ssl_bootstrap",
            "kafka.ssl_cafile: Kafka at {bootstrap}: agent admin: the broker's certificate failed verification",
        ),
    ],
    ids=["plaintext-client", "tls-without-its-ca"],
)
def test_a_client_the_listener_does_not_expect_fails_clearly(secure_kafka, settings, port, needle):
    bootstrap = getattr(secure_kafka, port)
    env = cli_env(connect_timeout_s="1", **settings)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpualloc",
            "agent",
            "--bootstrap",
            bootstrap,
            "--policy",
            "heuristic",
            "--topic-prefix",
            unique_topic("refused") + ".",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and needle.format(bootstrap=bootstrap) in proc.stderr, proc.stderr
    assert "Unclosed" not in proc.stderr and "Traceback" not in proc.stderr
