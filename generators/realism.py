"""How real the ground-truth generators are: each generator's memory and time model set beside the
fine-tuning runs measured on one H200 (benchmarks/real/*.jsonl, docs/ground-truth.md "Realism").

For every run that completed, the run's configuration is mapped to the generator's own inputs
(its features, and where the generator keeps a catalogue of model shapes, the run's shape in that
form), on one GPU of type ``h200-141gb``, and the generator's noise-free model is evaluated:

- memory: the generator's per-GPU peak (GB, 1e9 bytes) against what the run needed on the GPU,
  ``peak_reserved_gib`` plus the CUDA context (``cuda_context_gib``, else 0.60 GiB);
- time: tokens a second, the generator's against the run's ``micro_batch x seq_len /
  step_seconds`` (DPO counts both sequences of a pair). The generator's is the steady rate of its
  duration model: the tokens of a data set over the seconds it adds (start-up, loading,
  checkpoints and evaluation, which do not grow with the data, cancel out).

The error factor of a prediction f of a truth t is max(f / t, t / f) - 1. Pure apart from
`load_runs` (which reads the files) and `main` (``python -m gpualloc.generators.realism``
prints the table). Imports the generators and the contract, never the forecasters.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpualloc import benchmarks
from gpualloc.generators import synthetic_jobs, truth_catalogue, truth_heldout
from gpualloc.schemas.features import TrainingFeatures

GIB = 1024.0**3
GB = 1e9
CONTEXT_GIB = 0.60  # the CUDA context when a run does not record its own
GPU_TYPE = "h200-141gb"
RUNS_DIR = benchmarks.DATA_DIR / "real"
RUN_FILES = ("h200-runs.jsonl", "gpualloc-h200-runs.jsonl")
DATA_TOKENS_M = (100.0, 200.0)  # two data sets: the rate is their difference over the seconds' difference
UNDER = 0.10  # a prediction "under" by more than this share of the truth


@dataclass(frozen=True)
class Run:
    """A real run: its configuration and what it measured."""

    model: str
    variant: str
    precision: str
    optimizer: str
    seq_len: int
    micro_batch: int
    gradient_checkpointing: bool
    flash_attention: bool
    lora_rank: int | None
    lora_targets: str | None
    reference_model: bool
    params_b: float
    layers: int
    hidden_size: int
    intermediate_size: int
    attention_heads: int
    kv_heads: int
    vocab_size: int
    tied_embeddings: bool
    need_gb: float  # reserved + CUDA context, GB
    tokens_per_s: float  # both sequences for DPO

    @staticmethod
    def of(raw: dict[str, Any]) -> Run:
        context = float(raw.get("cuda_context_gib") or CONTEXT_GIB)
        sequences = 2 if raw["variant"] == "dpo" else 1
        return Run(
            model=str(raw["model"]),
            variant=str(raw["variant"]),
            precision=str(raw["precision"]),
            optimizer=str(raw["optimizer"]),
            seq_len=int(raw["seq_len"]),
            micro_batch=int(raw["micro_batch"]),
            gradient_checkpointing=bool(raw["gradient_checkpointing"]),
            flash_attention=bool(raw.get("flash_attention", True)),
            lora_rank=raw.get("lora_rank"),
            lora_targets=raw.get("lora_targets"),
            reference_model=bool(raw.get("reference_model", raw["variant"] == "dpo")),
            params_b=float(raw["params_b"]),
            layers=int(raw["layers"]),
            hidden_size=int(raw["hidden_size"]),
            intermediate_size=int(raw["intermediate_size"]),
            attention_heads=int(raw["attention_heads"]),
            kv_heads=int(raw["kv_heads"]),
            vocab_size=int(raw["vocab_size"]),
            tied_embeddings=bool(raw.get("tied_embeddings", False)),
            need_gb=(float(raw["peak_reserved_gib"]) + context) * GIB / GB,
            tokens_per_s=sequences * int(raw["micro_batch"]) * int(raw["seq_len"]) / float(raw["step_seconds"]),
        )


def parse_runs(lines: Iterable[str]) -> list[Run]:
    """The runs that completed (an out-of-memory run measured no peak), in file order."""
    runs = []
    for line in lines:
        if line.strip():
            raw = json.loads(line)
            if raw.get("outcome", "ok") == "ok":
                runs.append(Run.of(raw))
    return runs


def load_runs(directory: Path = RUNS_DIR) -> list[Run]:
    """Every completed run of the real-run files."""
    runs: list[Run] = []
    for name in RUN_FILES:
        runs += parse_runs((directory / name).read_text().splitlines())
    return runs


# ---- the generators, each on a run's configuration ----------------------------------------------


def _features(run: Run, tokens_m: float) -> dict[str, Any]:
    """The run as a job's features (one GPU, one micro-batch a step, one epoch of `tokens_m`)."""
    f: dict[str, Any] = {
        "variant": run.variant,
        "params_b": run.params_b,
        "layers": run.layers,
        "hidden_size": run.hidden_size,
        "seq_len": run.seq_len,
        "dataset_tokens_m": tokens_m,
        "epochs": 1.0,
        "global_batch": run.micro_batch,
        "micro_batch": run.micro_batch,
        "precision": run.precision,
        "optimizer": run.optimizer,
        "gradient_checkpointing": run.gradient_checkpointing,
        "flash_attention": run.flash_attention,
        "zero_stage": 0,
        "tensor_parallel": 1,
        "pipeline_parallel": 1,
        "gpu_type": GPU_TYPE,
    }
    if run.lora_rank is not None:
        f["lora_rank"] = run.lora_rank
        f["lora_targets"] = run.lora_targets
    if run.reference_model:
        f["reference_model"] = True
    return f


