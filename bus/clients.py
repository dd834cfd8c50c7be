"""Every Kafka client of the process is made here, so the listener's security (TLS, SASL) is set
in one place, and started here, so a broker that is not up yet is retried the same way everywhere.

A `Broker` is where the bus is and how to log in to it: the bootstrap servers and the listener's
`KafkaSecurity`, made once by the CLI from the settings (`cli.arguments.bootstrap_of`) and passed
wherever the bus is reached; nothing here is process-wide. The factories take a `Broker` or a
plain bootstrap string (PLAINTEXT, the default, so the pure core and tests need nothing), and
each client they make carries the security it was made with, for `started` to judge and report
its failures.

`started` starts a client, retrying an unreachable broker with exponential backoff up to
`connect_timeout_s` (then `Unreachable`, a KafkaConnectionError); a broker that refuses the login
or the TLS handshake is not retried (`Refused`: a setting to fix). Either way a client that did
not start is closed before the error is raised.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import ssl
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaConnectionError, KafkaError, SaslAuthenticationFailed, UnsupportedSaslMechanismError
from aiokafka.helpers import create_ssl_context

from gpualloc.schemas.settings import SASL_PROTOCOLS, SSL_PROTOCOLS, KafkaSecurity

log = logging.getLogger("gpualloc.kafka")

FIRST_BACKOFF_S = 0.25
MAX_BACKOFF_S = 5.0

Client = TypeVar("Client", AIOKafkaProducer, AIOKafkaConsumer, AIOKafkaAdminClient)

PLAINTEXT = KafkaSecurity()
_SECURITY = "_gpualloc_security"  # the attribute of a client made here that holds its security


@dataclass(frozen=True)
class Broker:
    """The bus: its bootstrap servers (`HOST:PORT[,HOST:PORT...]`, what `str` gives) and how
    every client logs in to it."""

    servers: str
    security: KafkaSecurity = PLAINTEXT

    def __str__(self) -> str:
        return self.servers


def broker(where: Broker | str, security: KafkaSecurity | None = None) -> Broker:
    """`where` as a Broker: a bootstrap string with `security` (default PLAINTEXT), or a Broker,
    its security replaced by `security` when that is given."""
    if isinstance(where, Broker):
        return where if security is None else replace(where, security=security)
    return Broker(where, PLAINTEXT if security is None else security)


class Unreachable(KafkaConnectionError):
    """No broker answered before the start's deadline (a KafkaConnectionError that reads plainly)."""

    def __str__(self) -> str:
        return str(self.args[0])


class Refused(Exception):
    """The broker answered and refused this client's login or TLS setup. `setting`: the
    configuration field to fix."""

    def __init__(self, setting: str, detail: str) -> None:
        super().__init__(setting, detail)
        self.setting, self.detail = setting, detail

    def __str__(self) -> str:
        return f"{self.setting}: {self.detail}"


def producer(bootstrap: Broker | str, **kwargs: Any) -> AIOKafkaProducer:
    b = broker(bootstrap)
    return _made(AIOKafkaProducer(bootstrap_servers=b.servers, **kwargs, **_options(b.security)), b.security)


def consumer(*topics: str, bootstrap: Broker | str, **kwargs: Any) -> AIOKafkaConsumer:
    b = broker(bootstrap)
    return _made(AIOKafkaConsumer(*topics, bootstrap_servers=b.servers, **kwargs, **_options(b.security)), b.security)


def admin(bootstrap: Broker | str) -> AIOKafkaAdminClient:
    b = broker(bootstrap)
    return _made(AIOKafkaAdminClient(bootstrap_servers=b.servers, **_options(b.security)), b.security)


def _made(client: Client, security: KafkaSecurity) -> Client:
    setattr(client, _SECURITY, security)
    return client


def _security_of(client: object) -> KafkaSecurity:
    """The security `client` was made with (PLAINTEXT for one not made here)."""
    security = getattr(client, _SECURITY, PLAINTEXT)
    return security if isinstance(security, KafkaSecurity) else PLAINTEXT


def _options(s: KafkaSecurity) -> dict[str, Any]:
    """The aiokafka keyword arguments of security `s` (a fresh TLS context each time, and the
    password files read now)."""
    out: dict[str, Any] = {"security_protocol": s.security_protocol}
    if s.security_protocol in SASL_PROTOCOLS:
        out.update(
            sasl_mechanism=s.sasl_mechanism, sasl_plain_username=s.sasl_username, sasl_plain_password=s.sasl_secret()
        )
    if s.security_protocol in SSL_PROTOCOLS:
        context = create_ssl_context(
            cafile=s.ssl_cafile, certfile=s.ssl_certfile, keyfile=s.ssl_keyfile, password=s.ssl_secret()
        )
        context.check_hostname = s.ssl_check_hostname
        out["ssl_context"] = context
    return out


@dataclass
class _Attempt:
    """One `client.start()`: the errors aiokafka logged during it. Tasks the start spawns inherit
    the context, hence `open`: their later records are logged as usual."""

    errors: list[BaseException] = field(default_factory=list)
    open: bool = True


