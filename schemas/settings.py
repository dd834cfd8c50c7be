"""Every operating setting and its default in one place: full mode, the forecasters, the
simulator, the agent, the node agent, Kafka security. The contract's own constants (the pool's
defaults, the input bounds) are in `gpualloc.schemas.limits`. Settings are read by the CLI, the simulator and the agents through `load_settings`, which layers,
highest first: command-line flags, then `GPUALLOC_*` environment variables (nested fields with
`__`, e.g. `GPUALLOC_AGENT__FULL_MODE__EVERY=3`) and `KAFKA_BOOTSTRAP_SERVERS`, then a settings
file (`--settings FILE` or `GPUALLOC_SETTINGS`, JSON or TOML), then the defaults below. The plain
models (`AgentSettings()`, ...) never read the environment, so the pure core can take its
defaults from them.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, Literal, Mapping

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, FilePath, SecretStr, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import (
    BaseSettings,
    JsonConfigSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from gpualloc.schemas.limits import LIMITS

SETTINGS_FILE_ENV = "GPUALLOC_SETTINGS"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FullModeOptions(_Frozen):
    """How one full-mode (MILP) solve runs. A `node_limit` with fixed `threads` and `seed` and no
    `time_limit` makes a run reproducible (a work limit, not a clock)."""

    solver: Literal["highs", "cbc"] = "highs"
    time_limit: float | None = Field(default=60.0, gt=0)  # seconds; None: no limit
    mip_gap: float = Field(default=1e-4, ge=0)
    threads: int = Field(default=1, ge=1)
    seed: int = 0
    node_limit: int | None = Field(default=None, ge=1)
    progress: bool = False  # stream the solver's log (incumbent and bound over time) to stderr
    exact: bool | None = None  # per-GPU real-time sets in the model (no stage 2); None: where stage 2 falls short
    lns: bool = (
        False  # instead of the whole model: exact sub-models over windows of nodes (solvers/policies/milp/lns.py)
    )


class SolveOptions(_Frozen):
    """How a registered scheduler runs (`gpualloc solve`, `bench`, the agent's hot path)."""

    effort: float = Field(default=1.0, ge=0)  # heuristic: local-search budget (placements, not time)
    full_mode: FullModeOptions = FullModeOptions()


class RollingFullMode(_Frozen):
    """Full mode in the rolling horizon: a solve every `every` steps (0: never) on a snapshot
    holding the `max_jobs` most valuable queued jobs."""

    every: int = Field(ge=0)
    max_jobs: int = Field(default=20, ge=1)
    options: FullModeOptions = FullModeOptions()


class ForecastSettings(_Frozen):
    """The forecasters (`gpualloc.forecasting`). A job is planned at an upper quantile of its
    forecast duration because a job that overruns its plan delays what was planned after it,
    while one that ends early only leaves GPUs to the next replan; real-time demand at an upper
    quantile because a shortfall is penalized and spare GPUs are not."""

    training_quantile: float = Field(default=0.7, gt=0, lt=1)
    quantization_quantile: float = Field(default=0.7, gt=0, lt=1)
    # of the share of its steps an app's plan covers, when not priced (`realtime_priced` off): a GPU held
    # spare for an app seldom finds a batch block to host for a whole job, while a GPU-step short costs the
    # penalty times the app's priority
    realtime_quantile: float = Field(default=0.99, gt=0, lt=1)
    # plan each app at the quantile the objective's prices call for (its shortfall penalty against the
    # batch value a GPU held idle displaces: `gpualloc.solvers.planner.headroom`), not realtime_quantile:
    # against a fixed 0.99 it earns more objective on the serving and generated traces and the bundled
    # four-week trace, with no more shortfall on the traces (docs/results.md, "Headroom")
    realtime_priced: bool = True
    # plan each step's apps to lose any one node and keep, together, their median demand (`gpualloc.solvers.planner.
    # node_reserve`): a node's GPUs held against an outage, paid in batch work; off by default, as on the
    # serving and generated traces it costs more objective than the shortfall it saves (docs/results.md,
    # "A node's worth held")
    realtime_node_reserve: bool = False
    interval: float = Field(default=0.8, gt=0, lt=1)  # the coverage of the interval decisions report
    traffic_weeks: int = Field(default=6, ge=1, le=52)  # weeks of hourly traffic history kept an app
    traffic_forgetting: float = Field(default=0.7, gt=0, le=1)  # a week's weight against the week after it
    # the most of the pool a forecast GPU count takes (at least the job's own tensor x pipeline layout): a
    # job that needs more gives `gpus` itself, so no forecast error can hold the whole pool for one job
    max_pool_share: float = Field(default=0.5, gt=0, le=1)
    # the chance of running out of memory a forecast GPU count accepts: an out-of-memory start costs a
    # failed job and its queue time, a GPU too many only that GPU, so counts are sized on the safe side
    oom_risk: float = Field(default=0.2, gt=0, lt=0.5)
    # the version of the job physics (`gpualloc.forecasting.designs.PHYSICS`): 3, the stack's own
    # accounting with its settings, multi-GPU buffers and time, AWQ and GPTQ layer by layer; 2, that
    # accounting before them; 1, the textbook one (ledger entries that name none were made by it)
    physics: int = Field(default=3, ge=1, le=3)  # an integer field, so a variable ("2") sets it too

    def quantile(self, kind: str) -> float:
        return self.quantization_quantile if kind == "quantization" else self.training_quantile


# A pass decides its arrivals by replanning the window (every started job kept where it is)
# while queued jobs x pool GPUs is at most this; above it, by insertion into the current plan.
# A count of work, never a clock, so a replay decides as the agent did. 0: always insert (on
# seven traces replanning changed timely value by -0.7% to +2.0%, no gain to take by default).
REPLAN_WORK = 0


class SimulationSettings(_Frozen):
    """`gpualloc simulate`. Full mode every 6 steps with a node limit, so reruns mostly agree
    (the time limit still binds at the root on large windows)."""

    full_mode: RollingFullMode = RollingFullMode(every=6, options=FullModeOptions(time_limit=10.0, node_limit=50))
    forecast: ForecastSettings = ForecastSettings()
    replan_work: int = Field(default=REPLAN_WORK, ge=0)  # a pass replans while queued jobs x GPUs <= this


class AgentSettings(_Frozen):
    """The pool agent (`gpualloc agent`)."""

    policy: str = "full-mode"  # the online policy: hot path (+ full mode), by registered names
    step_seconds: float | None = Field(default=None, gt=0)  # compressed clock; None: the pool's step_minutes
    group_id: str | None = None  # a pool's offsets group (lag monitoring); None: gpualloc-agent-<pool>
    group: str | None = None  # share the pools among the agents of this consumer group (inputs keyed by pool)
    member: str | None = None  # static membership in `group`: a restart under this name keeps its pools
    session_timeout_ms: int = Field(default=10_000, ge=1000)  # until a silent member's pools move on
    hot_path_effort: float = Field(default=0.05, ge=0)  # a pass holds up every arrival of the next poll
    replan_work: int = Field(default=REPLAN_WORK, ge=0)  # a pass replans while queued jobs x GPUs <= this
    # the next boundary's plan made in a process of its own just before the boundary, and carried onto
    # the window there (else the boundary's pass replans, holding up the arrivals behind it)
    plan_ahead: bool = True
    full_mode: RollingFullMode = RollingFullMode(every=1, options=FullModeOptions(time_limit=None))
    full_mode_time_cap: float = Field(default=60.0, gt=0)  # without a time_limit: half a step, at most this
    # the full-mode solver process's address space: a model that would need more is not started, and
    # an allocation past it fails that solve alone (None: no limit)
    full_mode_memory_mb: int | None = Field(default=2048, ge=256)
    # full mode is not started on a larger model (nonzeros, estimated): above it no run improved a plan
    # here in 20-45 s (README, "Where full mode pays"); None: no cap
    full_mode_max_nonzeros: int | None = Field(default=1_500_000, ge=1)
    max_wait_ms: int = Field(default=200, ge=1)  # longest poll: stops and boundaries are noticed within it
    # a poll of nothing but node agents' heartbeats waits for the next pass with other work, at most
    # this long: one ledger entry every few seconds for a pool's heartbeats, not one a poll
    heartbeat_flush_s: float = Field(default=5.0, ge=0)
    # a fetch of inputs parked at the broker waits at most this long: a longer wait holds back the
    # arrivals of a fetch parked on a loaded machine (aiokafka's default is 500 ms)
    fetch_wait_ms: int = Field(default=20, ge=0)
    catch_up_steps: int = Field(default=4, ge=1)  # commits a pass at most, when the pool is behind its clock
    # a snapshot once the ledger since the last outgrows it: at a commit, or between commits after at least this many transactions
    snapshot_every: int = Field(default=50, ge=1)
    transaction_timeout_ms: int = Field(default=10_000, ge=1000)  # the broker aborts a dead agent's transaction
    partitions: int = Field(default=1, ge=1)  # for the topics the agent creates (a group's share unit)
    # the topics the agent creates are replicated this many times, at most once per broker it finds, and
    # take writes (acks=all) while this many replicas are in sync, at most their replication factor
    replication_factor: int = Field(default=3, ge=1)
    min_insync_replicas: int = Field(default=2, ge=1)
    retention_ms: int = Field(default=7 * 24 * 3600 * 1000, ge=-1)  # inputs and ledger: as far back as audits reach
    seen_limit: int = Field(default=200_000, ge=1)  # event ids remembered for de-duplication
    dedup_steps: int = Field(default=24, ge=0)  # ...and kept in snapshots for this many steps
    pending_limit: int = Field(default=LIMITS.pending_events, ge=0)  # events held until the pool is configured
    forecast: ForecastSettings = ForecastSettings()
    metrics_port: int | None = Field(default=None, ge=0, le=65535)  # /metrics, /healthz, /readyz (None: off)

    def full_mode_time_limit(self, step_seconds: float) -> float:
        """Seconds a full-mode run may take: its own limit, else half a step up to the cap."""
        limit = self.full_mode.options.time_limit
        return limit if limit is not None else min(self.full_mode_time_cap, step_seconds / 2)


class LogSettings(_Frozen):
    """The agents' logs (`gpualloc.agent.logs`): JSON a line when not on a terminal."""

    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "json", "console"] = "auto"  # auto: console on a terminal, else JSON


