"""`gpualloc`: a thin argparse layer over the core and the shell, one module per command group:
`offline` (solve, check, generate, demo, simulate, trace, ...), `bench` (`gpualloc bench NAME`,
one subcommand a bench), `bus` (agent, node-agent, publish, tail, audit, explain) and `operate`
(drain, cancel, fail, complete, configure, resize, register-app, submit: one event each); `arguments`
holds the shared argument types, the flags that set configuration fields and the broker of the
bus commands, `running` the one run-until-signal helper.

Exit codes, one per kind of failure whatever the command: 0 success (a legal plan, a passing
bench or audit, a bus command stopped by SIGTERM/SIGINT); 1 an illegal plan, a failing bench or
audit, a submission no decision answered in time; 2 bad input (unreadable file, invalid JSON,
schema violation, plan of the wrong shape, a submission the agent dead-lettered, a configuration
the agent would refuse or that would fail work without `--force`, bad arguments
or settings, a broker still unreachable when the start's retries run out, named
`--bootstrap`, or one refusing the login or TLS setup, named by the `kafka.*` setting to fix,
a pool whose snapshot or ledger a newer release wrote), reported on stderr naming the field
and the rule; 3 an internal error (set GPUALLOC_DEBUG=1 for
the traceback); 4 a submission the agent decided `rejected` (docs/cli.md, "Exit codes").
"""

from __future__ import annotations

import argparse
import os
import sys

from gpualloc.agent.cli.bench import implied
from gpualloc.agent.cli.bus import add_bus_commands
from gpualloc.agent.cli.offline import add_offline_commands
from gpualloc.agent.cli.operate import add_operator_commands
from gpualloc.agent.loading import InputError
from gpualloc.solvers.release import NewerRelease, release_words

EXIT_OK, EXIT_INPUT, EXIT_INTERNAL = 0, 2, 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpualloc",
        description="Constraint-aware GPU allocator.",
        epilog="exit codes: 0 ok, 1 illegal plan, failing bench or no decision in time, 2 bad input or dead letter, "
        "3 internal error, 4 job rejected",
    )
    parser.add_argument("--version", action="version", version=release_words())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_offline_commands(sub)
    add_bus_commands(sub)
    add_operator_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(implied(sys.argv[1:] if argv is None else argv))
    except SystemExit as e:  # --help (0) or a usage error (2), already printed by argparse
        return e.code if isinstance(e.code, int) else EXIT_INPUT
    try:
        return args.func(args)
    except InputError as e:
        print(f"gpualloc: {e}".replace("\n", "\ngpualloc: "), file=sys.stderr)
        return EXIT_INPUT
    except NewerRelease as e:  # status, explain, audit over what a newer release wrote
        print(f"gpualloc: {e}", file=sys.stderr)
        return EXIT_INPUT
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # a bug, not bad input: say so briefly unless debugging
        if os.environ.get("GPUALLOC_DEBUG"):
            raise
        print(
            f"gpualloc: internal error: {type(e).__name__}: {e} (set GPUALLOC_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
