"""GPU counts and durations of training and quantization jobs from their features: the physics
baseline (`physics`, `quantization`) times corrections learned online from what finished jobs
really used, pooled by kind and refined by group (`groups`), with intervals and memory margins
from their recent out-of-sample errors.

Two corrections a kind, both ridge regressions (`ridge.OnlineRidge`, rows in `designs`), and a
smaller pair a group (a variant or an algorithm on a GPU type) fitted to what the kind's left:
- memory: the GB a GPU a job's reported peak exceeds the baseline's (over its headroom) by;
- duration: log of the hours a job ran over the baseline's hours at its GPU count.
GPU counts are chosen by risk: the smallest count whose forecast peak, raised to the
`1 - oom_risk` quantile of the group's memory errors (log actual over forecast, at the count the
job ran), stays within the usable share of a GPU: the largest share finished jobs were seen to
peak at (a platform's own fitting rule shows there), all of it before any. Duration
quantiles are the point forecast plus the quantiles of the group's recent errors (its kind's until
it has enough); the interval's tails are moved by adaptive conformal tracking, so its coverage
holds as errors drift. Everything is a deterministic function of what was learned, in order.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Callable

import numpy as np

from gpualloc.forecasting.counts import choose_count
from gpualloc.forecasting.designs import (
    BASELINES,
    PHYSICS,
    PHYSICS_VERSION,
    Baseline,
    architecture,
    group_memory_row,
    memory_row,
)
from gpualloc.forecasting.fixes import changes_that_fit
from gpualloc.forecasting.groups import GroupModel, Refinement, errors_of, taught
from gpualloc.forecasting.hardware import USABLE_GIB
from gpualloc.forecasting.job_forecast import Hardware, JobForecast, SizeError
from gpualloc.forecasting.kind_model import KindModel, fresh_model, group_key, parts_row
from gpualloc.forecasting.ridge import MIN_ERRORS, ErrorWindow
from gpualloc.schemas.features import Features, TrainingFeatures
from gpualloc.schemas.limits import LIMITS
from gpualloc.schemas.settings import ForecastSettings

INTERVAL_RATE = 0.01  # of the interval's tails, a completion inside or outside it
UTILIZATION = 200  # finished jobs' peak shares of a GPU kept
OVERSHOOT = 0.02  # the share of forecasts the borderline tolerance lets overshoot by more than it
OOM_PEAK = 1.05  # of a GPU's memory: the peak an out-of-memory failure is learned as
SANE = 1e4  # the largest magnitude a design value or target of a real job has (a 500 TB memory part)


def _sane(x: np.ndarray, y: float) -> bool:
    return bool(np.all(np.isfinite(x))) and math.isfinite(y) and float(np.max(np.abs(x))) <= SANE and abs(y) <= SANE


def _hours(base: Baseline[Any], f: Features, hw: Hardware, gpus: int) -> float:
    """The baseline's hours on `hw`'s GPU type and links, at least a microsecond's worth (a log of
    them is taken)."""
    return max(base.hours(f, hw.gpu_type, gpus, hw.interconnect), 1e-9)


@dataclass
class JobForecaster:
    models: dict[str, KindModel] = field(default_factory=lambda: {kind: fresh_model(kind) for kind in BASELINES})
    utilization: list[float] = field(default_factory=list)  # finished jobs' peak over their GPU's memory
    physics: int = PHYSICS_VERSION  # the version forecasts are made by (a setting: not part of the state)
    # the most GPUs each configuration (its kind, features and GPU type) ran out of memory at: the
    # same run needs the same memory, so a physics that corrects by parts never sizes it there again
    ran_out: dict[str, int] = field(default_factory=dict)
    # what this pass has copied of the learned models (`forked`): kinds, their groups and their
    # models; a lesson copies what it changes first (`_own`), so the state the pass was forked
    # from keeps its models as they were
    _copied: set[str] = field(default_factory=set, repr=False, compare=False)

    def _base(self, kind: str) -> Baseline[Any]:
        return PHYSICS[self.physics][kind]

    def memory_of(self, hw: Hardware) -> float:
        """GiB a GPU of `hw` holds: what a framework can use of its type, where the physics knows
        it and neither the job nor the pool said otherwise."""
        return USABLE_GIB[hw.gpu_type] if hw.nominal and self.physics >= 2 else hw.memory_gb

    def forked(self) -> None:
        """A pass starts on a fork of the state (`gpualloc.solvers.planner.state`): every model is
        shared with the state it was forked from until the pass teaches it."""
        self._copied = set()

    def _own(self, kind: str, f: Features, gpu_type: str) -> None:
        """Copy what a lesson of this job changes, at its first change in a pass: the kind's pooled
        parts and the lists of its groups and models, then the job's group and model."""
        model = self.models[kind]
        if kind not in self._copied:
            self._copied.add(kind)
            model = self.models[kind] = dataclasses.replace(
                model,
                memory=copy.deepcopy(model.memory),
                duration=copy.deepcopy(model.duration),
                errors=ErrorWindow(model.errors.size, list(model.errors.errors), model.errors.prior),
                memory_errors=ErrorWindow(
                    model.memory_errors.size, list(model.memory_errors.errors), model.memory_errors.prior
                ),
                groups=dict(model.groups),
                architectures=dict(model.architectures),
                parts=copy.deepcopy(model.parts),
            )
        key, name = group_key(f, gpu_type), architecture(kind, f)
        if f"{kind}:group:{key}" not in self._copied:
            self._copied.add(f"{kind}:group:{key}")
            if key in model.groups:
                model.groups[key] = copy.deepcopy(model.groups[key])
        if f"{kind}:model:{name}" not in self._copied:
            self._copied.add(f"{kind}:model:{name}")
            if name in model.architectures:
                model.architectures[name] = copy.deepcopy(model.architectures[name])

    def forecast(
        self,
        kind: str,
        f: Features,
        hw: Hardware,
        quantile: float,
        coverage: float,
        gpus: int | None = None,
        duration: int | None = None,
        share: float = ForecastSettings().max_pool_share,
        risk: float = ForecastSettings().oom_risk,
    ) -> JobForecast:
        """The job's GPUs (given, else forecast within `share` of the pool at `risk` of running
        out of memory) and duration (given, else the `quantile`)."""
        model = self.models[kind]
        group = self._levels(kind, f, hw.gpu_type)[0]
        n = gpus if gpus is not None else self._count(kind, f, hw, share, risk)
        centre = self._centre(kind, f, hw, n)
        errors = errors_of(group, model.errors)

        def at(p: float) -> float:  # pool steps at quantile p
            return math.exp(centre + errors.quantile(p))

        tail = _tail(coverage, model.shift)
        planned = duration if duration is not None else min(LIMITS.duration, max(1, math.ceil(at(quantile) - 1e-9)))
        made = tuple(name for name, given in (("gpus", gpus), ("duration", duration)) if given is None)
        peak = self._peak(kind, f, hw.gpu_type, n)
        if self._base(kind).headroom >= 1.0:  # a need, not an accounting under headroom: what was sized for
            peak *= self._margin(kind, f, hw.gpu_type, risk)
        return JobForecast(
            n,
            planned,
            at(0.5),
            at(tail),
            at(1.0 - tail),
            coverage,
            quantile,
            made,
            peak,
        )

    def median_peak(self, kind: str, f: Features, gpu_type: str, gpus: int) -> float:
        """The median forecast peak a GPU at `gpus` (GiB), before the margin a count is sized with."""
        return self._peak(kind, f, gpu_type, gpus)

    def learn(
        self,
        kind: str,
        f: Features,
        hw: Hardware,
        gpus: int,
        steps: int,
        peak_memory_gb: float | None = None,
        coverage: float = ForecastSettings().interval,
    ) -> None:
        """A finished job ran `steps` pool steps on `gpus` GPUs (peaking at `peak_memory_gb` a GPU).
        Each level learns what the levels above it left, and the errors are taken, before any
        learns from it; a job beyond anything a GPU holds (`_sane`) teaches nothing: one such
        example would outweigh every real one."""
        self._own(kind, f, hw.gpu_type)
        model, base = self.models[kind], self._base(kind)
        group, arch = self._levels(kind, f, hw.gpu_type, teach=True)
        assert group is not None and arch is not None
        hours, memory = _hours(base, f, hw, gpus), base.memory(f, gpus)
        x = np.array(base.design(f, hw.gpu_type, gpus, hours, memory))
        y = math.log(steps * hw.step_minutes / 60.0 / hours)
        if _sane(x, y):
            error = y - model.duration.predict(x) - group.duration.value(model.duration)
            errors = errors_of(group, model.errors)
            tail = _tail(coverage, model.shift)
            outside = not errors.quantile(tail) <= error <= errors.quantile(1 - tail)
            model.shift += INTERVAL_RATE * ((1.0 if outside else 0.0) - (1.0 - coverage))
            model.errors.add(error)
            group.errors.add(error)
            group.duration.learn(x, y)
            model.duration.learn(x, y)
        if peak_memory_gb is not None and peak_memory_gb > 0:
            self._learn_peak(kind, f, hw, gpus, peak_memory_gb, group, arch)
            self.utilization = (self.utilization + [peak_memory_gb / self.memory_of(hw)])[-UTILIZATION:]

    def _learn_peak(
        self, kind: str, f: Features, hw: Hardware, gpus: int, peak: float, group: GroupModel, arch: Refinement
    ) -> None:
        """Each level's memory correction learns the job's `peak` at `gpus` (errors first)."""
        model = self.models[kind]
        base = self._base(kind)
        accounted = base.memory(f, gpus) / base.headroom
        pooled_level = model.parts if base.by_parts else model.memory
        row = parts_row(base, f, gpus) if base.by_parts else memory_row(kind, f, hw.gpu_type, gpus, accounted, base)
        xm = group_memory_row(kind, f, gpus, base)
        target = peak - accounted
        if not (_sane(row, target) and _sane(xm, target)):
            return
        pooled = pooled_level.predict(row)
        own, extra = group.memory.ridge.predict(xm), arch.ridge.predict(xm)
        alone, grouped, both = (accounted + pooled, accounted + pooled + own, accounted + pooled + own + extra)
        used = accounted + pooled + group.memory.value(xm) + arch.value(xm)
        if min(alone, grouped, both, used) > 0:
            error = math.log(peak / used)
            model.memory_errors.add(error)
            group.memory_errors.add(error)
            group.memory.gain += math.log(peak / alone) ** 2 - math.log(peak / grouped) ** 2
            arch.gain += math.log(peak / grouped) ** 2 - math.log(peak / both) ** 2
        arch.ridge.learn(xm, target - pooled - own)
        group.memory.ridge.learn(xm, target - pooled)
        pooled_level.learn(row, target)

    def learn_out_of_memory(self, kind: str, f: Features, hw: Hardware, gpus: int) -> None:
        """A job's peak at `gpus` GPUs passed the GPU's memory: learned as a peak of OOM_PEAK of
        it (a lower bound taken as the value, so the count it is sized at next time grows). A physics
        that corrects its parts learns it only where it forecast less: a bound the forecast already
        passes says nothing of how far past it the job was, and taken as the value it would teach
        every part to shrink."""
        bound = OOM_PEAK * self.memory_of(hw)
        self._own(kind, f, hw.gpu_type)
        key = _configuration(kind, f, hw.gpu_type)
        most = max(gpus, self.ran_out.pop(key, 0))  # re-inserted: the most recent last
        self.ran_out[key] = most
        while len(self.ran_out) > RAN_OUT:
            del self.ran_out[next(iter(self.ran_out))]
        if self._base(kind).by_parts and self._peak(kind, f, hw.gpu_type, gpus) >= bound:
            return
        group, arch = self._levels(kind, f, hw.gpu_type, teach=True)
        assert group is not None and arch is not None
        self._learn_peak(kind, f, hw, gpus, bound, group, arch)

    def _levels(
        self, kind: str, f: Features, gpu_type: str, teach: bool = False
    ) -> tuple[GroupModel | None, Refinement | None]:
        """The job's group and its model's memory correction (made, when `teach`, if new)."""
        model = self.models[kind]
        key, name = group_key(f, gpu_type), architecture(kind, f)
        if not teach:
            return model.groups.get(key), model.architectures.get(name)
        dims = len(group_memory_row(kind, f, 1))
        group = model.groups.setdefault(key, GroupModel.fresh(dims))
        return group, taught(model.architectures, name, dims)

    def usable(self) -> float:
        """The share of a GPU's memory a job may peak at: the most finished jobs were seen to (all
        of it before any is seen: the baseline's own headroom is in the forecast peak then)."""
        if len(self.utilization) < MIN_ERRORS:
            return 1.0
        return min(1.0, max(self.utilization))

    def _centre(self, kind: str, f: Features, hw: Hardware, n: int) -> float:
        """Log pool steps the job runs at `n` GPUs, by its kind's and its group's corrections."""
        model, base = self.models[kind], self._base(kind)
        hours = _hours(base, f, hw, n)
        x = np.array(base.design(f, hw.gpu_type, n, hours, base.memory(f, n)))
        group = self._levels(kind, f, hw.gpu_type)[0]
        own = group.duration.value(model.duration) if group else 0.0
        return math.log(hours * 60.0 / hw.step_minutes) + model.duration.predict(x) + own

    def _peak(self, kind: str, f: Features, gpu_type: str, n: int) -> float:
        """Forecast peak GB a GPU at `n` GPUs (the baseline over its headroom, corrected)."""
        model, base = self.models[kind], self._base(kind)
        accounted = base.memory(f, n) / base.headroom
        xm = group_memory_row(kind, f, n, base)
        group, arch = self._levels(kind, f, gpu_type)
        own = (group.memory.value(xm) if group else 0.0) + (arch.value(xm) if arch else 0.0)
        if base.by_parts:
            return accounted + model.parts.predict(parts_row(base, f, n)) + own
        return accounted + model.memory.predict(memory_row(kind, f, gpu_type, n, accounted, base)) + own

    def _window(self, kind: str, f: Features, gpu_type: str) -> ErrorWindow:
        """The memory errors a job's forecast is judged by: its group's once it has enough, else its
        kind's, and the physics' measured spread before either has."""
        model = self.models[kind]
        window = errors_of(model.groups.get(group_key(f, gpu_type)), model.memory_errors, memory=True)
        return dataclasses.replace(window, prior=self._base(kind).prior)

    def _margin(self, kind: str, f: Features, gpu_type: str, risk: float) -> float:
        """The factor over a forecast peak that a run needs more than with chance `risk`: from the
        errors of the job's group (its kind's until it has enough), the physics' measured spread
        before any is known. A model no completion has taught is never given less than that
        spread: the errors of models seen say how well they are known, not a new one."""
        model, base = self.models[kind], self._base(kind)
        seen = self._window(kind, f, gpu_type).quantile(1 - risk)
        if base.prior <= 0 or architecture(kind, f) in model.architectures:
            return math.exp(seen)
        return math.exp(max(seen, base.prior * NormalDist().inv_cdf(1 - risk)))

    def _count(self, kind: str, f: Features, hw: Hardware, share: float, risk: float) -> int:
        """`choose_count` over the powers of two from the layout's floor to the pool's size, by risk
        first, then by the forecast peak alone, then by the baseline alone. A job these show
        fitting gets its count, the whole pool if it must; but one the forecast peak alone fits
        within `share` of the pool, and only the risk's margin takes further, gets that share (a
        forecast error must not give one job the pool). A borderline one (over a GPU at every
        count, but within the tolerance: for a physics that corrects by parts, where its memory
        errors give it at least `risk`'s chance of fitting; else the physics' own allowance, or
        wider where the forecasts have overshot by more in the past) gets at most `share` of the pool (the layout's floor always
        allowed), so no forecast error gives one job the pool: should it run out of memory
        there, it is re-queued at the next count. Only a job no count comes near is refused."""
        model, base = self.models[kind], self._base(kind)
        floor, memory = base.smallest(f), self.memory_of(hw)
        if floor > hw.max_gpus:
            raise SizeError(
                f"features.tensor_parallel, features.pipeline_parallel: the layout needs {floor} GPUs, "
                f"more than {hw.room()}"
            )
        cap = max(floor, 1 << int(math.log2(max(1.0, share * hw.max_gpus))))
        counts = [floor << i for i in range(int(math.log2(hw.max_gpus // floor)) + 1)]
        if base.by_parts:
            failed = self.ran_out.get(_configuration(kind, f, hw.gpu_type), 0)
            counts = [n for n in counts if n > failed]
            if not counts:
                raise SizeError(
                    f"features: the job ran out of memory at {failed} GPUs, and no larger count fits in {hw.room()}"
                )
            floor, cap = counts[0], max(cap, counts[0])
        peaks: dict[int, float] = {}

        def peak(n: int) -> float:
            if n not in peaks:
                peaks[n] = self._peak(kind, f, hw.gpu_type, n)
            return peaks[n]

        margin = self._margin(kind, f, hw.gpu_type, risk)
        usable = self.usable() * memory
        rules: tuple[Callable[[int], bool], ...] = (
            lambda n: peak(n) * margin <= usable,
            lambda n: peak(n) <= memory,
        )
        if not base.by_parts:  # under headroom, the baseline alone fitting is a third sign it fits
            rules += (lambda n: base.memory(f, n) <= memory * base.headroom,)
        if base.by_parts:  # tried over the GPU only where its errors give it `risk`'s chance of fitting
            tolerance = max(0.0, math.exp(-self._window(kind, f, hw.gpu_type).quantile(risk)) - 1)
        else:  # the physics' own allowance, or how far forecasts have overshot
            over = model.memory_errors.errors
            seen = math.exp(-float(np.quantile(over, OVERSHOOT))) - 1 if len(over) >= MIN_ERRORS else 0.0
            tolerance = max(base.tolerance, seen)
        chosen = choose_count(counts, peak, rules, memory, tolerance)
        if chosen is None and base.by_parts:  # corrections say over, the physics alone fits: a borderline try
            chosen = next(((n, False) for n in counts if base.memory(f, n) <= memory), None)
        if chosen is None:
            least, at = min((peak(n), n) for n in counts)
            fix = None
            if isinstance(f, TrainingFeatures) and self.physics >= 3:  # older versions' reasons replay as written
                fix = changes_that_fit(f, base.memory, counts, memory)
            raise SizeError(
                f"features: no count of {hw.room()} holds the job (it needs about "
                f"{least:.0f} GB a GPU at best, at {at}; a {hw.gpu_type} has {memory:g} GB)"
                + (f"; it would fit with {fix}" if fix else "")
            )
        n, fits = chosen
        if n > cap and fits and any(peak(c) <= usable for c in counts if c <= cap):
            return cap  # the margin alone takes it past the share: as safe as the share allows
        return n if fits else min(n, cap)

    def dump(self) -> dict[str, Any]:
        kinds = {kind: model.dump() for kind, model in self.models.items()}
        return {"kinds": kinds, "utilization": self.utilization, "ran_out": list(self.ran_out.items())}

    @classmethod
    def load(cls, data: dict[str, Any]) -> "JobForecaster":
        kinds = data.get("kinds", data)  # a state of the kinds alone (no utilization kept) loads too
        ran_out = {str(k): int(n) for k, n in data.get("ran_out", [])}
        return cls(
            {kind: KindModel.load(m, kind) for kind, m in kinds.items()},
            list(data.get("utilization", [])),
            ran_out=ran_out,
        )


RAN_OUT = 1024  # configurations whose out-of-memory counts are kept (the least recent dropped first)


def _configuration(kind: str, f: Features, gpu_type: str) -> str:
    """A run's configuration: what decides its memory (its features less the data's size), as a
    digest: 64 characters a configuration whatever its features, so RAN_OUT of them stay small in
    a snapshot."""
    text = f"{kind}/{gpu_type}/{f.model_dump_json(exclude={'dataset_tokens_m', 'epochs'})}"
    return hashlib.sha256(text.encode()).hexdigest()


def _tail(coverage: float, shift: float) -> float:
    """The interval's lower tail: half of what it leaves out, less the tracked shift."""
    return min(0.49, max(0.001, (1.0 - coverage) / 2 - shift))
