"""`gpualloc status`: the live pool, read back from the bus as a restarted agent would.

The state is the pool's latest snapshot and the ledger's transactions after it, replayed through
the planner core (`recovery.read_history` and `rebuild`), so it is exact as of the last committed
transaction, whatever process asks. From it: the latest commit's plan summed up by groups of
nodes (how many of their GPUs the plan takes at each step ahead, and the GPUs held there now and
by how many holders, counted as committed; at most `GROUPS` rows, whatever the pool's size), and
on request a per-GPU Gantt of a range of GPUs; the running jobs, the queue with where the latest
commit's plan puts each job (its promised start and GPUs and who holds them first, or why it has
none: read from the commit, not planned again, so it costs the plan's size and never a solve),
the apps (`states.app_row`: their observed need against what they hold, the forecast labelled
as one), and the nodes: up, drained or down, with their node agents' last reports. Now is the latest commit's
step, and what holds GPUs now is what held them as of the last committed transaction (the
commit's holders, the jobs started since): `explain` says the same. `view` is pure (a dict, also
the `--json` output, bounded: at most `LISTED` running and queued jobs each, a reason naming at
most `words.NAMED` holders, never GPUs x steps: under `JSON_BYTES` at the contract's limits);
`lines` renders it, listing the first `SHOWN` jobs and reports.
"""

from __future__ import annotations

import string
import time
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from aiokafka import TopicPartition

from gpualloc.agent.metrics import gpu_states
from gpualloc.agent.operator.audit import STALLED_AFTER_S
from gpualloc.agent.operator.full_mode import full_mode_status
from gpualloc.agent.operator.overruns import past_plan, past_plan_lines
from gpualloc.agent.operator.states import app_row, app_words, forecast_words
from gpualloc.agent.operator.words import Holders, duration, now_words, promised, reserved_words, span, step_length
from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.agent.service.recovery import rebuild
from gpualloc.bus import clients
from gpualloc.bus.admin import partition_counts
from gpualloc.bus.clients import Broker
from gpualloc.bus.history import partitions, read_history, read_range, reader
from gpualloc.bus.topics import Topics, decode
from gpualloc.schemas.commits import latest
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.node_watch import Liveness, liveness
from gpualloc.solvers.planner.snapshot import SnapshotError
from gpualloc.solvers.planner.view import PoolView
from gpualloc.solvers.problem import bits_of

TAIL = 500  # records read back per partition of the commits and bindings topics
SYMBOLS = string.ascii_lowercase + string.ascii_uppercase + string.digits  # one per holder in the Gantt
GROUPS = 64  # rows of the plan's summary at most: nodes are grouped to fit
SHOWN = 20  # running jobs, queued jobs and node reports listed in the text (`--all`: every one)
LISTED = 1_000  # running and queued jobs listed in `--json` each (`--all`: every one)
JSON_BYTES = 2_000_000  # `--json` (indented) at the contract's limits is smaller than this


async def read_status(
    bootstrap: Broker | str,
    topics: Topics,
    pool: str,
    width: int = 48,
    gpu_range: tuple[int, int] | None = None,
    listed: int | None = LISTED,
) -> dict[str, Any] | None:
    """The pool's `view` from the bus (`width` steps of the plan, the Gantt of GPUs [from, to)
    `gpu_range` when given, `listed` jobs of each list); None when the ledger has never seen the pool."""
    names = [topics.state, topics.ledger, *topics.inputs, topics.commits]
    counts = await partition_counts(bootstrap, names)
    consumer = await clients.started(reader(bootstrap), "status reader")
    try:
        history = await read_history(consumer, topics, counts, pool)
        dispatcher = Dispatcher(pool, topics, Pool())
        try:
            rebuild(dispatcher, history)
        except SnapshotError:  # written by another release: replay the whole ledger instead
            history = await read_history(consumer, topics, counts, pool, use_snapshot=False)
            dispatcher = Dispatcher(pool, topics, Pool())
            rebuild(dispatcher, history)
        tails = await _tails(
            consumer, [tp for name in (topics.commits, topics.bindings) for tp in partitions(counts, name)]
        )
        inputs = [tp for name in topics.inputs for tp in partitions(counts, name)]
        ends = await consumer.end_offsets(inputs) if inputs else {}
    finally:
        await consumer.stop()
    planner = dispatcher.reads.view
    if planner is None:
        return None
    # records past the ledger's frontier, and how long ago its last pass was: a pool whose agent
    # has stopped publishing (the frontier moves over other pools' records on a shared partition)
    waiting = sum(max(0, end - dispatcher.frontier.get(f"{tp.topic}:{tp.partition}", 0)) for tp, end in ends.items())
    last_pass = history.entries[-1].now if history.entries else None
    idle_s = (datetime.now(last_pass.tzinfo) - last_pass).total_seconds() if last_pass is not None else None
    messages = [m for m in tails if m.get("pool", "default") == pool]
    # the commit of the rebuilt state (the tail, read after the ledger, may hold later ones)
    commit = latest(
        m["payload"]
        for m in messages
        if m.get("type") == "plan.committed" and m["payload"].get("seq", 0) <= dispatcher.seq
    )
    reports = [m for m in messages if m.get("type") == "binding.reported"]
    length = step_length(
        m["payload"] for m in messages if m.get("type") == "plan.committed" and not m["payload"].get("reactive")
    )
    out = view(pool, planner, commit, reports, dispatcher.reads.origin, width, gpu_range, length, listed, time.time())
    out["waiting"] = waiting
    out["stalled"] = bool(waiting) and idle_s is not None and idle_s > STALLED_AFTER_S
    out["release"] = agent_release(history.entries[-1].run if history.entries else None)
    return out


