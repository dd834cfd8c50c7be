"""The benchmark corpus: a fixed family (deterministic, contract-valid, the stated shares), files
that match their generator, records whose plans are legal and whose optima the heuristic never
beats, and `gpualloc bench corpus` over them."""

from __future__ import annotations

import json
import random
import statistics

import pytest

from gpualloc.agent.cli import main
from gpualloc.agent.loading import load_scenario
from gpualloc.benchmarks.corpus_bench import run_corpus_bench
from gpualloc.generators import corpus, corpus_build
from gpualloc.schemas import Scenario
from gpualloc.solvers import check_plan, compile_scenario, solve

ALL = [corpus.corpus_scenario(i) for i in range(corpus.SIZE)]


def _offered_load(data: dict) -> float:
    T = data["horizon"]
    area = sum(corpus._area(j, T) for j in data["jobs"] if j["kind"] != "realtime")
    return area / (data["gpus"] * T)


def test_the_family_is_deterministic_and_touches_no_global_randomness():
    random.seed(3)
    state = random.getstate()
    assert corpus.corpus_scenario(17) == ALL[17]
    assert random.getstate() == state
    assert len({json.dumps(d, sort_keys=True) for d in ALL}) == corpus.SIZE


def test_every_scenario_is_contract_valid_and_the_committed_files_match_the_generator():
    for data in ALL:
        Scenario.model_validate(data)
        path = corpus_build.CORPUS_DIR / "scenarios" / f"{data['name']}.json"
        assert json.loads(path.read_text()) == data, f"{path} drifted from its generator"


def test_the_mixture_holds_its_stated_shares():
    n = corpus.SIZE
    for shape, share in corpus.SHARES.items():
        count = sum(corpus.has_shape(i, shape) for i in range(n))
        assert abs(count / n - share) <= 0.02, shape
    sizes = [d["gpus"] for d in ALL]
    assert all(sizes.count(g) in (n // len(corpus.SIZES), n // len(corpus.SIZES) + 1) for g in corpus.SIZES)
    apps = [len([j for j in d["jobs"] if j["kind"] == "realtime"]) for d in ALL]
    assert all(abs(apps.count(k) / n - 0.2) <= 0.02 for k in range(corpus.MAX_APPS + 1))
    loads = [_offered_load(d) for d in ALL]
    assert min(loads) >= corpus.LOAD[0] - 1e-9
    assert statistics.median(loads) > 1.2  # uniform in 0.8-2.0, topped up by the last job drawn
    for i, d in enumerate(ALL):  # the shapes the index promises are in the scenario
        ids = {j["id"] for j in d["jobs"]}
        assert ("dominant" in ids) == corpus.has_shape(i, "dominant_long_job")
        assert any("running" in j for j in d["jobs"]) <= corpus.has_shape(i, "running_jobs")


def test_the_split_is_fixed_and_even_across_sizes():
    tune = [i for i in range(corpus.SIZE) if corpus.split_of(i) == "tune"]
    held = [i for i in range(corpus.SIZE) if corpus.split_of(i) == "heldout"]
    assert abs(len(tune) - len(held)) <= 8
    for g in corpus.SIZES:
        a = sum(ALL[i]["gpus"] == g for i in tune)
        b = sum(ALL[i]["gpus"] == g for i in held)
        assert abs(a - b) <= 1


@pytest.mark.slow
def test_records_plans_are_legal_and_no_heuristic_plan_beats_a_proven_optimum():
    records = corpus_build.read_optima()
    assert records, "the corpus ships with its records"
    for name, record in sorted(records.items()):
        scenario = load_scenario(corpus_build.CORPUS_DIR / "scenarios" / f"{name}.json")
        problem = compile_scenario(scenario)
        heuristic = solve(problem, "heuristic")
        assert [str(v) for v in check_plan(problem, heuristic.grid)] == []
        if record["proven"]:
            assert heuristic.metrics.objective <= record["bound"] + 1e-6 * max(1.0, abs(record["bound"])), name
            assert record["gap"] <= (corpus_build.PROVEN_SMALL if record["gpus"] <= 16 else corpus_build.PROVEN_LARGE)


def test_the_bench_reports_ratios_latency_and_the_worst_cases():
    names = sorted(corpus_build.read_optima())[:12]
    report = run_corpus_bench("all", repeat=1, names=names)
    assert report.ok, report.as_dict()["failures"]
    data = report.as_dict()
    small = data["proven_optima"]
    assert small["heuristic"]["n"] + small["dropped_nonpositive_reference"] == small["scenarios"]
    assert 0 < small["heuristic"]["min"] <= small["heuristic"]["median"] <= 1 + 1e-9
    assert len(data["worst"]) == min(10, len(report.cases))
    assert set(data["latency_ms_by_gpus"]) <= {str(g) for g in corpus.SIZES}


def test_a_corrupt_record_fails_the_bench(tmp_path):
    folder = tmp_path / "corpus"
    (folder / "scenarios").mkdir(parents=True)
    name = corpus.name_of(1)
    (folder / "scenarios" / f"{name}.json").write_text(corpus_build.scenario_text(ALL[1]))
    solved = corpus_build.solve_scenario(1, folder)  # a real HiGHS solve: 8 GPUs, small
    assert solved.record["proven"]
    (folder / "plans").mkdir()
    (folder / "plans" / f"{name}.json").write_text(solved.plan_text)
    (folder / "optima").mkdir()
    bad = dict(solved.record, objective=solved.record["objective"] + 5.0)
    (folder / "optima" / "chunk-00.jsonl").write_text(json.dumps(bad) + "\n")
    report = run_corpus_bench("all", repeat=1, folder=folder)
    assert not report.ok
    assert any("not the record's" in f for f in report.as_dict()["failures"])


@pytest.mark.slow
def test_cli_bench_corpus_json_and_a_bad_split(capsys):
    assert main(["bench", "corpus", "--split", "tune", "--repeat", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["split"] == "tune" and data["ok"]
    with pytest.raises(SystemExit):
        raise SystemExit(main(["bench", "corpus", "--split", "nope"]))
    assert "invalid choice" in capsys.readouterr().err
