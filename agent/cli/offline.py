"""The commands of files and reports: solve, check, generate (plans); bench, corpus, demo,
simulate, forecast, trace (reports); config and schemas. None needs a broker but the benches
that drive an agent through one (`bench --agent`, `--recovery`, `--soak`, `--scale`)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from gpualloc.agent.cli.arguments import (
    SETTING,
    checked,
    generated_spec,
    nonnegative_int,
    positive_int,
    seconds_or_none,
    setting,
    settings_arguments,
    settings_of,
)
from gpualloc.agent.loading import InputError, dump_json, dump_plan, load_plan, load_scenario, write_text
from gpualloc.schemas.limits import LIMITS
from gpualloc.schemas.settings import SolveOptions
from gpualloc.solvers.policies import POLICIES, names, online_policy, policy

EXIT_OK, EXIT_ILLEGAL = 0, 1


def _emit(text: str, out: str | None) -> None:
    if out:
        write_text(out, text)
    else:
        sys.stdout.write(text)


def _solve_options(args: argparse.Namespace, full_mode: bool) -> SolveOptions:
    """The configured solve options; with full mode, its solver must be installed here, and
    without it a full-mode flag is a mistake, not something to ignore."""
    options = settings_of(args).solve
    given = sorted(flag for flag, dest in FULL_MODE_FLAGS.items() if SETTING + dest in vars(args))
    if given and not full_mode:
        raise InputError(
            ", ".join(given),
            ["full-mode options: give --scheduler full-mode (or --full-mode with bench), or drop them"],
        )
    if full_mode:
        from gpualloc.solvers.policies.milp.model import solver_available

        name = options.full_mode.solver
        if not solver_available(name):
            hint = "apt-get install coinor-cbc" if name == "cbc" else "pip install highspy"
            raise InputError("--solver", [f"{name} is not available on this machine ({hint})"])
    return options


def cmd_solve(args: argparse.Namespace) -> int:
    from gpualloc.solvers import build_plan, compile_scenario

    chosen = policy(args.scheduler)
    problem = compile_scenario(load_scenario(args.scenario))
    options = _solve_options(args, chosen.hot_path is not None)
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
    from gpualloc.schemas import Scenario
    from gpualloc.solvers.generators.scenarios import generate_scenario

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


def cmd_bench(args: argparse.Namespace) -> int:
    from gpualloc.agent.benches.scenarios import run_bench

    if not args.full_mode:
        _solve_options(args, False)  # full-mode flags without --full-mode are refused
    if args.agent or args.recovery or args.soak or args.scale:
        return _bench_agent(args)
    if args.corpus:
        return _bench_corpus(args)
    if args.hot_path:
        from gpualloc.agent.benches.hot_path import measure_hot_path

        hot = measure_hot_path(queued=args.queued or 240)
        sys.stdout.write(dump_json(hot.as_dict()) if args.json else hot.line() + "\n")
        return EXIT_OK
    if args.traces:
        from gpualloc.agent.benches import trace_bench
        from gpualloc.agent.renderers.progress import Progress

        rows = trace_bench.run_trace_bench(
            args.load,
            tuple(args.starvation_steps or (48, 24, 12)),
            args.week,
            progress=Progress("bench --traces", "traces"),
            include_openb=args.openb,
        )
        sys.stdout.write(dump_json(trace_bench.as_dict(rows)) if args.json else trace_bench.table(rows) + "\n")
        if args.chart:
            write_text(args.chart, trace_bench.chart(rows))
        return EXIT_OK
    if args.forecast:
        from gpualloc.agent.benches.forecast_bench import run_forecast_bench

        bench = run_forecast_bench(args.seeds, settings_of(args).simulation.forecast)
        sys.stdout.write(dump_json(bench.as_dict()) if args.json else bench.table() + "\n")
        return EXIT_OK
    report, scenarios = run_bench(args.dir, args.repeat, args.generated)
    if args.full_mode:
        from gpualloc.agent.benches.full_mode import bench_full_mode, record_best_known

        report.full_mode = bench_full_mode(scenarios, _solve_options(args, True))
        if args.update_best_known:
            for line in record_best_known(report.full_mode):
                print(line, file=sys.stderr)
    sys.stdout.write(dump_json(report.as_dict()) if args.json else report.table() + "\n")
    return report.exit_code


def _bench_agent(args: argparse.Namespace) -> int:
    """Through a real broker: sustained arrivals (agent/benches/throughput.py), restarts
    (agent/benches/recovery.py), a long run (agent/benches/soak.py, which exits 1 when it misses
    its targets) or pools of thousands of GPUs (agent/benches/scale.py)."""
    import asyncio
    from dataclasses import asdict

    from gpualloc.agent.benches.throughput import measure
    from gpualloc.agent.cli.arguments import bootstrap_of

    bootstrap = bootstrap_of(settings_of(args))
    if args.recovery:
        from gpualloc.agent.benches.recovery import measure_recovery

        result = asyncio.run(measure_recovery(bootstrap, args.queued or 1000, args.repeat))
    elif args.soak:
        from gpualloc.agent.benches.soak import soak

        try:
            result = asyncio.run(soak(bootstrap, args.events, args.rate or 1000))
        except ValueError as e:
            raise InputError("--events", [str(e)]) from None
    elif args.scale:
        from gpualloc.agent.benches.scale import SIZES, measure_sizes

        result = asyncio.run(
            measure_sizes(
                bootstrap,
                tuple(args.gpus or SIZES),
                apps=args.apps,
                queued=args.queued or 2000,
                rate=args.rate or 100,
                seconds=args.seconds or 20,
                step_seconds=args.step_seconds or 10.0,
                horizon=args.horizon,
                full_mode=args.full_mode,
                id_chars=args.id_chars,
                node_gpus=args.gpus_per_node,
            )
        )
    else:
        result = asyncio.run(
            measure(
                bootstrap,
                args.rate or 1000,
                args.seconds or 20,
                step_seconds=args.step_seconds or 2.0,
                null_agent=args.null_agent,
            )
        )
    sys.stdout.write(dump_json(asdict(result)) if args.json else result.line() + "\n")
    return EXIT_ILLEGAL if args.soak and not result.ok else EXIT_OK


def _bench_corpus(args: argparse.Namespace) -> int:
    """The heuristic against the corpus's proven optima (agent/benches/corpus_bench.py)."""
    from gpualloc.agent.benches.corpus_bench import run_corpus_bench
    from gpualloc.agent.renderers.progress import Progress

    report = run_corpus_bench(args.split, args.repeat, progress=Progress("bench --corpus", "scenarios"))
    sys.stdout.write(dump_json(report.as_dict()) if args.json else report.table() + "\n")
    return report.exit_code


