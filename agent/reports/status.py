"""`gpualloc status`: the live pool, read back from the bus as a restarted agent would.

The state is the pool's latest snapshot and the ledger's transactions after it, replayed through
the planner core (`recovery.read_history` and `rebuild`), so it is exact as of the last committed
transaction, whatever process asks. From it: the latest commit's grid as a text Gantt (who holds
which GPUs now and in the steps ahead), the running jobs, the queue with what each job would be
told now (its action, promised start and reason, from one fresh plan), the apps' demand against
what they hold, and the nodes: up, drained or down, with their node agents' last reports.
`view` is pure (a dict, also the `--json` output); `lines` renders it.
"""

from __future__ import annotations

import string
from datetime import datetime
from typing import Any

from aiokafka import TopicPartition

from gpualloc.agent import kafka_clients
from gpualloc.agent.metrics import gpu_states
from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.agent.service.recovery import partition_counts, partitions, read_history, read_range, rebuild, reader
from gpualloc.agent.topics import Topics, decode
from gpualloc.agent.upstream import span
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.snapshot import SnapshotError
from gpualloc.solvers.planner.state import Planner
from gpualloc.solvers.problem import bits_of

TAIL = 500  # records read back per partition of the commits and bindings topics
SYMBOLS = string.ascii_lowercase + string.ascii_uppercase + string.digits  # one per holder in the Gantt


async def read_status(bootstrap: str, topics: Topics, pool: str) -> dict[str, Any] | None:
    """The pool's `view` from the bus; None when the ledger has never seen the pool."""
    names = [topics.state, topics.ledger, *topics.inputs, topics.commits]
    counts = await partition_counts(bootstrap, names)
    consumer = await kafka_clients.started(reader(bootstrap), "status reader")
    try:
        history = await read_history(consumer, topics, counts, pool)
        dispatcher = Dispatcher(pool, topics, Pool())
        try:
            rebuild(dispatcher, history)
        except SnapshotError:  # written by another release: replay the whole ledger instead
            history = await read_history(consumer, topics, counts, pool, use_snapshot=False)
            dispatcher = Dispatcher(pool, topics, Pool())
            rebuild(dispatcher, history)
        tails = await _tails(consumer, [tp for name in (topics.commits, topics.bindings)
                                        for tp in partitions(counts, name)])
    finally:
        await consumer.stop()
    if dispatcher.planner is None:
        return None
    messages = [m for m in tails if m.get("pool", "default") == pool]
    # the commit of the rebuilt state (the tail, read after the ledger, may hold later ones)
    commits = [m for m in messages if m.get("type") == "plan.committed" and m["payload"].get("seq", 0) <= dispatcher.seq]
    latest = max(commits, key=lambda m: m["payload"].get("seq", 0))["payload"] if commits else None
    reports = [m for m in messages if m.get("type") == "binding.reported"]
    return view(pool, dispatcher.planner, latest, reports, dispatcher.interpreter.origin)


async def _tails(consumer, tps: list[TopicPartition]) -> list[dict[str, Any]]:
    """The last TAIL committed messages of each partition, decoded (unreadable ones skipped)."""
    if not tps:
        return []
    ends = await consumer.end_offsets(tps)
    out = []
    for r in await read_range(consumer, {tp: max(0, ends[tp] - TAIL) for tp in tps}):
        try:
            message = decode(r.value) if r.value is not None else None
        except ValueError:
            continue
        if isinstance(message, dict):
            out.append(message)
    return out


