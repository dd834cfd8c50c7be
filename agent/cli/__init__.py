"""`gpualloc`: solve, check, bench, demo, generate, simulate, trace, and the bus commands
(agent, node-agent, publish, tail: `gpualloc.agent.cli.bus`). A thin argparse layer.

Exit codes: 0 success (a legal plan, a passing bench); 1 an illegal plan or a failing bench;
2 bad input (unreadable file, invalid JSON, schema violation, plan of the wrong shape, bad
arguments), reported on stderr naming the field and the rule; 3 an internal error (set
GPUALLOC_DEBUG=1 for the traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from gpualloc.agent.cli.bus import add_bus_commands
from gpualloc.agent.loading import InputError, dump_json, dump_plan, load_plan, load_scenario, write_text

EXIT_OK, EXIT_ILLEGAL, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


def _number(text: str, convert, minimum, what: str):
    """Parse an argument, or an argparse error naming the rule it breaks."""
    try:
        x = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    if x < minimum:
        raise argparse.ArgumentTypeError(f"must be {what}, got {x}")
    return x


def _positive(text: str) -> int:
    return _number(text, int, 1, "an integer >= 1")


def _generated_spec(text: str) -> tuple[int, int, int]:
    """`1024x1000` or `1024x1000:3` -> (gpus, jobs, seed)."""
    try:
        size, _, seed = text.partition(":")
        gpus, jobs = (int(x) for x in size.lower().split("x"))
        if gpus < 1 or jobs < 1:
            raise ValueError
        return gpus, jobs, int(seed) if seed else 7
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected GPUSxJOBS[:SEED] with positive sizes, got {text!r}") from None


def _emit(text: str, out: str | None) -> None:
    if out:
        write_text(out, text)
    else:
        sys.stdout.write(text)


def cmd_solve(args: argparse.Namespace) -> int:
    from gpualloc.solvers import SCHEDULERS, build_plan, check_plan, compile_scenario

    problem = compile_scenario(load_scenario(args.scenario))
    t0 = time.perf_counter()
    if args.scheduler == "milp":
        from gpualloc.agent.reports.full_mode import solve_full_mode

        plan = solve_full_mode(problem, _milp_options(args))
    else:
        schedule = SCHEDULERS[args.scheduler](problem)
        plan = build_plan(problem, args.scheduler, schedule, (time.perf_counter() - t0) * 1000.0)
    _emit(dump_plan(plan), args.out)
    violations = check_plan(problem, plan.grid, args.scheduler)
    for v in violations:
        print(f"gpualloc: the {args.scheduler} plan breaks {v}", file=sys.stderr)
    return EXIT_ILLEGAL if violations else EXIT_OK


def _milp_options(args: argparse.Namespace):
    from gpualloc.agent.reports.full_mode import require_solver
    from gpualloc.solvers.policies.milp.model import MilpOptions

    require_solver(args.solver)
    return MilpOptions(solver=args.solver, time_limit=args.time_limit, node_limit=args.node_limit,
                       threads=args.threads, seed=args.seed, progress=args.progress)


def _add_milp_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("full mode (MILP)")
    g.add_argument("--solver", choices=("highs", "cbc"), default="highs")
    g.add_argument("--time-limit", type=_seconds, default=60.0, help="seconds per solve (default 60; 0: none)")
    g.add_argument("--node-limit", type=_positive, default=None,
                   help="branch-and-bound nodes: with --time-limit 0 a reproducible work limit")
    g.add_argument("--threads", type=_positive, default=1)
    g.add_argument("--seed", type=int, default=0, help="solver random seed")
    g.add_argument("--progress", action="store_true", help="stream the solver log (incumbent and bound) to stderr")


def _seconds(text: str) -> float | None:
    x = _number(text, float, 0, "a number of seconds >= 0")
    return None if x == 0 else x


def cmd_check(args: argparse.Namespace) -> int:
    from gpualloc.solvers import check_plan, compile_scenario

    scenario = load_scenario(args.scenario)
    plan = load_plan(args.plan, scenario)
    if plan.scenario != scenario.name:
        print(f"gpualloc: note: the plan names scenario {plan.scenario!r}, checked against "
              f"{scenario.name!r}", file=sys.stderr)
    violations = check_plan(compile_scenario(scenario), plan.grid, plan.scheduler)
    for v in violations:
        print(v)
    if violations:
        return EXIT_ILLEGAL
    print("legal")
    return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    from gpualloc.agent.reports.bench import run_bench

    if args.agent:
        return _bench_agent(args)
    report, scenarios = run_bench(args.dir, args.repeat, args.generated)
    if args.milp:
        from gpualloc.agent.reports.full_mode import bench_full_mode, record_best_known

        report.full_mode = bench_full_mode(scenarios, report, _milp_options(args))
        if args.update_best_known:
            for line in record_best_known(report.full_mode):
                print(line, file=sys.stderr)
    sys.stdout.write(dump_json(report.as_dict()) if args.json else report.table() + "\n")
    return report.exit_code


def _bench_agent(args: argparse.Namespace) -> int:
    """Sustained arrivals through a real broker (benchmarks/agent_throughput.py)."""
    import asyncio
    from dataclasses import asdict

    from gpualloc.agent.reports.throughput import measure

    if not args.bootstrap:
        raise InputError("--agent", ["needs --bootstrap HOST:PORT (make kafka-up starts a broker on 127.0.0.1:9092)"])
    result = asyncio.run(measure(args.bootstrap, args.rate, args.seconds))
    sys.stdout.write(dump_json(asdict(result)) if args.json else result.line() + "\n")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from gpualloc.agent.reports.demo import run_demo

    report, written = run_demo(args.out, args.repeat)
    print(report.table())
    print(f"\nwrote {len(written)} files to {Path(args.out).resolve()}:")
    for path in written:
        print(f"  {path}")
    return report.exit_code


def cmd_generate(args: argparse.Namespace) -> int:
    from gpualloc.schemas import Scenario
    from gpualloc.solvers.simulation.scenarios import generate_scenario

    try:
        data = generate_scenario(args.gpus, args.jobs, args.seed, horizon=args.horizon,
                                 gpus_per_node=args.gpus_per_node, name=args.name,
                                 swap_cap=args.swap_cap)
    except ValueError as e:
        raise InputError("generate", [str(e)]) from None
    Scenario.model_validate(data)  # the generator's promise; a breach is an internal error
    _emit(dump_json(data), args.out)
    return EXIT_OK


def cmd_simulate(args: argparse.Namespace) -> int:
    from gpualloc.agent.reports import simulation as sim_report
    from gpualloc.agent.traces import read_trace
    from gpualloc.solvers.simulation.simulator import SimOptions, executed_violations, report, simulate

    events = read_trace(args.trace)
    try:
        sim = simulate(events, SimOptions(policies=tuple(args.policy or ("fifo", "heuristic")), days=args.days,
                                          milp_every=args.milp_every, milp_node_limit=args.milp_nodes,
                                          milp_max_jobs=args.milp_jobs, milp_time_limit=args.milp_time_limit))
    except ValueError as e:
        raise InputError(args.trace, [str(e)]) from None
    rows = report(sim)
    sys.stdout.write(dump_json(sim_report.as_json(rows, sim)) if args.json else sim_report.table(rows, sim) + "\n")
    if args.chart:
        write_text(args.chart, sim_report.chart(rows))
    return EXIT_ILLEGAL if any(executed_violations(sim, run) for run in sim.runs.values()) else EXIT_OK


def cmd_trace(args: argparse.Namespace) -> int:
    from gpualloc.agent.traces import pollux_trace, write_trace
    from gpualloc.solvers.simulation.traces import generate_trace

    if args.source == "generate":
        events = generate_trace(args.gpus, args.days, args.jobs, args.apps, args.seed)
    else:
        events = pollux_trace(args.csv, args.gpus)
    write_trace(args.out, events)
    print(f"wrote {len(events)} events to {args.out}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpualloc", description="Constraint-aware GPU allocator.",
        epilog="exit codes: 0 ok, 1 illegal plan or failing bench, 2 bad input, 3 internal error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("solve", help="plan a scenario and print (or write) the plan JSON")
    p.add_argument("scenario", help="scenario JSON file")
    p.add_argument("--scheduler", choices=("fifo", "heuristic", "milp"), default="heuristic")
    p.add_argument("--out", help="write the plan here instead of stdout")
    _add_milp_arguments(p)
    p.set_defaults(func=cmd_solve)

    p = sub.add_parser("check", help="list the legality rules (R1-R5) a plan breaks")
    p.add_argument("scenario", help="scenario JSON file")
    p.add_argument("plan", help="plan JSON file")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("bench", help="FIFO vs heuristic on a folder of scenarios")
    p.add_argument("dir", nargs="?", default=None, help="folder of *.json scenarios (default: the bundled seven)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--repeat", type=_positive, default=5, help="timed runs per scheduler (p50 reported)")
    p.add_argument("--generated", type=_generated_spec, action="append", default=[], metavar="GPUSxJOBS[:SEED]",
                   help="also bench a generated scenario (seed 7 unless given), e.g. 1024x1000; repeatable")
    p.add_argument("--milp", action="store_true", help="also run full mode: objective, bound, gap, heuristic/MILP")
    p.add_argument("--agent", action="store_true", help="instead: arrivals per second through a real broker, with latency")
    p.add_argument("--bootstrap", metavar="HOST:PORT", help="the broker for --agent")
    p.add_argument("--rate", type=float, default=1000, help="--agent: arrivals per second offered (default 1000)")
    p.add_argument("--seconds", type=float, default=20, help="--agent: measured seconds (default 20)")
    p.add_argument("--update-best-known", action="store_true",
                   help="with --milp: record better objectives and bounds in the bundled best-known.json")
    _add_milp_arguments(p)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("demo", help="bench the bundled scenarios and write Gantt charts")
    p.add_argument("--out", default="demo-out", help="output folder (default: demo-out)")
    p.add_argument("--repeat", type=_positive, default=5, help="timed runs per scheduler")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("generate", help="write a random contended scenario")
    p.add_argument("--gpus", type=_positive, required=True)
    p.add_argument("--jobs", type=_positive, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--horizon", type=_positive, default=24)
    p.add_argument("--gpus-per-node", type=_positive, default=None)
    p.add_argument("--swap-cap", type=int, default=2)
    p.add_argument("--name", default=None)
    p.add_argument("--out", help="write the scenario here instead of stdout")
    p.set_defaults(func=cmd_generate)
    p = sub.add_parser("simulate", help="drive the planner core with a trace of contract events, per policy")
    p.add_argument("trace", help="JSONL file of contract events (see `gpualloc trace`)")
    p.add_argument("--policy", action="append", choices=("fifo", "heuristic", "heuristic+milp"),
                   help="repeatable (default: fifo and heuristic)")
    p.add_argument("--days", type=_positive, default=None, help="simulate this many days (default: the whole trace)")
    p.add_argument("--milp-every", type=_positive, default=6, help="steps between full-mode runs (heuristic+milp; default 6)")
    p.add_argument("--milp-nodes", type=_positive, default=50, help="full mode node limit per run, a work limit (default 50)")
    p.add_argument("--milp-jobs", type=_positive, default=20, help="queued jobs full mode plans (the most valuable; default 20)")
    p.add_argument("--milp-time-limit", type=float, default=10.0, help="seconds per full-mode run (default 10)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--chart", help="write an SVG chart of the days here")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("trace", help="write a trace: generated, or derived from a Pollux workload CSV")
    p.add_argument("source", choices=("generate", "pollux"))
    p.add_argument("csv", nargs="?", help="pollux: the workload CSV")
    p.add_argument("--out", required=True)
    p.add_argument("--gpus", type=_positive, default=64)
    p.add_argument("--days", type=_positive, default=7)
    p.add_argument("--jobs", type=_positive, default=1000)
    p.add_argument("--apps", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_trace)

    add_bus_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help (0) or a usage error (2), already printed by argparse
        return e.code if isinstance(e.code, int) else EXIT_INPUT
    try:
        return args.func(args)
    except InputError as e:
        print(f"gpualloc: {e}".replace("\n", "\ngpualloc: "), file=sys.stderr)
        return EXIT_INPUT
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # a bug, not bad input: say so briefly unless debugging
        if os.environ.get("GPUALLOC_DEBUG"):
            raise
        print(f"gpualloc: internal error: {type(e).__name__}: {e} (set GPUALLOC_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
