"""Every default in one place: the pool's contract defaults, full mode, the agent, the node agent.

Two kinds of default live here. The pool's (`POOL`) are the contract's: they give scenario files
and `pool.configured` messages their meaning, so nothing overrides them. The rest are operating
settings, read by the CLI, the simulator and the agents through `load_settings`, which layers,
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

from pydantic import AliasChoices, BaseModel, ConfigDict, Field
from pydantic_settings import (BaseSettings, JsonConfigSettingsSource, PydanticBaseSettingsSource,
                               SettingsConfigDict, TomlConfigSettingsSource)

SETTINGS_FILE_ENV = "GPUALLOC_SETTINGS"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PoolDefaults(_Frozen):
    """The contract's defaults for the pool fields a scenario or `pool.configured` may omit."""

    horizon: int = 24
    step_minutes: int = 60
    time_decay: float = 0.95
    realtime_penalty: float = 8.0
    swap_cap: int = 2


POOL = PoolDefaults()


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


class SolveOptions(_Frozen):
    """How a registered scheduler runs (`gpualloc solve`, `bench`, the agent's hot path)."""

    effort: float = Field(default=0.25, ge=0)  # heuristic: local-search budget (placements, not time)
    full_mode: FullModeOptions = FullModeOptions()


class RollingFullMode(_Frozen):
    """Full mode in the rolling horizon: a solve every `every` steps (0: never) on a snapshot
    holding the `max_jobs` most valuable queued jobs."""

    every: int = Field(ge=0)
    max_jobs: int = Field(default=20, ge=1)
    options: FullModeOptions = FullModeOptions()


class SimulationSettings(_Frozen):
    """`gpualloc simulate`. Full mode every 6 steps with a node limit, so reruns mostly agree
    (the time limit still binds at the root on large windows)."""

    full_mode: RollingFullMode = RollingFullMode(every=6, options=FullModeOptions(time_limit=10.0, node_limit=50))


class AgentSettings(_Frozen):
    """The pool agent (`gpualloc agent`)."""

    policy: str = "full-mode"  # the online policy: hot path (+ full mode), by registered names
    step_seconds: float | None = Field(default=None, gt=0)  # compressed clock; None: the pool's step_minutes
    group_id: str | None = None  # a pool's offsets group (lag monitoring); None: gpualloc-agent-<pool>
    group: str | None = None  # share the pools among the agents of this consumer group (inputs keyed by pool)
    member: str | None = None  # static membership in `group`: a restart under this name keeps its pools
    session_timeout_ms: int = Field(default=10_000, ge=1000)  # until a silent member's pools move on
    hot_path_effort: float = Field(default=0.05, ge=0)  # a pass holds up every arrival of the next poll
    full_mode: RollingFullMode = RollingFullMode(every=1, options=FullModeOptions(time_limit=None))
    full_mode_time_cap: float = Field(default=60.0, gt=0)  # without a time_limit: half a step, at most this
    max_wait_ms: int = Field(default=200, ge=1)  # longest poll: stops and boundaries are noticed within it
    snapshot_every: int = Field(default=50, ge=1)  # transactions between snapshots (and at every commit)
    transaction_timeout_ms: int = Field(default=10_000, ge=1000)  # the broker aborts a dead agent's transaction
    partitions: int = Field(default=1, ge=1)  # for the topics the agent creates (a group's share unit)
    retention_ms: int = Field(default=7 * 24 * 3600 * 1000, ge=-1)  # inputs and ledger: as far back as audits reach
    seen_limit: int = Field(default=200_000, ge=1)  # event ids remembered for de-duplication
    dedup_steps: int = Field(default=24, ge=0)  # ...and kept in snapshots for this many steps
    pending_limit: int = Field(default=10_000, ge=0)  # events held until the pool is configured

    def full_mode_time_limit(self, step_seconds: float) -> float:
        """Seconds a full-mode run may take: its own limit, else half a step up to the cap."""
        limit = self.full_mode.options.time_limit
        return limit if limit is not None else min(self.full_mode_time_cap, step_seconds / 2)


class NodeAgentSettings(_Frozen):
    """The node agent (`gpualloc node-agent`)."""

    resync_depth: int = Field(default=50, ge=1)  # messages read back per commits partition on start
    resync_timeout_s: float = Field(default=30.0, gt=0)
    poll_ms: int = Field(default=200, ge=1)  # how long a stop request can go unnoticed
    fetch_wait_ms: int = Field(default=20, ge=0)  # a fetch waits this long for the agent's next transaction
    partitions_wait_s: float = Field(default=5.0, gt=0)


class Settings(BaseSettings):
    """All operating settings; build it with `load_settings`."""

    model_config = SettingsConfigDict(env_prefix="GPUALLOC_", env_nested_delimiter="__", extra="forbid",
                                      frozen=True)

    bootstrap: str | None = Field(default=None, validation_alias=AliasChoices(
        "bootstrap", "GPUALLOC_BOOTSTRAP", "KAFKA_BOOTSTRAP_SERVERS"))  # Kafka HOST:PORT[,HOST:PORT]
    topic_prefix: str = ""  # in front of every topic name (isolated runs)
    pool: str = "default"  # the pool an agent plans and a node agent serves
    solve: SolveOptions = SolveOptions()
    simulation: SimulationSettings = SimulationSettings()
    agent: AgentSettings = AgentSettings()
    node_agent: NodeAgentSettings = NodeAgentSettings()

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags, then the environment, then the settings file (JSON or TOML)."""
        return (init_settings, env_settings, JsonConfigSettingsSource(settings_cls),
                TomlConfigSettingsSource(settings_cls))


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
        cls = type("Settings", (Settings,), {"model_config": {**Settings.model_config, key: path},
                                             "__doc__": Settings.__doc__})
    try:
        return cls(**dict(flags or {}))
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"{path}: not {'TOML' if path.suffix == '.toml' else 'JSON'} ({e})") from None