def view(pool: str, planner: Planner, commit: dict[str, Any] | None, reports: list[dict[str, Any]],
         origin: datetime | None = None) -> dict[str, Any]:
    """The status of a pool (plain JSON data): `commit` is the latest `plan.committed` payload,
    `reports` the node agents' recent `binding.reported` messages in publication order."""
    cfg = planner.config
    assignments = {owner: list(gpus) for owner, gpus in (commit or {}).get("assignments", {}).items()}
    held = {owner: len(gpus) for owner, gpus in assignments.items()}
    grid = (commit or {}).get("grid", [])
    running = [{"id": job_id, "kind": spec.kind, "priority": spec.priority, "gpus": span(bits_of(mask)),
                "started": start, "ends": start + spec.duration, "forecast": spec.forecast is not None}
               for job_id, (spec, mask, start) in sorted(planner.running.items(), key=lambda kv: (kv[1][2], kv[0]))]
    queue = []
    for d in planner.outlook():
        spec = planner.queued[d.job_id]
        queue.append({"id": d.job_id, "kind": spec.kind, "priority": spec.priority, "gpus": spec.gpus,
                      "duration": spec.duration, "submitted": spec.submitted, "action": d.action,
                      "promised_start": d.start_step, "promised_gpus": span(list(d.gpus)), "reason": d.reason})
    queue.sort(key=lambda q: (q["promised_start"] is None, q["promised_start"] or 0, -q["priority"], q["id"]))
    apps = []
    for app_id, app in sorted(planner.apps.items()):
        demand = planner.window_demand(app_id)
        now = demand[0] if demand else 0
        apps.append({"id": app_id, "priority": app.priority, "min_gpus": app.min_gpus, "max_gpus": app.max_gpus,
                     "demand": now, "held": held.get(app_id, 0),
                     "shortfall": max(0, min(now, app.max_gpus or cfg.gpus) - held.get(app_id, 0)),
                     "demand_ahead": demand})
    state_of = {"down": planner.down, "drained": planner.drained}
    last: dict[int, dict[str, Any]] = {}
    for m in reports:
        p = m.get("payload") or {}
        if isinstance(p.get("node"), int):
            last[p["node"]] = {"at": m.get("occurred_at"), "job_id": p.get("job_id"), "status": p.get("status")}
    nodes = []
    busy = {g for owned in assignments.values() for g in owned}
    for n in range(cfg.gpus // cfg.node_size):
        gpus = list(range(n * cfg.node_size, (n + 1) * cfg.node_size))
        mask = sum(1 << g for g in gpus)
        state = next((s for s, m in state_of.items() if m & mask), "up")
        nodes.append({"node": n, "gpus": span(gpus), "state": state, "busy": len(busy.intersection(gpus)),
                      "last_report": last.get(n)})
    return {
        "pool": pool, "gpus": cfg.gpus, "gpus_per_node": cfg.node_size, "step_minutes": cfg.step_minutes,
        "now": planner.now, "origin": origin.isoformat() if origin else None,
        "commit": None if commit is None else {k: commit.get(k) for k in ("step", "seq", "source", "objective",
                                                                          "bound", "step_start", "full_mode")},
        "usage": gpu_states(assignments, planner.apps, cfg.gpus, planner.down.bit_count()),
        "grid": grid, "running": running, "queue": queue, "apps": apps, "nodes": nodes,
    }


def gantt(grid: list[list[str | None]], first_step: int, width: int = 48) -> list[str]:
    """The grid (GPU x step) as text: one row per run of GPUs with the same plan, one column a
    step (the first `width`), a symbol per holder ('.' idle), and the legend."""
    if not grid:
        return ["(no commit yet)"]
    steps = min(width, len(grid[0]))
    owners = sorted({o for row in grid for o in row[:steps] if o is not None})
    symbol = {o: SYMBOLS[k] if k < len(SYMBOLS) else "#" for k, o in enumerate(owners)}
    rows: list[tuple[int, int, str]] = []
    for g, row in enumerate(grid):
        text = "".join("." if o is None else symbol[o] for o in row[:steps])
        if rows and rows[-1][2] == text:
            rows[-1] = (rows[-1][0], g, text)
        else:
            rows.append((g, g, text))
    label = max(len(f"GPUs {a}-{b}") for a, b, _ in rows)
    ruler = "".join(str((first_step + t) % 10) if (first_step + t) % 5 == 0 else " " for t in range(steps))
    out = [f"{'step':<{label}} |{ruler}|  from step {first_step}"]
    out += [f"{(f'GPU {a}' if a == b else f'GPUs {a}-{b}'):<{label}} |{text}|" for a, b, text in rows]
    legend = ", ".join(f"{symbol[o]}={o}" for o in owners[:len(SYMBOLS)])
    more = len(owners) - len(SYMBOLS)
    out.append("legend: " + (legend or "all idle") + (f", #={more} more" if more > 0 else ""))
    return out


def lines(status: dict[str, Any], width: int = 48) -> list[str]:
    """`gpualloc status` as text."""
    c, u = status["commit"], status["usage"]
    head = (f"pool {status['pool']}: {status['gpus']} GPUs ({status['gpus_per_node']} a node), step {status['now']}"
            f" of {status['step_minutes']} min")
    if c:
        head += f"; last commit step {c['step']} seq {c['seq']} ({c['source']}, objective {c['objective']:.2f})"
    out = [head, f"GPUs: {u['batch']} batch, {u['realtime']} real-time, {u['idle']} idle, {u['down']} down", ""]
    out += gantt(status["grid"], c["step"] if c else status["now"], width)
    out += ["", f"running ({len(status['running'])}):"]
    out += [f"  {r['id']:<16} GPUs {r['gpus']:<9} steps {r['started']}-{r['ends'] - 1}  priority {r['priority']:g}"
            for r in status["running"]] or ["  none"]
    out += ["", f"queue ({len(status['queue'])}):"]
    for q in status["queue"]:
        when = f"start step {q['promised_start']}" if q["promised_start"] is not None else "no start in window"
        out.append(f"  {q['id']:<16} {q['gpus']} GPUs x {q['duration']}  priority {q['priority']:g}  "
                   f"{q['action']}, {when}: {q['reason']}")
    if not status["queue"]:
        out.append("  empty")
    out += ["", f"apps ({len(status['apps'])}):"]
    out += [f"  {a['id']:<16} demand {a['demand']}, held {a['held']}" + (f", SHORT {a['shortfall']}" if a["shortfall"] else "")
            + f"  (min {a['min_gpus']}, max {a['max_gpus'] if a['max_gpus'] is not None else 'pool'})"
            for a in status["apps"]] or ["  none"]
    out += ["", "nodes:"]
    for n in status["nodes"]:
        seen = n["last_report"]
        report = f"last report {seen['at']} ({seen['job_id']} {seen['status']})" if seen else "no node-agent report seen"
        out.append(f"  node {n['node']:<3} GPUs {n['gpus']:<9} {n['state']:<7} {n['busy']} busy; {report}")
    return out
