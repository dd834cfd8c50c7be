"""The commands of files and reports: solve, check, generate (plans); bench (agent/cli/bench.py),
corpus, demo, simulate, forecast, trace (reports); config and schemas. None needs a broker but
the benches that drive an agent through one (`bench agent`, `recovery`, `soak`, `scale`)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from gpualloc.agent.cli.arguments import (
    full_mode_arguments,
    nonnegative_int,
    positive_int,
    seconds_or_none,
    setting,
    settings_arguments,
    settings_of,
    solve_options,
)
from gpualloc.agent.cli.bench import add_bench_command
from gpualloc.agent.loading import InputError, dump_json, dump_plan, load_plan, load_scenario, write_text
from gpualloc.solvers.policies import POLICIES, names, online_policy, policy
from gpualloc.solvers.simulation.trace_events import KNOWN
from gpualloc.solvers.value_models import VALUE_MODELS

EXIT_OK, EXIT_ILLEGAL = 0, 1


def _emit(text: str, out: str | None) -> None:
    if out:
        write_text(out, text)
    else:
        sys.stdout.write(text)


def cmd_solve(args: argparse.Namespace) -> int:
    from gpualloc.solvers import build_plan, compile_scenario

    chosen = policy(args.scheduler)
    problem = compile_scenario(load_scenario(args.scenario))
    options = solve_options(args, chosen.hot_path is not None)
    t0 = time.perf_counter()
    solution = chosen.solve(problem, options)
    plan = build_plan(problem, chosen, solution, (time.perf_counter() - t0) * 1000.0)
    _emit(dump_plan(plan), args.out)
    violations = chosen.check(problem, plan.grid)
    for v in violations:
        print(f"gpualloc: the {chosen.name} plan breaks {v}", file=sys.stderr)
    return EXIT_ILLEGAL if violations else EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    from gpualloc.solvers import compile_scenario

    scenario = load_scenario(args.scenario)
    plan = load_plan(args.plan, scenario)
    if plan.scenario != scenario.name:
        print(
            f"gpualloc: note: the plan names scenario {plan.scenario!r}, checked against {scenario.name!r}",
            file=sys.stderr,
        )
    violations = policy(plan.scheduler).check(compile_scenario(scenario), plan.grid)
    for v in violations:
        print(v)
    if violations:
        return EXIT_ILLEGAL
    print("legal")
    return EXIT_OK


def cmd_generate(args: argparse.Namespace) -> int:
    from gpualloc.generators.scenarios import generate_scenario
    from gpualloc.schemas import Scenario

    try:
        data = generate_scenario(
            args.gpus,
            args.jobs,
            args.seed,
            horizon=args.horizon,
            gpus_per_node=args.gpus_per_node,
            name=args.name,
            swap_cap=args.swap_cap,
        )
    except ValueError as e:
        raise InputError("generate", [str(e)]) from None
    Scenario.model_validate(data)  # the generator's promise; a breach is an internal error
    _emit(dump_json(data), args.out)
    return EXIT_OK


def cmd_corpus(args: argparse.Namespace) -> int:
    """Write the corpus's scenario files, then solve the chunks asked for (resumable)."""
    from gpualloc.generators import corpus_build as cb

    chunks = args.chunk or list(range(cb.chunk_count()))
    bad = [c for c in chunks if not 0 <= c < cb.chunk_count()]
    if bad:
        raise InputError("--chunk", [f"must be in 0..{cb.chunk_count() - 1} (got {bad[0]})"])
    cb.write_scenarios()
    limits = {
        k: v
        for k, v in (
            ("count_seconds", args.count_seconds),
            ("exact_seconds", args.exact_seconds),
            ("large_seconds", args.large_seconds),
        )
        if v is not None
    }
    solved = cb.build_chunks(chunks, log=lambda line: print(line, flush=True), **limits)
    print(f"solved {solved} scenarios; records in {cb.CORPUS_DIR / 'optima'}")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from gpualloc.benchmarks.demo import run_demo

    report, written = run_demo(args.out, args.repeat)
    print(report.table())
    print(f"\nwrote {len(written)} files to {Path(args.out).resolve()}:")
    for path in written:
        print(f"  {path}")
    return report.exit_code