# aiokafka logs each failed bootstrap at ERROR with the reason as its last argument, then raises
# a KafkaConnectionError without it. During an attempt of `started` (in its task's context) those
# records are kept for it to judge and report, once per attempt, instead of logged.
_attempt: contextvars.ContextVar[_Attempt | None] = contextvars.ContextVar("gpualloc_kafka_attempt", default=None)


class _BootstrapErrors(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        attempt = _attempt.get()
        if (
            attempt is None
            or not attempt.open
            or not isinstance(record.args, tuple)
            or not record.args
            or not isinstance(record.args[-1], BaseException)
        ):
            return True
        attempt.errors.append(record.args[-1])
        return False


logging.getLogger("aiokafka").addFilter(_BootstrapErrors())


async def started(client: Client, what: str, deadline_s: float | None = None) -> Client:
    """`client`, started. An unreachable broker is retried with backoff (FIRST_BACKOFF_S doubling
    to MAX_BACKOFF_S) until `deadline_s` (default: the configured connect_timeout_s), then
    `Unreachable`; a refused login or TLS handshake raises `Refused` at once. `what`
    names the client in the log and the error. A client that did not start is closed."""
    security = _security_of(client)
    loop = asyncio.get_running_loop()
    began = loop.time()
    deadline = began + (security.connect_timeout_s if deadline_s is None else deadline_s)
    delay = FIRST_BACKOFF_S
    try:
        while (cause := await _start_once(client)) is not None:
            _raise_if_refused(what, cause, security)
            wait = min(delay, deadline - loop.time())
            if wait <= 0:
                raise Unreachable(
                    f"{what}: {_reason(cause, security)} (retried for {loop.time() - began:.1f} s: "
                    "kafka.connect_timeout_s, GPUALLOC_KAFKA__CONNECT_TIMEOUT_S)"
                )
            log.warning("%s: cannot reach Kafka (%s); retrying in %.2f s", what, _reason(cause, security), wait)
            await asyncio.sleep(wait)
            delay = min(2 * delay, MAX_BACKOFF_S)
        return client
    except BaseException:
        await close(client)
        raise


async def close(client: Client) -> None:
    """Stop a client whatever state a lost broker left it in: aiokafka may raise its own
    cancelled fetch task's CancelledError, or a KafkaError, from `stop()`; neither must end a
    caller's cleanup (a cancellation of the calling task itself still propagates)."""
    try:
        await (client.close() if isinstance(client, AIOKafkaAdminClient) else client.stop())
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        log.debug("%s: stop raised its own task's cancellation", type(client).__name__)
    except KafkaError as e:
        log.debug("%s: stop failed: %s", type(client).__name__, e)


async def _start_once(client: Client) -> BaseException | None:
    """Start `client`: None if it started, else why not (the error aiokafka logged, if it did)."""
    attempt = _Attempt()
    token = _attempt.set(attempt)
    try:
        await client.start()
        return None
    except KafkaConnectionError as e:
        return attempt.errors[-1] if attempt.errors else e
    finally:
        attempt.open = False
        _attempt.reset(token)


def _reason(error: BaseException, security: KafkaSecurity) -> str:
    """Why an attempt failed, with a hint when the broker answered and then hung up (a listener
    that wants another security protocol)."""
    name, text = type(error).__name__, str(error)
    reason = text if text.startswith(name) else f"{name}: {text}" if text else name
    if isinstance(error, ConnectionResetError) or (isinstance(error, KafkaConnectionError) and "closed" in text):
        reason += (
            f"; the broker hung up: does its listener want another kafka.security_protocol "
            f"(GPUALLOC_KAFKA__SECURITY_PROTOCOL, now {security.security_protocol})?"
        )
    return reason


def _raise_if_refused(what: str, error: BaseException, s: KafkaSecurity) -> None:
    if isinstance(error, SaslAuthenticationFailed):
        raise Refused(
            "kafka.sasl_password",
            f"{what}: the broker refused the {s.sasl_mechanism} login of "
            f"{s.sasl_username!r} ({error}); check kafka.sasl_username and kafka.sasl_password "
            "(GPUALLOC_KAFKA__SASL_USERNAME, GPUALLOC_KAFKA__SASL_PASSWORD or _FILE)",
        )
    if isinstance(error, UnsupportedSaslMechanismError):
        raise Refused(
            "kafka.sasl_mechanism",
            f"{what}: the broker does not enable {s.sasl_mechanism} (GPUALLOC_KAFKA__SASL_MECHANISM)",
        )
    if isinstance(error, ssl.SSLCertVerificationError):
        raise Refused(
            "kafka.ssl_cafile",
            f"{what}: the broker's certificate failed verification ({error}); "
            "give the CA that signed it (GPUALLOC_KAFKA__SSL_CAFILE), or for a certificate that "
            "names another host, kafka.ssl_check_hostname",
        )
    if isinstance(error, ssl.SSLError):
        raise Refused(
            "kafka.security_protocol",
            f"{what}: TLS with the broker failed ({error}); is its listener "
            f"{s.security_protocol} (GPUALLOC_KAFKA__SECURITY_PROTOCOL)?",
        )
