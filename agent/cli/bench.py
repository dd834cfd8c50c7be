"""`gpualloc bench NAME`: one subcommand a bench of benchmarks/, each with its own options.
Offline: `scenarios` (FIFO against the heuristic on a folder of scenarios; `gpualloc bench` with
no NAME runs it), `full-mode`, `corpus`, `native`, `forecast`, `hot-path`, `sizing`, `traces`, `serving`. Through a real broker
(`--bootstrap`, security from the settings): `agent`, `recovery`, `scale`, `soak`."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Coroutine

from gpualloc.agent.cli.arguments import (
    bootstrap_of,
    checked,
    full_mode_arguments,
    generated_spec,
    positive_float,
    positive_int,
    setting,
    settings_arguments,
    settings_of,
    solve_options,
)
from gpualloc.agent.loading import InputError, dump_json, write_text
from gpualloc.bus.clients import Broker
from gpualloc.schemas.limits import LIMITS

EXIT_OK, EXIT_FAILED = 0, 1
_step_seconds = checked(float, lambda v: v > 0, "seconds > 0")
DEFAULT = "scenarios"  # the bench of `gpualloc bench` with no NAME


def implied(argv: list[str]) -> list[str]:
    """`argv` with the default bench named: `bench [DIR] [options]` is `bench scenarios [DIR]
    [options]` (so `gpualloc bench` and `make bench` run it); `bench -h` lists the benches."""
    if argv[:1] != ["bench"] or (len(argv) > 1 and argv[1] in (*BENCHES, "-h", "--help")):
        return argv
    return ["bench", DEFAULT, *argv[1:]]


# ---- offline benches ------------------------------------------------------------------------------


def cmd_scenarios(args: argparse.Namespace) -> int:
    """`scenarios` and `full-mode`: the heuristic against FIFO on every scenario, and for
    `full-mode` each scenario's full-mode solve as well."""
    from gpualloc.benchmarks.scenario_bench import run_bench

    options = solve_options(args, True) if args.full_mode else None
    report, scenarios = run_bench(args.dir, args.repeat, args.generated)
    if options is not None:
        from gpualloc.benchmarks.full_mode import bench_full_mode, record_best_known

        report.full_mode = bench_full_mode(scenarios, options)
        if args.update_best_known:
            for line in record_best_known(report.full_mode):
                print(line, file=sys.stderr)
    sys.stdout.write(dump_json(report.as_dict()) if args.json else report.table() + "\n")
    return report.exit_code


def cmd_corpus(args: argparse.Namespace) -> int:
    from gpualloc.agent.renderers.progress import Progress
    from gpualloc.benchmarks.corpus_bench import run_corpus_bench

    report = run_corpus_bench(args.split, args.repeat, progress=Progress("bench corpus", "scenarios"))
    sys.stdout.write(dump_json(report.as_dict()) if args.json else report.table() + "\n")
    return report.exit_code


def cmd_forecast(args: argparse.Namespace) -> int:
    from gpualloc.benchmarks.forecast_bench import run_forecast_bench

    bench = run_forecast_bench(
        args.seeds, settings_of(args).simulation.forecast, args.generators, args.real, args.real_only
    )
    sys.stdout.write(dump_json(bench.as_dict()) if args.json else bench.table() + "\n")
    return EXIT_OK


def _generator_names(text: str) -> list[str]:
    from gpualloc.benchmarks.forecast_bench import GENERATORS

    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in GENERATORS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown generator {unknown or text!r}; known: {', '.join(GENERATORS)}")
    return names


def cmd_hot_path(args: argparse.Namespace) -> int:
    from gpualloc.benchmarks.hot_path import measure_hot_path

    hot = measure_hot_path(queued=args.queued)
    sys.stdout.write(dump_json(hot.as_dict()) if args.json else hot.line() + "\n")
    return EXIT_OK


def cmd_sizing(args: argparse.Namespace) -> int:
    from gpualloc.benchmarks.sizing_bench import measure_sizing

    result = measure_sizing(samples=args.samples)
    sys.stdout.write(dump_json(result.as_dict()) if args.json else result.line() + "\n")
    return EXIT_OK