def cmd_simulate(args: argparse.Namespace) -> int:
    from gpualloc.agent.renderers import simulation as sim_report
    from gpualloc.agent.renderers.progress import Progress
    from gpualloc.agent.traces import read_trace
    from gpualloc.solvers.simulation.report import executed_violations, report
    from gpualloc.solvers.simulation.simulator import SimOptions, simulate

    settings = settings_of(args).simulation
    if args.known and not args.forecast:
        raise InputError("--known", ["compares runs made with --forecast: give it too"])
    events = read_trace(args.trace)
    try:
        sim = simulate(
            events,
            SimOptions(
                policies=tuple(args.policy or ("fifo", "heuristic")),
                days=args.days,
                full_mode=settings.full_mode,
                forecast=args.forecast,
                known=tuple(dict.fromkeys(args.known or ())),
                forecast_settings=settings.forecast,
                starvation_steps=args.starvation_steps,
                replan_work=settings.replan_work,
                value_model=args.value_model,
                duration_factor=args.plan_durations_at,
            ),
            progress=Progress("simulate", "steps"),
        )
    except ValueError as e:
        raise InputError(args.trace, [str(e)]) from None
    rows = report(sim)
    sys.stdout.write(dump_json(sim_report.as_json(rows, sim)) if args.json else sim_report.table(rows, sim) + "\n")
    if args.chart:
        write_text(args.chart, sim_report.chart(rows))
    if args.wait_chart:
        write_text(args.wait_chart, sim_report.wait_chart(sim, args.trace))
    return EXIT_ILLEGAL if any(executed_violations(sim, run) for run in sim.runs.values()) else EXIT_OK


def cmd_trace(args: argparse.Namespace) -> int:
    from gpualloc.generators import synthetic
    from gpualloc.generators.trace_files import openb_trace, pollux_trace, write_trace
    from gpualloc.generators.traces import generate_trace

    if args.source == "generate":
        events = generate_trace(args.gpus, args.days or 7, args.jobs, args.apps, args.seed)
    elif args.source == "jobs":
        events, truth = synthetic.job_trace(args.seed, args.jobs)
        floor = {
            "duration_noise_floor": synthetic.duration_noise_floor(events, truth),
            "last_20pct_noise_floor": synthetic.noise_floor_last(events, truth),
        }
        write_text(f"{args.out}.truth.json", dump_json({**floor, "jobs": truth}))
    elif args.source == "traffic":
        events = synthetic.traffic_trace(args.seed, args.weeks, args.apps, gpus=args.gpus)
    elif args.source == "forecast":
        events = synthetic.forecast_trace(args.seed, args.weeks, args.gpus, apps=args.apps)
    elif args.source == "serving":
        from gpualloc.generators.serving import serving_trace

        events = serving_trace(args.seed, args.days or 3, args.gpus, apps=args.apps)
    elif args.source == "openb":
        if not args.csv:
            raise InputError(
                "trace openb", ["give the pod list CSV (e.g. shared/traces/openb/openb_pod_list_default.csv)"]
            )
        events = openb_trace(args.csv, args.gpus, args.days or 2, args.end_day)
    elif args.source in ("philly", "helios", "acme"):
        from gpualloc.generators.job_table_files import job_table_trace

        if not args.csv:
            raise InputError(f"trace {args.source}", ["give the job table CSV (benchmarks/traces/README.md)"])
        events, kept = job_table_trace(args.source, args.csv, args.gpus, args.days)
        print(
            f"{kept.kept} of {kept.rows} jobs kept ({kept.never_ran} never ran, {kept.no_gpus} without GPUs); "
            f"rounding GPUs up to powers of two adds {kept.added_work:.1%} GPU-work"
        )
    else:
        if not args.csv:
            raise InputError("trace pollux", ["give the workload CSV (e.g. shared/traces/pollux/workload-1.csv)"])
        events = pollux_trace(args.csv, args.gpus)
    write_trace(args.out, events)
    print(f"wrote {len(events)} events to {args.out}")
    return EXIT_OK


