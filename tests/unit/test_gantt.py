"""SVG Gantt charts: well-formed, deterministic, one panel per plan, coloured by kind."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from support.builders import app, batch, grid, make

from gpualloc import benchmarks
from gpualloc.agent.renderers.gantt import KIND_HUES, Rect, grid_rects, job_colours, render_gantt, write_gantt
from gpualloc.schemas import Scenario
from gpualloc.solvers import compile_scenario, solve

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def mixed_control():
    path = benchmarks.scenario_dir() / "mixed_control.json"
    sc = Scenario.model_validate_json(path.read_text())
    problem = compile_scenario(sc)
    return sc, [solve(problem, "fifo"), solve(problem, "heuristic")]


def test_svg_is_well_formed_with_two_titled_panels(mixed_control):
    sc, plans = mixed_control
    root = ET.fromstring(render_gantt(sc, plans))
    assert root.tag == f"{SVG}svg"
    panels = [g for g in root.iter(f"{SVG}g") if g.get("class") == "panel"]
    assert [p.get("data-scheduler") for p in panels] == ["fifo", "heuristic"]
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    for plan in plans:
        assert f"utilization {plan.metrics.utilization:.1%}" in " ".join(texts)
        assert f"value {plan.metrics.value:.1f}" in " ".join(texts)
    assert {"FIFO", "Heuristic", "training", "batch inference", "quantization", "real-time", "idle"} <= set(texts)


def test_output_is_deterministic(mixed_control, tmp_path):
    sc, plans = mixed_control
    a = write_gantt(tmp_path / "a.svg", sc, plans).read_text()
    b = write_gantt(tmp_path / "b.svg", sc, plans).read_text()
    assert a == b == render_gantt(sc, plans)


def test_every_busy_cell_is_drawn_once(mixed_control):
    _, plans = mixed_control
    for plan in plans:
        rects = grid_rects(plan.grid)
        covered = [(g, t) for r in rects for g in range(r.g0, r.g1) for t in range(r.t0, r.t1)]
        busy = [(g, t) for g, row in enumerate(plan.grid) for t, c in enumerate(row) if c is not None]
        assert sorted(covered) == sorted(busy)
        assert all(plan.grid[g][t] == r.job for r in rects for g in range(r.g0, r.g1) for t in range(r.t0, r.t1))


def test_batch_rectangles_merge_into_one_block():
    assert grid_rects(grid("aab", "aab", "r.b")) == [
        Rect("a", 0, 2, 0, 2),
        Rect("b", 0, 3, 2, 3),
        Rect("r", 2, 3, 0, 1),
    ]


def test_colours_share_a_hue_per_kind_and_differ_per_job():
    sc, _ = make(
        4,
        2,
        [
            batch("t1", 1, 1),
            batch("t2", 1, 1),
            batch("q", 1, 1, kind="quantization"),
            batch("i", 1, 1, kind="batch_inference"),
            app("r", [1, 1]),
        ],
    )
    colours = {job: fill for job, (fill, _) in job_colours(sc).items()}
    hue = {job: int(re.match(r"hsl\((\d+),", fill).group(1)) for job, fill in colours.items()}
    assert hue == {
        "t1": KIND_HUES["training"],
        "t2": KIND_HUES["training"],
        "q": KIND_HUES["quantization"],
        "i": KIND_HUES["batch_inference"],
        "r": KIND_HUES["realtime"],
    }
    assert colours["t1"] != colours["t2"]


def test_labels_only_where_there_is_room():
    sc, problem = make(2, 24, [batch("long-job", 1, 24), batch("x", 1, 1), batch("tiny-but-long-name", 1, 1)])
    plan = solve(problem, "heuristic")
    labels = {"".join(t.itertext()) for t in ET.fromstring(render_gantt(sc, [plan])).iter(f"{SVG}text")}
    assert "long-job" in labels and "x" in labels
    assert "tiny-but-long-name" not in labels


def test_job_ids_are_escaped():
    sc, problem = make(2, 2, [batch("<a&b>", 1, 2)])
    svg = render_gantt(sc, [solve(problem, "fifo")])
    ET.fromstring(svg)
    assert "&lt;a&amp;b&gt;" in svg