class NodeAgentSettings(_Frozen):
    """The node agent (`gpualloc node-agent`)."""

    resync_depth: int = Field(default=50, ge=1)  # messages read back per commits partition on start
    resync_timeout_s: float = Field(default=30.0, gt=0)
    poll_ms: int = Field(default=200, ge=1)  # how long a stop request can go unnoticed
    fetch_wait_ms: int = Field(default=20, ge=0)  # a fetch waits this long for the agent's next transaction
    partitions_wait_s: float = Field(default=5.0, gt=0)
    metrics_port: int | None = Field(default=None, ge=0, le=65535)  # /metrics, /healthz, /readyz (None: off)
    # a `node.heartbeat` this often (the agent's liveness bound is three of them, 30 s at least);
    # 512 nodes at 10 s are 51 small records a second, planned a few seconds' worth a pass. 0: none,
    # for a pool only some of whose nodes run a node agent (once any beats, the pool expects all to)
    heartbeat_s: float = Field(default=10.0, ge=0, le=LIMITS.watch_seconds)


SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
SSL_PROTOCOLS = ("SSL", "SASL_SSL")


def read_secret(path: Path) -> str:
    """A secret kept in a file (a mounted Kubernetes secret): its text without the final newline."""
    return path.read_text(encoding="utf-8").rstrip("\r\n")


