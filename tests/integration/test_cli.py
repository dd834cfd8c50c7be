"""The gpualloc CLI: exit codes 0 (ok), 1 (illegal plan), 2 (bad input, no traceback)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest
from support.builders import ROOT
from test_milp import need

from gpualloc import benchmarks
from gpualloc.agent.cli import build_parser, main
from gpualloc.agent.loading import parse_plan
from gpualloc.solvers.policies.milp.backends import MIN_SEARCH_S

MIXED = str(benchmarks.scenario_dir() / "mixed_control.json")


def run(*args: str) -> subprocess.CompletedProcess:
    """The CLI in a fresh interpreter, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "gpualloc", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def heuristic_plan(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("plans") / "plan.json"
    assert main(["solve", MIXED, "--scheduler", "heuristic", "--out", str(out)]) == 0
    return str(out)


def test_solve_prints_the_contract_plan():
    proc = run("solve", MIXED, "--scheduler", "fifo")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert list(data)[:3] == ["scenario", "scheduler", "grid"]
    assert (data["scenario"], data["scheduler"]) == ("mixed_control", "fifo")
    assert len(data["grid"]) == 8 and all(len(row) == 24 for row in data["grid"])
    assert set(data["metrics"]) >= {
        "utilization",
        "value",
        "objective",
        "realtime_shortfall",
        "completed",
        "scheduled",
        "unscheduled",
    }
    assert data["solve_ms"] > 0


def test_solve_writes_a_plan_file(heuristic_plan):
    plan = parse_plan(open(heuristic_plan).read())
    assert plan.scheduler == "heuristic" and plan.metrics.value > 0


def test_check_legal_plan(heuristic_plan, capsys):
    assert main(["check", MIXED, heuristic_plan]) == 0
    assert capsys.readouterr().out.strip() == "legal"


def test_check_illegal_plan_lists_rules(heuristic_plan, tmp_path):
    data = json.loads(open(heuristic_plan).read())
    cells = [(g, t) for g, row in enumerate(data["grid"]) for t, c in enumerate(row) if c == "train-1"]
    g, t = cells[0]
    data["grid"][g][t] = None  # a hole in train-1's rectangle: R2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    proc = run("check", MIXED, str(bad))
    assert proc.returncode == 1
    lines = proc.stdout.strip().splitlines()
    assert lines and all(line.startswith("R") for line in lines)
    assert any(line.startswith("R2 job train-1") for line in lines)
    assert "Traceback" not in proc.stderr


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.slow
def test_bad_input_exits_2_naming_the_field(tmp_path, heuristic_plan):
    scenario = json.loads(open(MIXED).read())
    scenario["jobs"][3]["gpus"] = 3
    cases = [
        (("solve", str(tmp_path / "missing.json")), "file not found"),
        (("solve", str(tmp_path)), "is a directory"),
        (("solve", write(tmp_path, "broken.json", '{"name": "x", ')), "Invalid JSON"),
        (("solve", write(tmp_path, "list.json", "[1, 2]")), "(document)"),
        (
            ("solve", write(tmp_path, "schema.json", json.dumps(scenario))),
            "jobs[3] (id 'train-1').gpus: must be a power of two",
        ),
        (("check", MIXED, write(tmp_path, "notplan.json", '{"scenario": "x"}')), "scheduler: Field required"),
        (
            ("check", MIXED, write(tmp_path, "sched.json", '{"scenario": "x", "scheduler": "magic", "grid": []}')),
            "scheduler: Input should be",
        ),
        (
            ("check", MIXED, write(tmp_path, "shape.json", '{"scenario": "x", "scheduler": "fifo", "grid": [[null]]}')),
            "grid: must have gpus=8 rows",
        ),
        (("check", MIXED, MIXED), "grid: Field required"),
        (
            ("generate", "--gpus", "12", "--jobs", "4", "--seed", "1", "--gpus-per-node", "5"),
            "gpus_per_node must divide gpus",
        ),
        (("solve", MIXED, "--scheduler", "quantum"), "invalid choice"),
        (("bench", str(tmp_path / "nope")), "not a folder"),
    ]
    for args, needle in cases:
        proc = run(*args)
        assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
        assert needle in proc.stderr, (args, proc.stderr)
        assert "Traceback" not in proc.stderr and proc.stdout == "", (args, proc.stderr)


def test_bad_input_via_main_also_exits_2(tmp_path, capsys):
    assert main(["solve", write(tmp_path, "bad.json", '{"gpus": 0}')]) == 2
    err = capsys.readouterr().err
    assert "name: Field required" in err and "gpus: Input should be greater than or equal to 1" in err


def test_generate_is_seeded_and_valid(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["generate", "--gpus", "12", "--jobs", "9", "--seed", "4", "--out", str(a)]) == 0
    assert main(["generate", "--gpus", "12", "--jobs", "9", "--seed", "4", "--out", str(b)]) == 0
    assert a.read_text() == b.read_text()
    assert main(["solve", str(a), "--out", str(tmp_path / "plan.json")]) == 0
    assert main(["check", str(a), str(tmp_path / "plan.json")]) == 0


def test_bench_json_on_a_folder(tmp_path, capsys):
    for seed in range(2):
        main(["generate", "--gpus", "8", "--jobs", "6", "--seed", str(seed), "--out", str(tmp_path / f"s{seed}.json")])
    capsys.readouterr()
    assert main(["bench", "scenarios", str(tmp_path), "--json", "--repeat", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and data["repeat"] == 1 and len(data["scenarios"]) == 2


def test_bench_adds_generated_scenarios(tmp_path, capsys):
    main(["generate", "--gpus", "8", "--jobs", "6", "--seed", "1", "--out", str(tmp_path / "s.json")])
    capsys.readouterr()
    assert main(["bench", "scenarios", str(tmp_path), "--json", "--repeat", "1", "--generated", "16x12:3"]) == 0
    names = [row["scenario"] for row in json.loads(capsys.readouterr().out)["scenarios"]]
    assert names[1] == "gen-g16-j12-s3" and len(names) == 2


def test_bench_rejects_a_malformed_generated_spec(capsys):
    assert main(["bench", "scenarios", "--generated", "16by12"]) == 2
    assert "GPUSxJOBS" in capsys.readouterr().err


def test_bench_with_an_invalid_scenario_exits_2(tmp_path, capsys):
    (tmp_path / "bad.json").write_text('{"name": "bad", "gpus": 2, "jobs": [{"id": "a"}]}')
    assert main(["bench", "scenarios", str(tmp_path)]) == 2
    assert "jobs[0]" in capsys.readouterr().err


def test_demo_writes_one_svg_per_bundled_scenario(tmp_path):
    out = tmp_path / "demo"
    proc = run("demo", "--out", str(out), "--repeat", "1")
    assert proc.returncode == 0, proc.stderr
    svgs = sorted(p.stem for p in out.glob("*.svg"))
    assert svgs == sorted(p.stem for p in benchmarks.scenario_paths())
    assert (out / "bench.json").exists() and "mean value gain" in proc.stdout and str(out) in proc.stdout


def test_internal_errors_are_reported_without_traceback(monkeypatch, capsys):
    from dataclasses import replace

    from gpualloc.solvers import POLICIES

    monkeypatch.setitem(POLICIES, "heuristic", replace(POLICIES["heuristic"], solve=lambda p, o: 1 / 0))
    monkeypatch.delenv("GPUALLOC_DEBUG", raising=False)
    assert main(["solve", MIXED]) == 3
    assert "internal error: ZeroDivisionError" in capsys.readouterr().err


def test_full_mode_options_without_full_mode_are_refused_not_ignored(capsys):
    from gpualloc.agent.cli import main
    from gpualloc.benchmarks import scenario_paths

    scenario = str(scenario_paths()[0])
    assert main(["solve", scenario, "--scheduler", "heuristic", "--time-limit", "5", "--threads", "2"]) == 2
    err = capsys.readouterr().err
    assert "--threads, --time-limit: full-mode options" in err and "Traceback" not in err
    assert main(["bench", "scenarios", "--repeat", "1", "--node-limit", "3"]) == 2
    assert main(["solve", scenario, "--scheduler", "heuristic", "--effort", "0.1"]) == 0  # the heuristic's own


def _options_without_help(parser: argparse.ArgumentParser, name: str = "gpualloc"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, sub in action.choices.items():
                yield from _options_without_help(sub, f"{name} {command}")
        elif not action.help and not isinstance(action, argparse._HelpAction):
            yield f"{name} {'/'.join(action.option_strings) or action.dest}"


def test_every_option_of_every_command_says_what_it_does():
    assert list(_options_without_help(build_parser())) == []
    bare = argparse.ArgumentParser()
    bare.add_argument("--x")
    assert list(_options_without_help(bare, "bare")) == ["bare --x"]  # the walk finds what lacks help


@pytest.mark.slow
@pytest.mark.parametrize("solver", ["highs", "cbc"])
def test_full_mode_progress_goes_to_stderr_and_the_plan_stays_clean(solver):
    need(solver)
    big = str(benchmarks.scenario_dir() / "large_mixed.json")
    limit = str(MIN_SEARCH_S + 2)  # the solver runs (a second at least after the model is built), and is stopped
    for progress in ([], ["--progress"]):  # a limit that stops the solver makes Pyomo warn, too
        out = run("solve", big, "--scheduler", "full-mode", "--solver", solver, "--time-limit", limit, *progress)
        assert out.returncode == 0, out.stderr
        plan = json.loads(out.stdout)  # nothing but the plan on stdout
        assert plan["grid"] and (len(out.stderr.splitlines()) > 10) == bool(progress), out.stderr[-500:]
