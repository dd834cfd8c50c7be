"""What every command's arguments share: checked number types, GPU ranges, and flags that set a
field of the configuration (`gpualloc.schemas.settings`), so flags, the environment and the
settings file meet in one place (`settings_of`)."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from pydantic import ValidationError

from gpualloc.agent.loading import InputError
from gpualloc.bus.clients import Broker
from gpualloc.schemas.errors import describe
from gpualloc.schemas.settings import Settings, SolveOptions, load_settings

SETTING = "setting:"  # argparse dest prefix of the flags that set a configuration field


def checked(convert: Callable[[str], Any], ok: Callable[[Any], bool], what: str):
    """An argparse type: `convert` the text, or an error naming the rule it breaks."""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
        return value

    return parse


positive_int = checked(int, lambda v: v >= 1, "an integer >= 1")
nonnegative_int = checked(int, lambda v: v >= 0, "an integer >= 0")
positive_float = checked(float, lambda v: v > 0, "a number > 0")
nonnegative_float = checked(float, lambda v: v >= 0, "a number of seconds >= 0")


def seconds_or_none(text: str) -> float | None:
    """Seconds >= 0, where 0 means no limit (None)."""
    return nonnegative_float(text) or None


def generated_spec(text: str) -> tuple[int, int, int]:
    """`1024x1000` or `1024x1000:3` -> (gpus, jobs, seed)."""
    try:
        size, _, seed = text.partition(":")
        gpus, jobs = (int(x) for x in size.lower().split("x"))
        if gpus < 1 or jobs < 1:
            raise ValueError
        return gpus, jobs, int(seed) if seed else 7
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected GPUSxJOBS[:SEED] with positive sizes, got {text!r}") from None


def gpu_range(text: str) -> range:
    """`8-15` (inclusive, pool-global) or `3` -> a range."""
    first, sep, last = text.partition("-")
    try:
        lo, hi = int(first), int(last) if sep else int(first)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected FIRST-LAST pool-global GPU indices like 8-15, got {text!r}"
        ) from None
    if lo < 0 or hi < lo:
        raise argparse.ArgumentTypeError(f"expected 0 <= FIRST <= LAST, got {text!r}")
    return range(lo, hi + 1)


# ---- flags that set configuration fields --------------------------------------------------------


def default_of(path: str) -> Any:
    """The configuration default at a dotted path (`agent.step_seconds`), environment unread."""
    head, *rest = path.split(".")
    value = Settings.model_fields[head].default
    for name in rest:
        value = getattr(value, name)
    return value


def setting(
    p: argparse.ArgumentParser | argparse._ArgumentGroup,
    *flags: str,
    path: str,
    help: str,
    shown: str | None = None,
    **kwargs: Any,
) -> None:
    """A flag that sets configuration field `path`; unset, the environment, file or default decide.
    `shown`: how to print the default in the help when its value would not say it."""
    default = shown if shown is not None else default_of(path)
    if kwargs.get("action") is None:
        kwargs.setdefault("metavar", flags[0].lstrip("-").replace("-", "_").upper())
    p.add_argument(
        *flags,
        dest=SETTING + path,
        default=argparse.SUPPRESS,
        help=f"{help} (default: {default}; {env_name(path)})",
        **kwargs,
    )


def env_name(path: str) -> str:
    return "GPUALLOC_" + path.replace(".", "__").upper()


def settings_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--settings",
        metavar="FILE",
        help="settings file, JSON or TOML (default: $GPUALLOC_SETTINGS); flags and GPUALLOC_* variables override it",
    )


def bus_arguments(p: argparse.ArgumentParser, pool: bool = True) -> None:
    """Where the bus is (every Kafka command takes these) and, for the agents, which pool."""
    setting(
        p,
        "--bootstrap",
        path="bootstrap",
        metavar="HOST:PORT",
        shown="$KAFKA_BOOTSTRAP_SERVERS",
        help="Kafka bootstrap servers",
    )
    setting(
        p,
        "--topic-prefix",
        path="topic_prefix",
        metavar="P",
        shown="none",
        help="prefix for every topic name (isolated runs)",
    )
    if pool:
        setting(p, "--pool", path="pool", help="the pool's name")
    settings_arguments(p)


def settings_of(args: argparse.Namespace) -> Settings:
    """The configuration: the flags given, then GPUALLOC_* variables, then the settings file."""
    flags: dict[str, Any] = {}
    for dest, value in vars(args).items():
        if dest.startswith(SETTING):
            *parents, name = dest[len(SETTING) :].split(".")
            node = flags
            for parent in parents:
                node = node.setdefault(parent, {})
            node[name] = value
    try:
        return load_settings(flags, getattr(args, "settings", None))
    except ValidationError as e:
        raise InputError("settings", describe(e)) from None
    except ValueError as e:
        raise InputError("settings", [str(e)]) from None


def bootstrap_of(settings: Settings) -> Broker:
    """The broker of a bus command: the bootstrap servers, with the security (`settings.kafka`)
    every one of its Kafka clients uses (the one place every bus command passes)."""
    if not settings.bootstrap:
        raise InputError(
            "--bootstrap",
            ["give HOST:PORT, or set KAFKA_BOOTSTRAP_SERVERS (make kafka-up starts a broker on 127.0.0.1:9092)"],
        )
    return Broker(settings.bootstrap, settings.kafka)


# ---- the solve options (solve, bench full-mode) ------------------------------------------------

FULL_MODE_FLAGS = {
    "--solver": "solve.full_mode.solver",
    "--time-limit": "solve.full_mode.time_limit",
    "--node-limit": "solve.full_mode.node_limit",
    "--threads": "solve.full_mode.threads",
    "--seed": "solve.full_mode.seed",
    "--progress": "solve.full_mode.progress",
}


def full_mode_arguments(p: argparse.ArgumentParser) -> None:
    """The full-mode (MILP) solve options, the heuristic's effort and --settings."""
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


def solve_options(args: argparse.Namespace, full_mode: bool) -> SolveOptions:
    """The configured solve options; with full mode, its solver must be installed here, and
    without it a full-mode flag is a mistake, not something to ignore."""
    options = settings_of(args).solve
    given = sorted(flag for flag, dest in FULL_MODE_FLAGS.items() if SETTING + dest in vars(args))
    if given and not full_mode:
        raise InputError(
            ", ".join(given),
            ["full-mode options: give --scheduler full-mode, or drop them"],
        )
    if full_mode:
        from gpualloc.solvers.policies.milp.backends import solver_available

        name = options.full_mode.solver
        if not solver_available(name):
            hint = "apt-get install coinor-cbc" if name == "cbc" else "pip install highspy"
            raise InputError("--solver", [f"{name} is not available on this machine ({hint})"])
    return options