class KafkaSecurity(_Frozen):
    """How every Kafka client of the process reaches the broker: the listener's protocol, SASL
    login, TLS files, and how long a start retries a broker it cannot reach. Passwords are
    SecretStr (masked in repr, str and errors); a `*_password_file` is read whenever a client is
    made, so a rotated secret reaches the next one. Errors name the field (`kafka.sasl_username`)."""

    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        default=None, validate_default=True
    )
    sasl_username: str | None = Field(default=None, validate_default=True)
    sasl_password_file: FilePath | None = None  # before the password, whose check needs it
    sasl_password: SecretStr | None = Field(default=None, validate_default=True)
    ssl_cafile: FilePath | None = None  # CA bundle the broker's certificate is checked against; None: the system's
    ssl_certfile: FilePath | None = None  # this client's certificate (mutual TLS); may hold its key too
    ssl_keyfile: FilePath | None = None
    ssl_password_file: FilePath | None = None
    ssl_password: SecretStr | None = None  # of the key
    ssl_check_hostname: bool = True
    connect_timeout_s: float = Field(default=30.0, gt=0)  # a start retries an unreachable broker this long

    @field_validator(
        "sasl_mechanism",
        "sasl_username",
        "sasl_password",
        "sasl_password_file",
        "ssl_cafile",
        "ssl_certfile",
        "ssl_keyfile",
        "ssl_password",
        "ssl_password_file",
    )
    @classmethod
    def _fits_protocol(cls, value: Any, info: ValidationInfo) -> Any:
        """A SASL or TLS setting the protocol does not use is a mistake (a forgotten protocol)."""
        protocol = info.data.get("security_protocol")
        assert info.field_name is not None  # a field validator's
        wanted = SASL_PROTOCOLS if info.field_name.startswith("sasl") else SSL_PROTOCOLS
        if value is not None and protocol is not None and protocol not in wanted:
            raise PydanticCustomError(
                "kafka_security",
                "only with security_protocol {wanted} (it is {protocol})",
                {"wanted": " or ".join(wanted), "protocol": protocol},
            )
        return value

    @field_validator("sasl_mechanism", "sasl_username")
    @classmethod
    def _required_by_sasl(cls, value: Any, info: ValidationInfo) -> Any:
        protocol = info.data.get("security_protocol")
        if value is None and protocol in SASL_PROTOCOLS:
            raise PydanticCustomError(
                "kafka_security", "required with security_protocol {protocol}", {"protocol": protocol}
            )
        return value

    @field_validator("sasl_password_file", "ssl_password_file")
    @classmethod
    def _readable(cls, path: Path | None) -> Path | None:
        """Read once here, so a bad file stops the start instead of the first client."""
        if path is not None:
            try:
                secret = read_secret(path)
            except (OSError, UnicodeDecodeError) as e:
                raise PydanticCustomError("kafka_security", "cannot read it: {e}", {"e": str(e)}) from None
            if not secret:
                raise PydanticCustomError("kafka_security", "is empty", {})
        return path

    @field_validator("sasl_password", "ssl_password")
    @classmethod
    def _one_secret(cls, secret: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        """The password or its file, not both; SASL needs one (a file that failed is reported already)."""
        file = f"{info.field_name}_file"
        if secret is not None and info.data.get(file) is not None:
            raise PydanticCustomError("kafka_security", "give it or {file}, not both", {"file": file})
        protocol = info.data.get("security_protocol")
        if (
            secret is None
            and info.field_name == "sasl_password"
            and protocol in SASL_PROTOCOLS
            and file in info.data
            and info.data[file] is None
        ):
            raise PydanticCustomError(
                "kafka_security",
                "required with security_protocol {protocol} (or {file})",
                {"protocol": protocol, "file": file},
            )
        return secret

    @field_validator("ssl_keyfile")
    @classmethod
    def _key_with_certificate(cls, path: Path | None, info: ValidationInfo) -> Path | None:
        if path is not None and info.data.get("ssl_certfile") is None:
            raise PydanticCustomError("kafka_security", "needs ssl_certfile (the certificate of this key)", {})
        return path

    def sasl_secret(self) -> str | None:
        return self._secret(self.sasl_password, self.sasl_password_file)

    def ssl_secret(self) -> str | None:
        return self._secret(self.ssl_password, self.ssl_password_file)

    @staticmethod
    def _secret(inline: SecretStr | None, file: Path | None) -> str | None:
        if inline is not None:
            return inline.get_secret_value()
        return read_secret(file) if file is not None else None


class Settings(BaseSettings):
    """All operating settings; build it with `load_settings`."""

    model_config = SettingsConfigDict(env_prefix="GPUALLOC_", env_nested_delimiter="__", extra="forbid", frozen=True)

    bootstrap: str | None = Field(
        default=None, validation_alias=AliasChoices("bootstrap", "GPUALLOC_BOOTSTRAP", "KAFKA_BOOTSTRAP_SERVERS")
    )  # Kafka HOST:PORT[,HOST:PORT]
    topic_prefix: str = ""  # in front of every topic name (isolated runs)
    pool: str = "default"  # the pool an agent plans and a node agent serves
    solve: SolveOptions = SolveOptions()
    simulation: SimulationSettings = SimulationSettings()
    agent: AgentSettings = AgentSettings()
    node_agent: NodeAgentSettings = NodeAgentSettings()
    kafka: KafkaSecurity = KafkaSecurity()  # GPUALLOC_KAFKA__SECURITY_PROTOCOL, GPUALLOC_KAFKA__SASL_PASSWORD, ...
    log: LogSettings = LogSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags, then the environment, then the settings file (JSON or TOML), then the defaults:
        sources are merged field by field, so one nested setting given (`--full-mode-nodes`,
        `GPUALLOC_SIMULATION__FULL_MODE__EVERY`) keeps its siblings' defaults instead of
        rebuilding their model from the class defaults (or failing on a required field)."""
        return (
            init_settings,
            env_settings,
            JsonConfigSettingsSource(settings_cls),
            TomlConfigSettingsSource(settings_cls),
            _Defaults(settings_cls),
        )


class _Defaults(PydanticBaseSettingsSource):
    """The nested settings' defaults as plain data: the lowest source, under every other."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return {
            name: f.default.model_dump()
            for name, f in self.settings_cls.model_fields.items()
            if isinstance(f.default, BaseModel)
        }


def load_settings(flags: Mapping[str, Any] | None = None, file: str | Path | None = None) -> Settings:
    """Settings from `flags` (nested dicts of the fields set on the command line), the
    environment and `file` (else $GPUALLOC_SETTINGS). Raises pydantic's ValidationError naming
    the field, or ValueError for a settings file that cannot be read."""
    path = file or os.environ.get(SETTINGS_FILE_ENV) or None
    cls: type[Settings] = Settings
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"{path}: settings file not found")
        key = "toml_file" if path.suffix == ".toml" else "json_file"
        cls = type(
            "Settings", (Settings,), {"model_config": {**Settings.model_config, key: path}, "__doc__": Settings.__doc__}
        )
    try:
        return cls(**dict(flags or {}))
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
        assert path is not None  # only a settings file is decoded
        raise ValueError(f"{path}: not {'TOML' if path.suffix == '.toml' else 'JSON'} ({e})") from None
