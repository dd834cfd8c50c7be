"""A pool's forecasters together: what the planner asks (a job's size, an app's demand an hour)
and what it tells them (completions, traffic), with the settings it plans by.

Part of the pool's state: `dump` and `load` carry everything learned, so a snapshot's recovery or
a ledger's replay makes the same forecasts and hence the same decisions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpualloc.forecasting.job_forecast import Hardware, JobForecast, SizeError
from gpualloc.forecasting.jobs import JobForecaster
from gpualloc.forecasting.physics_v1 import GPU_MEMORY_GB
from gpualloc.forecasting.traffic import TrafficForecaster
from gpualloc.schemas.features import Features, Interconnect
from gpualloc.schemas.settings import ForecastSettings


@dataclass
class Forecasters:
    settings: ForecastSettings = ForecastSettings()
    jobs: JobForecaster = field(default_factory=JobForecaster)
    traffic: TrafficForecaster = None  # type: ignore[assignment]  # None only until __post_init__ makes it

    def __post_init__(self) -> None:
        if self.traffic is None:
            self.traffic = TrafficForecaster(self.settings.traffic_weeks, self.settings.traffic_forgetting)
        self.jobs.physics = self.settings.physics

    # the apps whose traffic state this pass copied (`forked`): the rule traffic state keeps is
    # that a pass replaces an app's `AppTraffic` before changing it (`observed`), and nothing else
    # changes one in place but its derived cache, so a failed pass leaves the state it found
    _copied: set[str] = field(default_factory=set, repr=False, compare=False)

    def forked(self) -> None:
        """A pass starts on a fork of the state (`gpualloc.solvers.planner.state`): every app's
        traffic state is shared with the state it was forked from until the pass teaches it."""
        self._copied = set()

    def use(self, settings: ForecastSettings) -> None:
        """Forecast by `settings` from now on (a replay takes up each ledger entry's own)."""
        self.settings = settings
        self.jobs.physics = settings.physics
        self.traffic.weeks, self.traffic.forgetting = settings.traffic_weeks, settings.traffic_forgetting
        for app in self.traffic.apps.values():
            app.cache.clear()

    # ---- jobs ---------------------------------------------------------------------------------
    def size(self, kind: str, f: Features, hw: Hardware, gpus: int | None, duration: int | None) -> JobForecast:
        """The job's GPU count and duration: the given ones, the rest forecast (SizeError when
        no count within `max_pool_share` of the pool's GPUs holds it)."""
        return self.jobs.forecast(
            kind,
            f,
            hw,
            self.settings.quantile(kind),
            self.settings.interval,
            gpus,
            duration,
            self.settings.max_pool_share,
            self.settings.oom_risk,
        )

    def finished(
        self, kind: str, f: Features, hw: Hardware, gpus: int, steps: int, peak_memory_gb: float | None
    ) -> None:
        self.jobs.learn(kind, f, hw, gpus, steps, peak_memory_gb, self.settings.interval)

    def out_of_memory(self, kind: str, f: Features, hw: Hardware, gpus: int) -> None:
        """A job ran out of memory on `gpus` GPUs: it needs more than a GPU holds at that count."""
        self.jobs.learn_out_of_memory(kind, f, hw, gpus)

    # ---- traffic ------------------------------------------------------------------------------
    def observed(self, app_id: str, hour: int, load: float) -> None:
        if app_id not in self._copied:
            self._copied.add(app_id)
            shared = self.traffic.apps.get(app_id)
            if shared is not None:
                self.traffic.apps[app_id] = shared.copy()
        self.traffic.observe(app_id, hour, load)

    def demand(
        self, app_id: str, hour: int, quantile: float | None = None, profile: Sequence[int] | None = None
    ) -> int | None:
        """GPUs app `app_id` needs in pool hour `hour` at `quantile` (the settings' by default;
        None: nothing observed to go by); an hour of day not seen yet takes the registered
        `profile` scaled by the observations' own level (`TrafficForecaster.scaled_profile`)."""
        found = self.demands(app_id, hour, (quantile or self.settings.realtime_quantile,), profile)
        return None if found is None else found[0]

    def demands(
        self, app_id: str, hour: int, quantiles: Sequence[float], profile: Sequence[int] | None = None
    ) -> list[int] | None:
        """`demand` at each of `quantiles`, the model read once."""
        loads = self.traffic.forecasts(app_id, hour, quantiles)
        if loads is None and profile:
            scaled = [self.traffic.scaled_profile(app_id, hour, q, list(profile)) for q in quantiles]
            loads = None if None in scaled else [load for load in scaled if load is not None]
        return None if loads is None else [math.ceil(load - 1e-9) for load in loads]

    # ---- state --------------------------------------------------------------------------------
    def dump(self) -> dict[str, Any]:
        return {"jobs": self.jobs.dump(), "traffic": self.traffic.dump()}

    @classmethod
    def load(cls, data: dict[str, Any], settings: ForecastSettings) -> "Forecasters":
        return cls(
            settings,
            JobForecaster.load(data["jobs"]),
            TrafficForecaster.load(data["traffic"], settings.traffic_weeks, settings.traffic_forgetting),
        )


def pool_hardware(f: Features, pool: Any) -> Hardware:
    """`hardware` on a pool's fields (a `PoolConfig` or a `pool.configured` payload: `gpu_type`,
    `gpu_memory_gb`, `gpus`, `step_minutes`)."""
    return hardware(f, pool.gpu_type, pool.gpu_memory_gb, pool.gpus, pool.step_minutes, pool.interconnect)


def hardware(
    f: Features,
    pool_type: str | None,
    pool_memory_gb: float | None,
    gpus: int,
    step_minutes: int,
    interconnect: Interconnect | None = None,
) -> Hardware:
    """What the job runs on: its own GPU type and memory, else the pool's, else the type's (SizeError
    naming the field when no type is given)."""
    gpu_type = f.gpu_type or pool_type
    if gpu_type is None:
        raise SizeError(
            "features.gpu_type: give it, or the pool's gpu_type in pool.configured, so the job can be sized"
        )
    given = f.gpu_memory_gb or (pool_memory_gb if gpu_type == pool_type else None)
    return Hardware(
        gpu_type, given or GPU_MEMORY_GB[gpu_type], gpus, step_minutes, nominal=given is None, interconnect=interconnect
    )