def cmd_corpus(args: argparse.Namespace) -> int:
    """Write the corpus's scenario files, then solve the chunks asked for (resumable)."""
    from gpualloc.agent.benches import corpus_build as cb

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
    from gpualloc.agent.benches.demo import run_demo

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
    events = read_trace(args.trace)
    try:
        sim = simulate(
            events,
            SimOptions(
                policies=tuple(args.policy or ("fifo", "heuristic")),
                days=args.days,
                full_mode=settings.full_mode,
                forecast=args.forecast,
                forecast_settings=settings.forecast,
                starvation_steps=args.starvation_steps,
            ),
            progress=Progress("simulate", "steps"),
        )
    except ValueError as e:
        raise InputError(args.trace, [str(e)]) from None
    rows = report(sim)
    sys.stdout.write(dump_json(sim_report.as_json(rows, sim)) if args.json else sim_report.table(rows, sim) + "\n")
    if args.chart:
        write_text(args.chart, sim_report.chart(rows))
    return EXIT_ILLEGAL if any(executed_violations(sim, run) for run in sim.runs.values()) else EXIT_OK


def cmd_trace(args: argparse.Namespace) -> int:
    from gpualloc.agent.traces import openb_trace, pollux_trace, write_trace
    from gpualloc.solvers.generators import synthetic
    from gpualloc.solvers.generators.traces import generate_trace

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
    elif args.source == "openb":
        if not args.csv:
            raise InputError(
                "trace openb", ["give the pod list CSV (e.g. shared/traces/openb/openb_pod_list_default.csv)"]
            )
        events = openb_trace(args.csv, args.gpus, args.days or 2, args.end_day)
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


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1] (got {text!r})")
    return value


def _online(text: str) -> str:
    """An online policy's name, checked against the registry."""
    try:
        return online_policy(text).name
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


FULL_MODE_FLAGS = {
    "--solver": "solve.full_mode.solver",
    "--time-limit": "solve.full_mode.time_limit",
    "--node-limit": "solve.full_mode.node_limit",
    "--threads": "solve.full_mode.threads",
    "--seed": "solve.full_mode.seed",
    "--progress": "solve.full_mode.progress",
}


