"""The cold forecasts beside published measured figures (benchmarks/measured/points.json): a check
set, never fitted to, whose figures `gpualloc bench forecast` reports against the issue's targets."""

from __future__ import annotations

import pytest

from gpualloc.benchmarks.measured_points import (
    RESERVED_OVER_ALLOCATED,
    Checked,
    Point,
    check_all,
    contract_peak_gib,
    figures,
    load_points,
    summary,
    table,
)
from gpualloc.forecasting.hardware import GIB
from gpualloc.forecasting.physics import MEASURED

# A broken formula (a unit, a factor of the model's size) is off by far more than any stack's
# difference from the one the physics models: a memory forecast beyond these factors of a published
# peak, or a time beyond them of a published time, says the arithmetic is wrong, not imprecise
BROKEN = (0.2, 6.0)


@pytest.fixture(scope="module")
def checked():
    return check_all()


def test_every_point_names_its_source_what_it_measures_and_its_configuration() -> None:
    points = load_points()
    assert len({p.id for p in points}) == len(points) >= 100
    assert {p.measure for p in points} == {"peak_gb", "fits", "oom", "hours"}
    assert all(p.url.startswith("https://") and p.source for p in points)
    assert sum(p.quote is not None for p in points) >= 100
    quantization = [p for p in points if p.kind == "quantization"]
    timed = {p.features["algorithm"] for p in quantization if p.measure == "hours"}
    assert sum(p.tokens_per_s is not None for p in points) >= 20  # training throughputs, one GPU and sharded
    assert len([p for p in quantization if p.measure == "hours"]) >= 6 and {"awq", "gptq", "autoround"} <= timed
    assert len([p for p in quantization if p.measure == "peak_gb"]) >= 6  # time and memory


def point(**fields) -> Point:
    base = {"id": "p", "source": "s", "url": "https://x", "measure": "peak_gb", "value": 10.0, "gpus": 1}
    return Point.model_validate(
        {**base, "gpu_type": "a100-80gb", "kind": "training", "features": {}, "assumed": {}, **fields}
    )


def test_a_published_figure_becomes_the_contracts_peak_by_what_it_measures() -> None:
    context = MEASURED.context_gib
    assert contract_peak_gib(point(unit="GiB", measured_as="reserved")) == pytest.approx(10 + context)
    allocated = contract_peak_gib(point(unit="GB", measured_as="allocated"))
    assert allocated == pytest.approx(10e9 / GIB * RESERVED_OVER_ALLOCATED + context)
    assert contract_peak_gib(point(unit="GiB", measured_as="nvidia_smi")) == 10.0
    assert contract_peak_gib(point(unit="GB", measured_as="unspecified")) == pytest.approx(10e9 / GIB)


def test_the_figures_count_what_a_plan_is_hurt_by() -> None:
    peak = point(unit="GiB", measured_as="nvidia_smi", gpus=2)
    rows = [
        Checked(peak, 10.0, 8.5, 2),  # need 15% under
        Checked(peak, 10.0, 13.0, 8),  # 30% over, and more than twice its GPUs
        Checked(point(measure="oom", value=80.0), 90.0, 90.0, 1),  # started where it ran out
        Checked(point(measure="hours", value=2.0, unit="hours", measured_as="wall"), 5.0, 5.0, 1),
        Checked(point(tokens_per_s=1000.0), 10.0, 10.0, 1, tokens_per_s=1500.0),  # a throughput within 2x
    ]
    f = figures(rows)
    assert (f["need_under_10"], f["need_over_25"]) == (pytest.approx(1 / 3), pytest.approx(1 / 3))
    assert f["memory_median_error"] == 0.0 and f["ran_refused_or_doubled"] == ["p"]
    assert f["oom_started"] == ["p"] and (f["times"], f["times_within_2x"]) == (2, 1)
    assert f["time_median_error"] == pytest.approx((1.5 + 0.5) / 2)


def test_no_forecast_of_a_tools_own_figure_is_off_by_a_broken_formula(checked) -> None:
    """Reports (an issue, a model card) leave settings open that move a figure further."""
    low, high = BROKEN
    ratios = {c.point.id: c.ratio for c in checked if c.ratio is not None and c.point.authority == "primary"}
    assert ratios and all(low <= r <= high for r in ratios.values()), {
        k: r for k, r in ratios.items() if not low <= r <= high
    }


def test_the_table_names_every_point_each_group_and_those_sized_under(checked) -> None:
    text = table(checked)
    assert all(c.point.id in text for c in checked)
    assert all(name in text for name in summary(checked))
    under = [c.point.id for c in checked if not c.covered]
    assert text.splitlines()[-1].endswith(", ".join(under) or "none")