def cmd_native(args: argparse.Namespace) -> int:
    from gpualloc.benchmarks import native_bench

    try:
        rows = native_bench.run_native_bench(args.dir, args.repeat, args.generated or [(1024, 1000, 7)])
    except RuntimeError as e:
        sys.stderr.write(f"gpualloc bench native: {e}\n")
        return EXIT_FAILED
    sys.stdout.write(
        dump_json(native_bench.as_dict(rows)) if args.json else native_bench.table(rows, args.repeat) + "\n"
    )
    return EXIT_OK if all(r.same_plan for r in rows) else EXIT_FAILED


def cmd_traces(args: argparse.Namespace) -> int:
    from gpualloc.agent.renderers.progress import Progress
    from gpualloc.benchmarks import real_traces, trace_bench

    tables = None
    if args.real:
        tables = Path(args.tables) if args.tables else real_traces.TABLES
        if not real_traces.present(tables):
            raise InputError(
                str(tables),
                [
                    "--real: no job-table window is here ("
                    + ", ".join(p for _, p in real_traces.WINDOWS.values())
                    + "; "
                    "benchmarks/traces/README.md says how to make them)"
                ],
            )
    rows = trace_bench.run_trace_bench(
        args.load,
        tuple(args.starvation_steps or (48, 24, 12)),
        args.week,
        progress=Progress("bench traces", "traces"),
        include_openb=args.openb,
        tables=tables,
        completion=args.completion,
    )
    sys.stdout.write(dump_json(trace_bench.as_dict(rows)) if args.json else trace_bench.table(rows) + "\n")
    if args.chart:
        write_text(args.chart, trace_bench.chart(rows))
    if args.wait_charts:
        try:
            Path(args.wait_charts).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(args.wait_charts, [f"cannot make the folder: {e.strerror or e}"]) from None
        for name, svg in trace_bench.wait_charts(rows).items():
            write_text(f"{args.wait_charts}/wait-{name}.svg", svg)
    return EXIT_OK


def cmd_serving(args: argparse.Namespace) -> int:
    from gpualloc.agent.renderers.progress import Progress
    from gpualloc.benchmarks import serving_targets

    names = list(serving_targets.SETS) if args.set == "all" else [args.set]
    count = sum(len(serving_targets.SETS[name]) for name in names)
    progress, done = Progress("bench serving", "traces"), itertools.count(1)

    def step(trace: str) -> None:
        progress("bench serving", next(done), count)

    run_with = serving_targets.options(settings_of(args).simulation)
    sets = serving_targets.run_serving_targets(names, run_with, step, args.strip_profiles)
    sys.stdout.write(dump_json(serving_targets.as_dict(sets)) if args.json else serving_targets.table(sets) + "\n")
    return EXIT_FAILED if any(r.violations for rows in sets.values() for r in rows) else EXIT_OK


# ---- through a real broker --------------------------------------------------------------------------


def _on_broker(args: argparse.Namespace, bench: Callable[[Broker], Coroutine[Any, Any, Any]]) -> Any:
    """Run `bench` on the configured broker and print its result (JSON with --json, else its line)."""
    result: Any = asyncio.run(bench(bootstrap_of(settings_of(args))))
    sys.stdout.write(dump_json(asdict(result)) if args.json else result.line() + "\n")
    return result


def cmd_agent(args: argparse.Namespace) -> int:
    from gpualloc.benchmarks.throughput import measure

    _on_broker(
        args,
        lambda bootstrap: measure(
            bootstrap, args.rate, args.seconds, step_seconds=args.step_seconds, null_agent=args.null_agent
        ),
    )
    return EXIT_OK


def cmd_recovery(args: argparse.Namespace) -> int:
    from gpualloc.benchmarks.recovery import measure_recovery

    _on_broker(args, lambda bootstrap: measure_recovery(bootstrap, args.queued, args.repeat))
    return EXIT_OK