SHAPE_FIELDS = ("vocab_size", "intermediate_size", "attention_heads", "kv_heads", "tied_embeddings")


def _contract_features(run: Run, tokens_m: float) -> TrainingFeatures:
    """The run as the contract's features, with the model's shape where the contract has its fields."""
    f = _features(run, tokens_m)
    for name in SHAPE_FIELDS:
        if name in TrainingFeatures.model_fields:
            f[name] = getattr(run, name)
    return TrainingFeatures.model_validate(f)


def _rate(seconds: Callable[[float], float]) -> float:
    """Tokens a second of a duration model: the data's tokens over the seconds they add."""
    low, high = DATA_TOKENS_M
    return (high - low) * 1e6 / (seconds(high) - seconds(low))


class Synthetic:
    name = "synthetic"

    @staticmethod
    def memory_gb(run: Run) -> float:
        f = _contract_features(run, DATA_TOKENS_M[0])
        return synthetic_jobs.peak_memory_gb("training", f, GPU_TYPE, 1)

    @staticmethod
    def tokens_per_s(run: Run) -> float:
        def seconds(tokens_m: float) -> float:
            f = _contract_features(run, tokens_m)
            return 3600 * synthetic_jobs.expected_hours("training", f, GPU_TYPE, 1)

        return _rate(seconds)


class Catalogue:
    name = "truth_catalogue"

    @staticmethod
    def model(run: Run) -> truth_catalogue.Model:
        return truth_catalogue.Model(
            run.model,
            run.params_b,
            run.layers,
            run.hidden_size,
            run.attention_heads,
            run.kv_heads,
            run.intermediate_size,
            run.vocab_size,
            1 << 20,
            tied=run.tied_embeddings,
        )

    @staticmethod
    def memory_gb(run: Run) -> float:
        f = _features(run, DATA_TOKENS_M[0])
        gpu = truth_catalogue.GPUS[GPU_TYPE]
        return truth_catalogue.training_peak_gb(f, Catalogue.model(run), gpu, 1)

    @staticmethod
    def tokens_per_s(run: Run) -> float:
        gpu = truth_catalogue.GPUS[GPU_TYPE]
        m = Catalogue.model(run)
        return _rate(lambda tokens_m: truth_catalogue.training_seconds(_features(run, tokens_m), m, gpu, 1, 8))