def cmd_forecast_backtest(args: argparse.Namespace) -> int:
    from gpualloc.agent.renderers import forecast_backtest
    from gpualloc.agent.traces import read_trace

    result = forecast_backtest.backtest(read_trace(args.trace), settings_of(args).simulation.forecast, args.share)
    if not result["jobs"]["jobs"] and not result["traffic"]:
        raise InputError(
            args.trace,
            ["nothing to backtest: no job.submitted with features and no traffic.observed of a registered app"],
        )
    sys.stdout.write(dump_json(result) if args.json else forecast_backtest.table(result) + "\n")
    return EXIT_OK


def cmd_config(args: argparse.Namespace) -> int:
    from gpualloc.agent.cli import build_parser
    from gpualloc.agent.operator import config_table

    if args.config_command == "options":
        sys.stdout.write(config_table.markdown(config_table.options(build_parser())))
    else:
        sys.stdout.write(dump_json(config_table.effective(settings_of(args))))
    return EXIT_OK


def cmd_schemas_export(args: argparse.Namespace) -> int:
    from gpualloc.schemas.export import REVISION, write_schemas

    try:
        written = write_schemas(args.dir)
    except OSError as e:
        raise InputError(args.dir, [f"cannot write the schemas: {e.strerror or e}"]) from None
    print(f"wrote {len(written)} JSON Schemas (revision {REVISION}) to {args.dir}")
    return EXIT_OK