def cmd_soak(args: argparse.Namespace) -> int:
    """Exit 1 when the soak misses its targets."""
    from gpualloc.benchmarks.soak import soak

    try:
        result = _on_broker(args, lambda bootstrap: soak(bootstrap, args.events, args.rate))
    except ValueError as e:
        raise InputError("--events", [str(e)]) from None
    return EXIT_OK if result.ok else EXIT_FAILED


def cmd_scale(args: argparse.Namespace) -> int:
    from gpualloc.benchmarks.scale import SIZES, measure_sizes

    _on_broker(
        args,
        lambda bootstrap: measure_sizes(
            bootstrap,
            tuple(args.gpus or SIZES),
            apps=args.apps,
            queued=args.queued,
            rate=args.rate,
            seconds=args.seconds,
            step_seconds=args.step_seconds,
            horizon=args.horizon,
            full_mode=args.full_mode,
            id_chars=args.id_chars,
            node_gpus=args.gpus_per_node,
        ),
    )
    return EXIT_OK


# ---- the parser ---------------------------------------------------------------------------------


def _json(p: argparse.ArgumentParser, what: str = "the result", instead: str = "a line") -> None:
    p.add_argument("--json", action="store_true", help=f"print {what} as JSON instead of {instead}")


def _number(p: argparse.ArgumentParser, flag: str, default: float, help: str, type: Any = positive_int) -> None:
    """An option of a number > 0 whose help says its default."""
    p.add_argument(flag, type=type, default=default, help=f"{help} (default {default})")


def _arrivals(p: argparse.ArgumentParser, rate: float, seconds_help: str, step_seconds: float, step_shown: str) -> None:
    """The pace of a bench's arrivals (20 seconds of them) and of the agent's compressed clock."""
    _number(p, "--rate", rate, "arrivals per second offered", positive_float)
    _number(p, "--seconds", 20, seconds_help, positive_float)
    p.add_argument(
        "--step-seconds",
        type=_step_seconds,
        default=step_seconds,
        help=f"the agent's compressed step, a commit every this many seconds (default {step_shown})",
    )


def _scenario_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", nargs="?", default=None, help="folder of *.json scenarios (default: the bundled seven)")
    _json(p, "the report", "a table")
    _number(p, "--repeat", 5, "timed runs per scheduler, p50 reported")
    p.add_argument(
        "--generated",
        type=generated_spec,
        action="append",
        default=[],
        metavar="GPUSxJOBS[:SEED]",
        help="also bench a generated scenario (seed 7 unless given), e.g. 1024x1000; repeatable",
    )


def _broker_arguments(p: argparse.ArgumentParser) -> None:
    setting(
        p,
        "--bootstrap",
        path="bootstrap",
        metavar="HOST:PORT",
        shown="$KAFKA_BOOTSTRAP_SERVERS",
        help="the Kafka broker the bench runs through",
    )
    settings_arguments(p)