def _full_mode_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("full mode (MILP)")
    setting(g, "--solver", path="solve.full_mode.solver", choices=("highs", "cbc"), help="MILP solver")
    setting(
        g, "--time-limit", path="solve.full_mode.time_limit", type=seconds_or_none, help="seconds per solve (0: none)"
    )
    setting(
        g,
        "--node-limit",
        path="solve.full_mode.node_limit",
        type=positive_int,
        help="branch-and-bound nodes: with --time-limit 0 a reproducible work limit",
    )
    setting(g, "--threads", path="solve.full_mode.threads", type=positive_int, help="solver threads")
    setting(g, "--seed", path="solve.full_mode.seed", type=int, help="solver random seed")
    setting(
        g,
        "--lns",
        path="solve.full_mode.lns",
        action="store_const",
        const=True,
        help="full mode as a large-neighbourhood search: exact sub-models over windows of two nodes",
    )
    setting(
        g,
        "--progress",
        path="solve.full_mode.progress",
        action="store_const",
        const=True,
        help="stream the solver log (incumbent and bound) to stderr",
    )
    setting(g, "--effort", path="solve.effort", type=float, help="heuristic local-search effort (placements, not time)")
    settings_arguments(p)


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
    _full_mode_arguments(p)
    p.set_defaults(func=cmd_solve)

    p = sub.add_parser("check", help="list the legality rules (R1-R5) a plan breaks")
    p.add_argument("scenario", help="scenario JSON file")
    p.add_argument("plan", help="plan JSON file")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("bench", help="FIFO vs heuristic on a folder of scenarios")
    p.add_argument("dir", nargs="?", default=None, help="folder of *.json scenarios (default: the bundled seven)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--repeat", type=positive_int, default=5, help="timed runs per scheduler (p50 reported)")
    p.add_argument(
        "--generated",
        type=generated_spec,
        action="append",
        default=[],
        metavar="GPUSxJOBS[:SEED]",
        help="also bench a generated scenario (seed 7 unless given), e.g. 1024x1000; repeatable",
    )
    p.add_argument(
        "--full-mode",
        "--milp",
        dest="full_mode",
        action="store_true",
        help="also run full mode: objective, bound, gap, heuristic/full mode",
    )
    p.add_argument(
        "--agent", action="store_true", help="instead: arrivals per second through a real broker, with latency"
    )
    p.add_argument(
        "--recovery",
        action="store_true",
        help="instead: seconds from a killed agent's restart to its first decision (--repeat restarts)",
    )
    p.add_argument(
        "--queued",
        type=positive_int,
        default=None,
        help="--recovery: jobs waiting in the pool (default 1000); --hot-path: likewise (default 240); "
        "--scale: the backlog (default 2000)",
    )
    p.add_argument(
        "--hot-path",
        action="store_true",
        help="instead: one arrival's decision in the planner core, 64 GPUs and a standing queue (p50, p99)",
    )
    p.add_argument(
        "--soak",
        action="store_true",
        help="instead: a long compressed-clock run; the agent's RSS growth and its lag at the end",
    )
    p.add_argument("--events", type=positive_int, default=100_000, help="--soak: input records sent (default 100000)")
    p.add_argument(
        "--scale",
        action="store_true",
        help="instead: the agent on pools of 256 to 4,096 GPUs with apps and a backlog (30%% given by "
        "features) through a real broker: decision latency, boundaries, record bytes, RSS, status, "
        "recovery after SIGKILL, SIGTERM (with --full-mode: the agent's full mode on)",
    )
    p.add_argument(
        "--gpus",
        type=positive_int,
        action="append",
        metavar="N",
        help="--scale: a pool size; repeatable (default 256, 1024, 4096)",
    )
    p.add_argument(
        "--apps",
        type=checked(int, lambda v: v >= 0, "0 or more"),
        default=3,
        help="--scale: real-time apps registered (default 3)",
    )
    p.add_argument("--horizon", type=positive_int, default=48, help="--scale: the pool's horizon in steps (default 48)")
    p.add_argument(
        "--gpus-per-node",
        type=positive_int,
        default=8,
        help="--scale: GPUs a node (a power of two dividing every --gpus; default 8)",
    )
    p.add_argument(
        "--id-chars",
        type=checked(int, lambda v: 0 <= v <= LIMITS.id_chars, f"0 to {LIMITS.id_chars}"),
        default=0,
        help="--scale: pad the backlog's job ids to this many characters (the contract's limit is the most)",
    )
    setting(
        p,
        "--bootstrap",
        path="bootstrap",
        metavar="HOST:PORT",
        shown="$KAFKA_BOOTSTRAP_SERVERS",
        help="the broker for --agent, --recovery, --soak and --scale",
    )
    p.add_argument(
        "--rate",
        type=float,
        default=None,
        help="--agent: arrivals per second offered; --soak: records per second (default 1000); "
        "--scale: arrivals per second (default 100)",
    )
    p.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="--agent: measured seconds (default 20); --scale: seconds of arrivals a size (default 20)",
    )
    p.add_argument(
        "--step-seconds",
        type=checked(float, lambda v: v > 0, "seconds > 0"),
        default=None,
        help="--agent: the agent's compressed step, a commit every this many seconds (default 2); "
        "--scale: likewise (default 10: a quarter step leaves the plan made ahead of a boundary its time)",
    )
    p.add_argument(
        "--null-agent",
        action="store_true",
        help="--agent: through an agent that plans nothing (one transaction a poll): the floor the "
        "broker, the clients and the machine set",
    )
    p.add_argument(
        "--corpus", action="store_true", help="instead: the heuristic and the greedy against the corpus's proven optima"
    )
    p.add_argument(
        "--split",
        choices=("tune", "heldout", "all"),
        default="heldout",
        help="--corpus: which half (default heldout: the half no tuning saw)",
    )
    p.add_argument(
        "--forecast",
        action="store_true",
        help="instead: the forecasters' backtests over seeds of the ground-truth generators, against targets",
    )
    p.add_argument("--seeds", type=positive_int, default=8, help="--forecast: generator seeds 0..N-1 (default 8)")
    p.add_argument(
        "--traces",
        action="store_true",
        help="instead: FIFO, the heuristic and the heuristic with starvation bounds over whole traces "
        "(the eight Pollux workloads; --week adds the bundled week), on pools sized to --load",
    )
    p.add_argument(
        "--load",
        type=float,
        default=1.25,
        help="--traces: offered work over the pool's capacity up to the last arrival (default 1.25)",
    )
    p.add_argument(
        "--starvation-steps",
        type=positive_int,
        action="append",
        metavar="B",
        help="--traces: a starvation bound to run the heuristic with; repeatable (default 48, 24, 12)",
    )
    p.add_argument("--week", action="store_true", help="--traces: add the bundled week (1,000 jobs; minutes)")
    p.add_argument(
        "--openb",
        action="store_true",
        help="--traces: add the bundled openb window (486 pods of the Alibaba 2023 trace over 2 days)",
    )
    p.add_argument("--chart", help="--traces: write the trade-off (value kept against p99 wait, per bound) here (SVG)")
    p.add_argument(
        "--update-best-known",
        action="store_true",
        help="with --full-mode: record better objectives and bounds in the bundled best-known.json",
    )
    _full_mode_arguments(p)
    p.set_defaults(func=cmd_bench)

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
        "--starvation-steps",
        type=nonnegative_int,
        metavar="B",
        help="the starvation bound: a job queued B steps is planned ahead of every job that waited less; "
        "0: none (default: the trace's pool.configured, else the contract's 5 days)",
    )
    settings_arguments(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    p.add_argument("--chart", help="write an SVG chart of the days here")
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

    p = sub.add_parser("trace", help="write a trace: generated, or derived from a Pollux workload CSV")
    p.add_argument(
        "source",
        choices=("generate", "pollux", "openb", "jobs", "traffic", "forecast"),
        help="generate: days of jobs and traffic; jobs: jobs given by features with completions, in "
        "three pools (and OUT.truth.json, the ground truth); traffic: weeks of real-time traffic; "
        "forecast: weeks of both for `simulate --forecast` (docs/synthetic-data.md); openb: a window "
        "of the Alibaba GPU trace v2023 pod list (solvers/generators/openb.py)",
    )
    p.add_argument("csv", nargs="?", help="pollux: the workload CSV; openb: the pod list CSV")
    p.add_argument("--out", required=True, help="the JSONL file to write")
    p.add_argument(
        "--gpus",
        type=positive_int,
        default=64,
        help="generate, pollux, traffic, forecast: GPUs in the pool (default 64)",
    )
    p.add_argument(
        "--days",
        type=positive_int,
        default=None,
        help="generate: days (default 7); openb: the window's days (default 2)",
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
        "--apps", type=nonnegative_int, default=3, help="generate, traffic, forecast: real-time apps (default 3)"
    )
    p.add_argument("--seed", type=int, default=0, help="random seed: the same seed writes the same trace (default 0)")
    p.set_defaults(func=cmd_trace)