def _up_to(top: float) -> Callable[[str], float]:
    """An argument type: a number in (0, top]."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not 0 < value <= top:
            raise argparse.ArgumentTypeError(f"must be a number in (0, {top:g}] (got {text!r})")
        return value

    return parse


_share, _factor = _up_to(1), _up_to(100)  # a share of a trace's jobs; a multiple of true durations


def _online(text: str) -> str:
    """An online policy's name, checked against the registry."""
    try:
        return online_policy(text).name
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_offline_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="plan a scenario and print (or write) the plan JSON")
    p.add_argument("scenario", help="scenario JSON file")
    p.add_argument(
        "--scheduler",
        choices=names(),
        default="heuristic",
        help=f"a registered policy ({', '.join(POLICIES)}; default heuristic)",
    )
    p.add_argument("--out", help="write the plan here instead of stdout")
    full_mode_arguments(p)
    p.set_defaults(func=cmd_solve)

    p = sub.add_parser("check", help="list the legality rules (R1-R5) a plan breaks")
    p.add_argument("scenario", help="scenario JSON file")
    p.add_argument("plan", help="plan JSON file")
    p.set_defaults(func=cmd_check)

    add_bench_command(sub)

    p = sub.add_parser("corpus", help="build the benchmark corpus: scenario files, optima and plans (resumable)")
    p.add_argument(
        "--chunk",
        type=int,
        action="append",
        metavar="K",
        help="solve chunk K only (20 scenarios each); repeatable (default: all)",
    )
    p.add_argument("--count-seconds", type=float, help="count model time limit, pools up to 16 GPUs (default 60)")
    p.add_argument("--exact-seconds", type=float, help="exact model time limit, pools up to 16 GPUs (default 240)")
    p.add_argument("--large-seconds", type=float, help="count model time limit, larger pools (default 40)")
    p.set_defaults(func=cmd_corpus)

    p = sub.add_parser("demo", help="bench the bundled scenarios and write Gantt charts")
    p.add_argument("--out", default="demo-out", help="output folder (default: demo-out)")
    p.add_argument("--repeat", type=positive_int, default=5, help="timed runs per scheduler")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("generate", help="write a random contended scenario")
    p.add_argument("--gpus", type=positive_int, required=True, help="GPUs in the pool")
    p.add_argument("--jobs", type=positive_int, required=True, help="batch jobs to draw")
    p.add_argument("--seed", type=int, required=True, help="random seed: the same seed writes the same scenario")
    p.add_argument("--horizon", type=positive_int, default=24, help="steps in the horizon (default 24)")
    p.add_argument(
        "--gpus-per-node",
        type=positive_int,
        default=None,
        help="GPUs per node: blocks may not cross nodes (default: one node)",
    )
    p.add_argument(
        "--swap-cap", type=nonnegative_int, default=2, help="GPUs a real-time app may change between steps (default 2)"
    )
    p.add_argument("--name", default=None, help="the scenario's name (default: generated from the arguments)")
    p.add_argument("--out", help="write the scenario here instead of stdout")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("simulate", help="drive the planner core with a trace of contract events, per policy")
    p.add_argument("trace", help="JSONL file of contract events (see `gpualloc trace`)")
    p.add_argument(
        "--policy",
        action="append",
        type=_online,
        metavar="POLICY",
        help=f"an online policy: {', '.join(POLICIES)} (full-mode: heuristic with full mode; "
        "alias heuristic+milp), or HOT+FULL; repeatable (default: fifo and heuristic)",
    )
    p.add_argument("--days", type=positive_int, default=None, help="simulate this many days (default: the whole trace)")
    setting(
        p,
        "--full-mode-every",
        "--milp-every",
        path="simulation.full_mode.every",
        type=positive_int,
        help="steps between full-mode solves",
    )
    setting(
        p,
        "--full-mode-nodes",
        "--milp-nodes",
        path="simulation.full_mode.options.node_limit",
        type=positive_int,
        help="full-mode node limit per solve, a work limit",
    )
    setting(
        p,
        "--full-mode-jobs",
        "--milp-jobs",
        path="simulation.full_mode.max_jobs",
        type=positive_int,
        help="queued jobs full mode plans (the most valuable)",
    )
    setting(
        p,
        "--full-mode-lns",
        path="simulation.full_mode.options.lns",
        action="store_const",
        const=True,
        help="full mode as a large-neighbourhood search: exact sub-models over windows of two nodes",
    )
    setting(
        p,
        "--full-mode-time-limit",
        "--milp-time-limit",
        path="simulation.full_mode.options.time_limit",
        type=seconds_or_none,
        help="seconds per full-mode solve (0: none)",
    )
    p.add_argument(
        "--forecast",
        action="store_true",
        help="run each policy forecast-driven (jobs by their features, traffic forecast) and as an oracle",
    )
    p.add_argument(
        "--known",
        action="append",
        choices=tuple(KNOWN),
        help="with --forecast, one more run a policy: the forecast run's with every job's true GPUs, "
        "durations or both, traffic as it comes (what knowing them is worth); repeatable",
    )
    p.add_argument(
        "--starvation-steps",
        type=nonnegative_int,
        metavar="B",
        help="the starvation bound: a job queued B steps is planned ahead of every job that waited less; "
        "0: none (default: the trace's pool.configured, else the contract's 5 days)",
    )
    p.add_argument(
        "--plan-durations-at",
        type=_factor,
        metavar="F",
        help="tell every job its true GPUs and plan it at F x its true duration (it runs its true one): "
        "1 plans at the truth; what inflated plans gain or lose",
    )
    p.add_argument(
        "--value-model",
        choices=VALUE_MODELS,
        help='what a batch job is worth where a plan places it (docs/contract/README.md, "Value models"; '
        "default: the trace's pool.configured, else gpu_steps)",
    )
    settings_arguments(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    p.add_argument("--chart", help="write an SVG chart of the days here")
    p.add_argument("--wait-chart", help="write an SVG of each policy's wait by job size here")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("forecast", help="the forecasters: backtests on a trace")
    forecast = p.add_subparsers(dest="forecast_command", required=True, metavar="COMMAND")
    p = forecast.add_parser("backtest", help="job sizes and real-time demand forecast on a trace of contract events")
    p.add_argument("trace", help="JSONL file of contract events")
    p.add_argument("--share", type=_share, default=0.2, help="jobs: the last share judged (default 0.2)")
    setting(
        p,
        "--training-quantile",
        path="simulation.forecast.training_quantile",
        type=float,
        help="training jobs are planned at this quantile of their duration",
    )
    setting(
        p,
        "--quantization-quantile",
        path="simulation.forecast.quantization_quantile",
        type=float,
        help="quantization jobs are planned at this quantile of their duration",
    )
    setting(
        p,
        "--realtime-quantile",
        path="simulation.forecast.realtime_quantile",
        type=float,
        help="real-time demand is planned at this quantile",
    )
    settings_arguments(p)
    p.add_argument("--json", action="store_true", help="print the backtest as JSON instead of a table")
    p.set_defaults(func=cmd_forecast_backtest)

    p = sub.add_parser("config", help="the settings: every option, or the effective values")
    config = p.add_subparsers(dest="config_command", required=True, metavar="COMMAND")
    p = config.add_parser(
        "show",
        help="the effective settings (flags none; the environment, the settings file, "
        "the defaults) as JSON, secrets masked",
    )
    settings_arguments(p)
    p.set_defaults(func=cmd_config)
    p = config.add_parser("options", help="every setting: its environment variable, default and flags (Markdown)")
    p.set_defaults(func=cmd_config)

    p = sub.add_parser("schemas", help="the contracts as JSON Schemas")
    schemas = p.add_subparsers(dest="schemas_command", required=True, metavar="COMMAND")
    p = schemas.add_parser(
        "export",
        help="write envelope.json, one <type>.json per event type, scenario.json and "
        "plan.json (JSON Schema 2020-12) into DIR",
    )
    p.add_argument("dir", help="folder to write into (created if missing)")
    p.set_defaults(func=cmd_schemas_export)

    p = sub.add_parser("trace", help="write a trace: generated, or derived from a public trace's CSV")
    p.add_argument(
        "source",
        choices=("generate", "pollux", "openb", "philly", "helios", "acme", "jobs", "traffic", "forecast", "serving"),
        help="generate: days of jobs and traffic; serving: days of real-time apps with morning ramps, "
        "bursts, flash crowds and one-observation spikes, observed within steps, beside heavy-tailed "
        "batch work, cancellations and a node down (generators/serving.py); jobs: jobs given by "
        "features with completions, in "
        "three pools (and OUT.truth.json, the ground truth); traffic: weeks of real-time traffic; "
        "forecast: weeks of both for `simulate --forecast` (docs/synthetic-data.md); openb: a window "
        "of the Alibaba GPU trace v2023 pod list (generators/openb.py); philly, helios, acme: a public "
        "GPU-cluster job table (generators/job_tables.py; the bundled ones in benchmarks/traces/README.md)",
    )
    p.add_argument(
        "csv", nargs="?", help="pollux: the workload CSV; openb: the pod list CSV; philly, helios, acme: the job table"
    )
    p.add_argument("--out", required=True, help="the JSONL file to write")
    p.add_argument(
        "--gpus",
        type=positive_int,
        default=64,
        help="generate, pollux, traffic, forecast, serving: GPUs in the pool; philly, helios, acme: at least "
        "(and the largest job) (default 64)",
    )
    p.add_argument(
        "--days",
        type=positive_int,
        default=None,
        help="generate: days (default 7); serving: days (default 3); openb: the window's days (default 2); "
        "philly, helios, acme: the window of this many days with the median GPU-work (default: the whole table)",
    )
    p.add_argument(
        "--end-day",
        type=positive_int,
        default=148,
        help="openb: the window ends this many days into the trace (default 148)",
    )
    p.add_argument("--weeks", type=positive_int, default=4, help="traffic, forecast: weeks (default 4)")
    p.add_argument("--jobs", type=positive_int, default=1000, help="generate, jobs: jobs to draw (default 1000)")
    p.add_argument(
        "--apps",
        type=nonnegative_int,
        default=3,
        help="generate, traffic, forecast, serving: real-time apps (default 3)",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed: the same seed writes the same trace (default 0)")
    p.set_defaults(func=cmd_trace)