def _add(
    benches: argparse._SubParsersAction, name: str, help: str, func: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    """Bench `name`, run by `func`; `help` (%-escaped, as argparse wants) is its description too."""
    text = help.replace("%%", "%")
    p = benches.add_parser(name, help=help, description=text[0].upper() + text[1:] + ".")
    p.set_defaults(func=func)
    return p


def _broker_bench(
    benches: argparse._SubParsersAction, name: str, help: str, func: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    """A bench through a real broker: --bootstrap, --settings (the broker's security) and --json."""
    p = _add(benches, name, help, func)
    _broker_arguments(p)
    _json(p)
    return p


BENCHES = (
    "scenarios",
    "full-mode",
    "corpus",
    "native",
    "forecast",
    "hot-path",
    "sizing",
    "agent",
    "recovery",
    "scale",
    "soak",
    "traces",
    "serving",
)


def add_bench_command(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser(
        "bench",
        help="the benches: FIFO vs heuristic on a folder of scenarios (the default), and the others by NAME",
        description="Run one bench. With no NAME, `gpualloc bench [DIR] [options]` is "
        "`gpualloc bench scenarios [DIR] [options]`. Exit 1 when a bench fails its checks.",
    )
    benches = bench.add_subparsers(dest="bench", required=True, metavar="NAME")

    p = _add(
        benches, "scenarios", "FIFO vs the heuristic on a folder of scenarios (value, utilization, p50)", cmd_scenarios
    )
    _scenario_arguments(p)
    p.set_defaults(full_mode=False)

    p = _add(
        benches,
        "full-mode",
        "the scenarios bench with full mode (MILP) as well: objective, bound, gap, heuristic/full mode",
        cmd_scenarios,
    )
    _scenario_arguments(p)
    p.add_argument(
        "--update-best-known",
        action="store_true",
        help="record better objectives and bounds in the bundled best-known.json",
    )
    full_mode_arguments(p)
    p.set_defaults(full_mode=True)

    p = _add(benches, "corpus", "the heuristic and the greedy against the corpus's proven optima", cmd_corpus)
    p.add_argument(
        "--split",
        choices=("tune", "heldout", "all"),
        default="heldout",
        help="which half of the corpus (default heldout: the half no tuning saw)",
    )
    _number(p, "--repeat", 5, "timed runs per scheduler, p50 reported")
    _json(p, "the report", "a table")

    p = _add(
        benches,
        "native",
        "the compiled heuristic against its Python reference: p50 each, speed-up, the same plans",
        cmd_native,
    )
    _scenario_arguments(p)

    p = _add(
        benches,
        "forecast",
        "the forecasters' backtests over seeds of the ground-truth generators, against targets",
        cmd_forecast,
    )
    _number(p, "--seeds", 3, "generator seeds 0..N-1")
    p.add_argument(
        "--generators",
        type=_generator_names,
        default=None,
        help="comma-separated ground-truth generators (default all: synthetic, truth_catalogue, truth_heldout)",
    )
    p.add_argument(
        "--real",
        action="store_true",
        help="then the forecasters against the fine-tuning runs measured on an H200 (benchmarks/real): cold, "
        "warm, leave one model out, per GPU type",
    )
    p.add_argument("--real-only", action="store_true", help="the real runs' section alone (no generators)")
    settings_arguments(p)
    _json(p, "the backtests", "a table")

    p = _add(
        benches,
        "hot-path",
        "one arrival's decision in the planner core, 64 GPUs and a standing queue (p50, p99)",
        cmd_hot_path,
    )
    _number(p, "--queued", 240, "jobs waiting in the pool")
    _json(p, "the timings")

    p = _add(
        benches,
        "sizing",
        "one arrival given by its features sized on a pool of 4,096 GPUs (every power of two asked)",
        cmd_sizing,
    )
    _number(p, "--samples", 25, "samples, each the mean of 20 rounds of the job mix")
    _json(p, "the timings")

    p = _broker_bench(benches, "agent", "arrivals per second through a real broker, with decision latency", cmd_agent)
    _arrivals(p, 1000, "measured seconds", 2.0, "2")
    p.add_argument(
        "--null-agent",
        action="store_true",
        help="through an agent that plans nothing (one transaction a poll): the floor the "
        "broker, the clients and the machine set",
    )

    p = _broker_bench(
        benches,
        "recovery",
        "seconds from a killed agent's restart to its first decision, through a real broker",
        cmd_recovery,
    )
    _number(p, "--queued", 1000, "jobs waiting in the pool")
    _number(p, "--repeat", 5, "restarts measured")

    p = _broker_bench(
        benches,
        "scale",
        "the agent on pools of 256 to 4,096 GPUs with apps and a backlog (30%% given by features) "
        "through a real broker: decision latency, boundaries, record bytes, RSS, status, recovery "
        "after SIGKILL, SIGTERM",
        cmd_scale,
    )
    p.add_argument(
        "--gpus",
        type=positive_int,
        action="append",
        metavar="N",
        help="a pool size; repeatable (default 256, 1024, 4096)",
    )
    p.add_argument(
        "--apps",
        type=checked(int, lambda v: v >= 0, "0 or more"),
        default=3,
        help="real-time apps registered (default 3)",
    )
    _number(p, "--queued", 2000, "the backlog: jobs sent first")
    _arrivals(
        p,
        100,
        "seconds of arrivals a size",
        10.0,
        "10: a quarter step leaves the plan made ahead of a boundary its time",
    )
    _number(p, "--horizon", 48, "the pool's horizon in steps")
    p.add_argument(
        "--gpus-per-node",
        type=positive_int,
        default=8,
        help="GPUs a node (a power of two dividing every --gpus; default 8)",
    )
    p.add_argument(
        "--id-chars",
        type=checked(int, lambda v: 0 <= v <= LIMITS.id_chars, f"0 to {LIMITS.id_chars}"),
        default=0,
        help="pad the backlog's job ids to this many characters (the contract's limit is the most)",
    )
    p.add_argument("--full-mode", action="store_true", help="with the agent's full mode on")

    p = _broker_bench(
        benches,
        "soak",
        "a long compressed-clock run through a real broker: the agent's RSS growth and its lag at "
        "the end (exit 1 when it misses its targets)",
        cmd_soak,
    )
    _number(p, "--events", 100_000, "input records sent")
    _number(p, "--rate", 1000, "records per second", positive_float)

    p = _add(
        benches,
        "traces",
        "FIFO, the heuristic and the heuristic with starvation bounds over whole traces (the eight "
        "Pollux workloads; --week adds the bundled week), on pools sized to --load",
        cmd_traces,
    )
    p.add_argument(
        "--load",
        type=float,
        default=1.25,
        help="offered work over the pool's capacity up to the last arrival (default 1.25)",
    )
    p.add_argument(
        "--starvation-steps",
        type=positive_int,
        action="append",
        metavar="B",
        help="a starvation bound to run the heuristic with; repeatable (default 48, 24, 12)",
    )
    p.add_argument("--week", action="store_true", help="add the bundled week (1,000 jobs; minutes)")
    p.add_argument(
        "--openb",
        action="store_true",
        help="add the bundled openb window (486 pods of the Alibaba 2023 trace over 2 days)",
    )
    p.add_argument(
        "--completion",
        action="store_true",
        help="add the heuristic under the completion value model: with the trace's starvation bound, and with "
        "reservations that bind for the oldest job waiting a step (reserved_jobs 1, bound 1)",
    )
    p.add_argument(
        "--real",
        action="store_true",
        help="add the windows of real clusters' job tables found in --tables (Philly, Acme)",
    )
    p.add_argument(
        "--tables",
        metavar="DIR",
        help="where the job tables' cuts are (third-party data kept outside the repository; default ../shared/traces)",
    )
    p.add_argument("--chart", help="write the trade-off (value kept against p99 wait, per bound) here (SVG)")
    p.add_argument("--wait-charts", metavar="DIR", help="write each trace's wait by job size here (wait-TRACE.svg)")
    _json(p, "the rows", "a table")

    p = _add(
        benches,
        "serving",
        "FIFO against the heuristic on the 26 tuned, 13 held-out and 27 unseen serving and generated traces and "
        "8 of an independent generator, judged by the real-time targets (shortfall, timely value, completions); "
        "1-5 minutes",
        cmd_serving,
    )
    p.add_argument(
        "--set",
        choices=["tuned", "held-out", "unseen", "independent", "all"],
        default="all",
        help="which traces (default: all)",
    )
    setting(
        p,
        "--node-reserve",
        path="simulation.forecast.realtime_node_reserve",
        action="store_const",
        const=True,
        help="plan the apps to lose any one node and keep their medians (the heuristic; FIFO reserves anyway)",
    )
    p.add_argument(
        "--strip-profiles",
        choices=["none", "first", "all"],
        default="none",
        help="register the first app of each trace, or every app, without its profile (default: none)",
    )
    settings_arguments(p)
    _json(p, "each set's summary and every trace's rows, with each app's served share per day", "a table")
    assert set(benches.choices) == set(BENCHES), "BENCHES names every bench (`implied` reads it)"
