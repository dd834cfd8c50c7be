"""`gpualloc bench sizing`: what sizing one arrival given by its features costs on a pool of the
contract's largest size (4,096 GPUs): the forecasters choose its count among every power of two up
to the pool, so the physics is asked at each. A cold pool's forecasters size a fixed mix (full
fine-tuning sharded with ZeRO-3 at 70B, 180B and 405B, a LoRA 8B, a GPTQ 70B), each sample the
mean of `batch` rounds of the mix; the figure is the median and the least sample, per arrival.

The jobs use only the feature fields every release since the physics' second version reads, so
the same file measures an older checkout (run it there as `python -m gpualloc.benchmarks.sizing_bench`)
and the two figures give the ratio.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

from gpualloc.forecasting.forecasters import Forecasters
from gpualloc.forecasting.job_forecast import Hardware
from gpualloc.schemas.features import QuantizationFeatures, TrainingFeatures

POOL_GPUS = 4096


def _mix() -> list[tuple[str, TrainingFeatures | QuantizationFeatures]]:
    full: dict[str, Any] = {
        "variant": "full",
        "layers": 80,
        "hidden_size": 8192,
        "seq_len": 4096,
        "dataset_tokens_m": 1000.0,
    }
    full |= {"epochs": 1.0, "global_batch": 1024, "micro_batch": 1, "zero_stage": 3, "gradient_checkpointing": True}
    lora: dict[str, Any] = {"variant": "lora", "params_b": 8, "layers": 32, "hidden_size": 4096, "seq_len": 2048}
    lora |= {"dataset_tokens_m": 10.0, "epochs": 1.0, "global_batch": 64, "micro_batch": 4}
    jobs: list[tuple[str, TrainingFeatures | QuantizationFeatures]] = [
        ("training", TrainingFeatures.model_validate({**full, "params_b": p})) for p in (70, 180, 405)
    ]
    jobs.append(("training", TrainingFeatures.model_validate(lora)))
    jobs.append(("quantization", QuantizationFeatures(params_b=70, algorithm="gptq", bits=4)))
    return jobs


@dataclass(frozen=True)
class SizingResult:
    gpus: int
    jobs: int
    samples: int
    p50_ms: float  # per arrival
    least_ms: float
    counts: list[int]  # the count each job of the mix was given

    def line(self) -> str:
        return (
            f"sizing one arrival on {self.gpus} GPUs ({self.jobs} jobs, {self.samples} samples): "
            f"p50 {self.p50_ms:.3f} ms, least {self.least_ms:.3f} ms; counts {self.counts}"
        )

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def measure_sizing(samples: int = 25, batch: int = 20, gpus: int = POOL_GPUS) -> SizingResult:
    hw = Hardware("h100-80gb", 80.0, gpus, 5, nominal=True)
    jobs = _mix()
    forecasters = Forecasters()
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        for _ in range(batch):
            for kind, f in jobs:
                forecasters.size(kind, f, hw, None, None)
        times.append((time.perf_counter() - start) / (batch * len(jobs)) * 1e3)
    counts = [forecasters.size(kind, f, hw, None, None).gpus for kind, f in jobs]
    return SizingResult(gpus, len(jobs), samples, statistics.median(times), min(times), counts)


if __name__ == "__main__":
    print(measure_sizing().line())