def agent_release(run: dict[str, Any] | None) -> dict[str, Any] | None:
    """The release of the agent that wrote the pool's last ledger entry (`run`), as its entry
    names it: version, rules, ledger schema and the heuristic's implementation (None: no entry
    read; an entry of a release that named none gives rules 1, schema 1, the rest unknown)."""
    if run is None:
        return None
    return {
        "version": run.get("version", "unknown"),
        "rules": run.get("rules", 1),
        "schema": run.get("schema", 1),
        "heuristic": run.get("heuristic", "unknown"),
    }


def release_line(release: dict[str, Any] | None) -> list[str]:
    """The agent's release in words, with a warning when its heuristic runs as the Python
    reference (16-60x slower: the hot path's latency targets are not met that way)."""
    if release is None:
        return []
    line = (
        f"agent: gpualloc {release['version']} (rules {release['rules']}, ledger schema {release['schema']}, "
        f"heuristic {release['heuristic']})"
    )
    if release["heuristic"] == "python":
        line += " - the Python reference: 16-60x slower than the compiled heuristic; `make native` builds it"
    return [line]


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


def view(
    pool: str,
    planner: PoolView,
    commit: dict[str, Any] | None,
    reports: list[dict[str, Any]],
    origin: datetime | None = None,
    width: int = 48,
    gpu_range: tuple[int, int] | None = None,
    length: timedelta | None = None,
    listed: int | None = LISTED,
    at: float | None = None,
) -> dict[str, Any]:
    """The status of a pool (plain JSON data): `commit` is the latest whole `plan.committed`
    payload, `reports` the node agents' recent `binding.reported` messages in publication order;
    the plan's summary over `width` steps, the per-GPU `detail` of GPUs [from, to) `gpu_range`,
    times told with a step's wall `length`, the first `listed` running and queued jobs (None: all);
    `at`: the clock (Unix seconds) the node agents' liveness is told at (`node_watch.liveness`;
    None: the pool's own, its last pass)."""
    cfg = planner.config
    alive = liveness(planner, planner.clock if at is None else at)
    assignments = holding(planner)
    plan = (commit or {}).get("plan")
    running = [
        {
            "id": job_id,
            "kind": r.spec.kind,
            "priority": r.spec.priority,
            "gpus": span(bits_of(r.mask)),
            "started": r.start,
            "ends": r.start + r.spec.duration,
            "forecast": r.spec.forecast is not None,
            "binding": binding_of(alive, planner, job_id),
        }
        for job_id, r in sorted(planner.running.items(), key=lambda kv: (kv[1].start, kv[0]))
    ]
    queue = promises(planner, commit, length)
    queue.sort(key=lambda q: (q["promised_start"] is None, q["promised_start"] or 0, -q["priority"], q["id"]))
    reasons = (commit or {}).get("reasons", {})
    displaced = planner.displaced()
    apps = [
        app_row(planner, app_id, assignments.get(app_id, []), planner.now - 1, reasons.get(app_id), displaced)
        for app_id in sorted(planner.apps)
    ]
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
        agent = agent_of(alive, n)
        nodes.append(
            {
                "node": n,
                "gpus": span(gpus),
                "state": "no agent" if state == "up" and agent not in (None, "live", "not reported yet") else state,
                "agent": agent,
                "busy": len(busy.intersection(gpus)),
                "last_report": last.get(n),
            }
        )
    return {
        "pool": pool,
        "gpus": cfg.gpus,
        "gpus_per_node": cfg.node_size,
        "step_minutes": cfg.step_minutes,
        "step_seconds": None if length is None else length.total_seconds(),
        "now": commit["step"] if commit else planner.now,
        "now_words": f"step {planner.now}, no commit yet"
        if commit is None
        else now_words(commit, length, f", {commit['source']}, objective {commit['objective']:.2f}"),
        "origin": origin.isoformat() if origin else None,
        "commit": None
        if commit is None
        else {k: commit.get(k) for k in ("step", "seq", "source", "objective", "bound", "step_start", "full_mode")},
        "usage": gpu_states(assignments, planner.apps, cfg.gpus, planner.down.bit_count()),
        "plan": summary(plan, cfg.gpus // cfg.node_size, cfg.node_size, width, assignments),
        "detail": None if gpu_range is None or plan is None else clipped(plan, *gpu_range, width),
        "running": running[:listed],
        "running_total": len(running),
        "queue": queue[:listed],
        "queue_total": len(queue),
        "queue_planned": sum(q["promised_start"] is not None for q in queue),
        "apps": apps,
        "nodes": nodes,
        "node_agents": None
        if not alive.watched
        else {
            "live": len(alive.live),
            "silent": len(alive.silent),
            "never": len(alive.never),
            "waiting": len(alive.waiting),
        },
        **past_plan(planner.running, planner.now),
        "full_mode": full_mode_status(commit),
    }


def agent_of(alive: Liveness, node: int) -> str | None:
    """A node's agent in words: None in a pool no node agent reports to, else `live`, `never
    reported`, or `silent for N s`."""
    if not alive.watched:
        return None
    if node in alive.silent:
        return f"silent for {alive.silent[node]:.0f} s"
    if node in alive.waiting:
        return "not reported yet"
    return "never reported" if node in alive.never else "live"


def binding_of(alive: Liveness, planner: PoolView, job_id: str) -> str | None:
    """Whether the node agents have bound a running job: None in a pool no node agent reports
    to; `bound`; `binding` (started, within `bind_confirm_seconds`); `started, not bound (N s)`;
    `unconfirmed` (bound, on a node whose agent is silent or never reported)."""
    if not alive.watched:
        return None
    if job_id in alive.unbound:
        return f"started, not bound ({alive.unbound[job_id]:.0f} s)"
    if job_id in planner.unbound:
        return "binding"
    return "unconfirmed" if job_id in alive.unconfirmed else "bound"


def holding(planner: PoolView) -> dict[str, list[int]]:
    """Who holds which GPUs as of the last committed transaction: every running job (those
    started since the latest commit too) and every app as that commit, or a grant since, left it."""
    out = {job_id: bits_of(r.mask) for job_id, r in planner.running.items()}
    return out | {app_id: bits_of(app.held) for app_id, app in planner.apps.items() if app.held > 0}


def promises(planner: PoolView, commit: dict[str, Any] | None, length: timedelta | None = None) -> list[dict[str, Any]]:
    """Each queued job where the latest (whole) commit's plan puts it: `planned` at its first step
    there, on its block, with what holds that block just before (`words.promised`); else
    `queued`, with why (no block in the commit's window, or it arrived after the commit, which
    the next commit plans)."""
    plan = (commit or {}).get("plan") or {"steps": 0, "holders": {}}
    holders = Holders(plan)
    priority = (
        {a: s.spec.priority for a, s in planner.apps.items()}
        | {j: s.priority for j, s in planner.queued.items()}
        | {j: r.spec.priority for j, r in planner.running.items()}
    )
    out = []
    for job_id, spec in planner.queued.items():
        found = holders.promise(job_id) if commit is not None else None
        promised_at, gpus = None, []
        if found is not None and commit is not None:
            promised_at, gpus = commit["step"] + found[0], found[1]
            reason = promised(found, commit, length, priority)
        elif commit is not None and spec.submitted <= commit["step"]:
            reason = (
                f"no {spec.gpus}-GPU block for {spec.duration} steps in the {plan['steps']}-step window of "
                f"the latest commit (seq {commit['seq']}): higher-value work and real-time demand fill it"
            )
        else:
            reason = (
                "arrived after the latest commit: its decision is on the decisions topic (`gpualloc explain "
                "JOB`), and the next commit plans it"
            )
        reservation = reserved_words(job_id, commit, length)
        out.append(
            {
                "id": job_id,
                "kind": spec.kind,
                "priority": spec.priority,
                "gpus": spec.gpus,
                "duration": spec.duration,
                "submitted": spec.submitted,
                "forecast": spec.forecast is not None,
                "action": "planned" if promised_at is not None else "queued",
                "promised_start": promised_at,
                "promised_gpus": span(gpus),
                "reserved_from": ((commit or {}).get("reservations") or {}).get(job_id, {}).get("start_step"),
                "reason": reason if reservation is None else f"{reservation}; {reason}",
            }
        )
    return out


def summary(
    plan: dict[str, Any] | None, nodes: int, node_size: int, width: int, holding: dict[str, list[int]]
) -> dict[str, Any] | None:
    """The plan by groups of consecutive nodes (at most `GROUPS`; groups alike side by side
    merged): per group, the GPUs the plan takes at each of the first `width` steps, and what
    holds GPUs there now (`holding`: the latest commit's assignments and the jobs started
    since, as the rest of `status` counts them): `holders_now` and `held_now` GPUs."""
    if plan is None:
        return None
    steps, per = min(width, plan["steps"]), -(-nodes // GROUPS)
    groups = -(-nodes // per)
    busy = np.zeros((nodes, steps), dtype=np.int64)
    for rects in plan["holders"].values():
        for g0, g1, t0, t1 in rects:
            if t0 >= steps:
                continue
            for n in range(g0 // node_size, (g1 - 1) // node_size + 1):
                busy[n, t0 : min(t1, steps)] += min(g1, (n + 1) * node_size) - max(g0, n * node_size)
    now: list[set[str]] = [set() for _ in range(groups)]
    held = [0] * groups
    for holder, gpus in holding.items():
        for g in gpus:
            k = min(groups - 1, g // node_size // per)
            now[k].add(holder)
            held[k] += 1
    rows: list[dict[str, Any]] = []
    holders: list[set[str]] = []
    for k in range(groups):
        first, last = k * per, min(nodes, (k + 1) * per) - 1
        taken = busy[first : last + 1].sum(axis=0).tolist()
        if rows and rows[-1]["busy"] == taken and rows[-1]["gpus_per_group"] == (last - first + 1) * node_size:
            rows[-1]["nodes"][1] = last
            rows[-1]["held_now"] += held[k]
            holders[-1] |= now[k]
            continue
        row = {"nodes": [first, last], "gpus_per_group": (last - first + 1) * node_size, "busy": taken}
        rows.append(row | {"held_now": held[k]})
        holders.append(set(now[k]))
    for row, there in zip(rows, holders):
        row["holders_now"] = len(there)
    return {"steps": steps, "nodes_per_group": per, "rows": rows}


def clipped(plan: dict[str, Any], lo: int, hi: int, width: int) -> dict[str, Any]:
    """The plan cut to GPUs [lo, hi) and its first `width` steps: `gpus` [lo, hi), `steps`, and
    each holder's rectangles there."""
    hi, steps = min(hi, plan["gpus"]), min(width, plan["steps"])
    holders: dict[str, list[list[int]]] = {}
    for holder, rects in plan["holders"].items():
        for g0, g1, t0, t1 in rects:
            if t0 < steps and g0 < hi and lo < g1:
                holders.setdefault(holder, []).append([max(g0, lo), min(g1, hi), t0, min(t1, steps)])
    return {"gpus": [lo, max(lo, hi)], "steps": steps, "holders": holders}


def gpu_rows(detail: dict[str, Any]) -> list[list[str | None]]:
    """The grid (GPU x step) of a `clipped` plan, its first row GPU `detail["gpus"][0]`."""
    lo, hi = detail["gpus"]
    rows: list[list[str | None]] = [[None] * detail["steps"] for _ in range(hi - lo)]
    for holder, rects in detail["holders"].items():
        for g0, g1, t0, t1 in rects:
            for g in range(g0, g1):
                rows[g - lo][t0:t1] = [holder] * (t1 - t0)
    return rows


def summary_lines(plan: dict[str, Any] | None, node_size: int, first_step: int) -> list[str]:
    """The summary as text: one row per group of nodes, one column a step: '.' no GPU taken,
    1-9 tenths of the group's GPUs taken, '#' all."""
    if plan is None:
        return ["(no commit yet)"]
    steps = plan["steps"]

    def cell(taken: int, of: int) -> str:
        return "." if taken == 0 else "#" if taken >= of else str(min(9, max(1, taken * 10 // of)))

    labels = []
    for r in plan["rows"]:
        a, b = r["nodes"]
        labels.append(
            (f"node {a}" if a == b else f"nodes {a}-{b}") + f" (GPUs {a * node_size}-{(b + 1) * node_size - 1})"
        )
    label = max(len(x) for x in labels + ["step"])
    ruler = "".join(str((first_step + t) % 10) if (first_step + t) % 5 == 0 else " " for t in range(steps))
    out = [
        f"{'step':<{label}} |{ruler}|  from step {first_step}"
        + (f"; {plan['nodes_per_group']} nodes a group" if plan["nodes_per_group"] > 1 else "")
    ]
    for text, r in zip(labels, plan["rows"]):
        row = "".join(cell(t, r["gpus_per_group"]) for t in r["busy"])
        gpus, holders = r["held_now"], r["holders_now"]
        now = f"now: {gpus} GPU{'s' * (gpus != 1)} held by {holders} holder{'s' * (holders != 1)}"
        out.append(f"{text:<{label}} |{row}|  {now}")
    out.append(
        "GPUs the plan takes a group: . none, 1-9 tenths, # all (`--gpus A-B`: who holds them); now: GPUs held "
        "and their holders as committed (the latest commit's assignments and the jobs started since)"
    )
    return out


def gantt(grid: list[list[str | None]], first_step: int, width: int = 48, first_gpu: int = 0) -> list[str]:
    """The grid (GPU x step, its first row GPU `first_gpu`) as text: one row per run of GPUs with
    the same plan, one column a step (the first `width`), a symbol per holder ('.' idle), and the
    legend."""
    if not grid:
        return ["(no commit yet)"]
    steps = min(width, len(grid[0]))
    owners = sorted({o for row in grid for o in row[:steps] if o is not None})
    symbol = {o: SYMBOLS[k] if k < len(SYMBOLS) else "#" for k, o in enumerate(owners)}
    rows: list[tuple[int, int, str]] = []
    for g, row in enumerate(grid, first_gpu):
        text = "".join("." if o is None else symbol[o] for o in row[:steps])
        if rows and rows[-1][2] == text:
            rows[-1] = (rows[-1][0], g, text)
        else:
            rows.append((g, g, text))
    label = max(len(f"GPUs {a}-{b}") for a, b, _ in rows)
    ruler = "".join(str((first_step + t) % 10) if (first_step + t) % 5 == 0 else " " for t in range(steps))
    out = [f"{'step':<{label}} |{ruler}|  from step {first_step}"]
    out += [f"{(f'GPU {a}' if a == b else f'GPUs {a}-{b}'):<{label}} |{text}|" for a, b, text in rows]
    legend = ", ".join(f"{symbol[o]}={o}" for o in owners[: len(SYMBOLS)])
    more = len(owners) - len(SYMBOLS)
    out.append("legend: " + (legend or "all idle") + (f", #={more} more" if more > 0 else ""))
    return out


def lines(status: dict[str, Any], shown: int | None = SHOWN) -> list[str]:
    """`gpualloc status` as text, listing the first `shown` jobs and reports of each list (None: all)."""
    c, u = status["commit"], status["usage"]
    head = (
        f"pool {status['pool']}: {status['gpus']} GPUs ({status['gpus_per_node']} a node), "
        f"{status['step_minutes']}-min steps"
    )
    if status["step_seconds"] and status["step_seconds"] != 60 * status["step_minutes"]:
        head += f" ({duration(timedelta(seconds=status['step_seconds']))} each on the agent's clock)"
    out = [
        head,
        f"now: {status['now_words']}",
        *release_line(status.get("release")),
        f"GPUs: {u['batch']} batch, {u['realtime']} real-time, {u['idle']} idle, {u['down']} down",
        "",
    ]
    if status.get("stalled"):
        out.insert(
            1,
            f"stalled: {status['waiting']:,} input records past its ledger, whose last pass is over "
            f"{STALLED_AFTER_S:.0f} s old: its agent publishes nothing",
        )
    if status.get("full_mode"):  # what became of full mode at this commit, and when it runs next
        out.insert(1, status["full_mode"]["line"])
    first_step = c["step"] if c else status["now"]
    out += summary_lines(status["plan"], status["gpus_per_node"], first_step)
    if status.get("detail"):
        out += [""] + gantt(gpu_rows(status["detail"]), first_step, first_gpu=status["detail"]["gpus"][0])
    out += running_lines(status, shown)
    out += past_plan_lines(status)
    out += queue_lines(status, shown)
    out += app_lines(status)
    out += node_lines(status, shown)
    return out


def running_lines(status: dict[str, Any], shown: int | None) -> list[str]:
    """The running jobs, each with its GPUs and steps."""
    out = ["", f"running ({status['running_total']:,}):"]
    out += [
        f"  {r['id']:<16} GPUs {r['gpus']:<9} steps {r['started']}-{r['ends'] - 1}  priority {r['priority']:g}"
        + (f"  {r['binding']}" if r.get("binding") not in (None, "bound") else "")
        for r in status["running"][:shown]
    ] or ["  none"]
    return out + _more(status["running_total"], shown)


def queue_lines(status: dict[str, Any], shown: int | None) -> list[str]:
    """The queue, each job with where the latest commit's plan puts it or why it has no place."""
    out = ["", f"queue ({status['queue_total']:,}, {status['queue_planned']:,} planned in the window):"]
    out += [
        f"  {q['id']:<16} {q['gpus']} GPUs x {q['duration']}  priority {q['priority']:g}  {q['reason']}"
        for q in status["queue"][:shown]
    ]
    out += _more(status["queue_total"], shown)
    return out if status["queue"] else [*out, "  empty"]


def app_lines(status: dict[str, Any]) -> list[str]:
    """The apps: observed need against what they hold (`states.app_words`), the forecast the
    next plan counts on, and the latest commit's words for each."""
    out = ["", f"apps ({len(status['apps'])}):"]
    seq = (status.get("commit") or {}).get("seq")
    for a in status["apps"]:
        out.append(f"  {a['id']:<16} {app_words(a)}")
        out.append(f"    {forecast_words(a)}")
        if a.get("commit_reason"):
            out.append(f"    latest commit (seq {seq}): {a['commit_reason']}")
    return out if status["apps"] else [*out, "  none"]


def node_lines(status: dict[str, Any], shown: int | None) -> list[str]:
    """The nodes: runs of consecutive nodes of one state with their busy GPUs, then the node
    agents' last binding reports."""
    out = ["", "nodes:"]
    runs: list[list] = []  # consecutive nodes of one state: [first, last, state, busy]
    for n in status["nodes"]:
        if runs and runs[-1][2] == n["state"] and runs[-1][1] == n["node"] - 1:
            runs[-1][1], runs[-1][3] = n["node"], runs[-1][3] + n["busy"]
        else:
            runs.append([n["node"], n["node"], n["state"], n["busy"]])
    per = status["gpus_per_node"]
    out += [
        f"  {f'node {a}' if a == b else f'nodes {a}-{b}'} {state}: {busy} of {(b - a + 1) * per} GPUs busy"
        for a, b, state, busy in runs
    ]
    if status.get("node_agents"):  # the pool's node agents report: which are alive
        agents = status["node_agents"]
        out.append(
            f"  node agents: {agents['live']} live, {agents['silent']} silent, {agents['never']} never reported"
            + (f", {agents['waiting']} not reported yet" if agents["waiting"] else "")
            + " (a node without a live agent takes no new work)"
        )
        out += [f"  node {n['node']}: agent {n['agent']}" for n in status["nodes"] if n["agent"] not in (None, "live")][
            :shown
        ]
    seen = [n for n in status["nodes"] if n["last_report"]]
    out += [
        f"  node {n['node']} last report {n['last_report']['at']} ({n['last_report']['job_id']} "
        f"{n['last_report']['status']})"
        for n in seen[:shown]
    ]
    out += _more(len(seen), shown)
    return out if seen else [*out, "  no node-agent report seen"]


def _more(total: int, shown: int | None) -> list[str]:
    return [f"  ... and {total - shown:,} more (`--all` lists all)"] if shown is not None and total > shown else []