class Heldout:
    name = "truth_heldout"

    @staticmethod
    def model(run: Run) -> truth_heldout.Model:
        return truth_heldout.Model(
            run.model,
            run.params_b,
            None,
            run.layers,
            run.hidden_size,
            run.attention_heads,
            run.vocab_size,
            run.intermediate_size,
            run.tied_embeddings,
        )

    @staticmethod
    def memory_gb(run: Run) -> float:
        f = _features(run, DATA_TOKENS_M[0])
        return truth_heldout._train_peak_gb(f, Heldout.model(run), truth_heldout.GPUS[GPU_TYPE], 1, 1.0)

    @staticmethod
    def tokens_per_s(run: Run) -> float:
        g = truth_heldout.GPUS[GPU_TYPE]
        pool = next(p for p in truth_heldout.POOLS if p.gpu == GPU_TYPE)
        m = Heldout.model(run)
        return _rate(lambda tokens_m: truth_heldout._train_seconds(_features(run, tokens_m), m, g, pool, 1))


@dataclass(frozen=True)
class Generator:
    name: str
    memory_gb: Callable[[Run], float]
    tokens_per_s: Callable[[Run], float]


GENERATORS: tuple[Generator, ...] = tuple(
    Generator(g.name, g.memory_gb, g.tokens_per_s) for g in (Synthetic, Catalogue, Heldout)
)


# ---- the figures --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Errors:
    """Error factors max(f/t, t/f) - 1 of predictions f against truths t."""

    median: float
    under: float  # share of predictions more than UNDER below the truth
    low: float  # the smallest ratio f / t
    high: float  # the largest ratio f / t

    @staticmethod
    def of(predicted: Sequence[float], truth: Sequence[float]) -> Errors:
        f, t = np.asarray(predicted, dtype=float), np.asarray(truth, dtype=float)
        ratio = f / t
        factor = np.maximum(ratio, 1.0 / ratio) - 1.0
        return Errors(
            float(np.median(factor)),
            float(np.mean(ratio < 1.0 - UNDER)),
            float(ratio.min()),
            float(ratio.max()),
        )


@dataclass(frozen=True)
class Realism:
    generator: str
    runs: int
    memory: Errors
    time: Errors


def realism(generator: Generator, runs: Sequence[Run]) -> Realism:
    memory = Errors.of([generator.memory_gb(r) for r in runs], [r.need_gb for r in runs])
    time = Errors.of([generator.tokens_per_s(r) for r in runs], [r.tokens_per_s for r in runs])
    return Realism(generator.name, len(runs), memory, time)


def table(results: Sequence[Realism]) -> str:
    """The figures as a Markdown table."""
    lines = [
        "| generator | runs | memory: median error | under >10% | ratio range | time: median error | under >10% "
        "| ratio range |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        m, t = r.memory, r.time
        lines.append(
            f"| {r.generator} | {r.runs} | {m.median:.0%} | {m.under:.0%} | {m.low:.2f}-{m.high:.2f} "
            f"| {t.median:.0%} | {t.under:.0%} | {t.low:.2f}-{t.high:.2f} |"
        )
    return "\n".join(lines)


def per_run(generator: Generator, runs: Sequence[Run]) -> str:
    """Each run's predicted / true memory and tokens a second (for looking into a generator)."""
    lines = [f"{generator.name}: run, memory f/t, time f/t"]
    for r in runs:
        m, t = generator.memory_gb(r) / r.need_gb, generator.tokens_per_s(r) / r.tokens_per_s
        config = (
            f"{r.model} {r.variant} {r.precision} {r.optimizer} {r.micro_batch}x{r.seq_len}"
            f"{' gc' if r.gradient_checkpointing else ''}{'' if r.flash_attention else ' eager'}"
            f"{f' r{r.lora_rank} {r.lora_targets}' if r.lora_rank else ''}"
        )
        lines.append(f"  {config:<62} {r.need_gb:6.1f} GB {m:5.2f}  {r.tokens_per_s:8.0f} tok/s {t:5.2f}")
    return "\n".join(lines)


def main(argv: Sequence[str] = ()) -> int:
    runs = load_runs()
    print(table([realism(g, runs) for g in GENERATORS]))
    if "--runs" in argv:
        for g in GENERATORS:
            print(per_run(g, runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
