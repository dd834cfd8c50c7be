"""The planner core driven step by step: every committed step is legal, running jobs are never
moved or interrupted, the swap cap holds across commits, and the same events give the same
decisions and commits."""

from __future__ import annotations

import random

from gpualloc.solvers.legality import online_violations
from gpualloc.solvers.planner.planner import Planner, applied
from gpualloc.solvers.planner.records import AppSpec, JobSpec, PoolConfig

CONFIG = PoolConfig(gpus=16, gpus_per_node=8, horizon=12, swap_cap=2)
PROFILE = [1, 1, 1, 1, 1, 2, 2, 3, 4, 5, 5, 5, 5, 5, 4, 4, 4, 3, 3, 2, 2, 2, 1, 1]


def run(days_steps: int = 48, seed: int = 5):
    """A compressed trace: arrivals, early and late completions, one app with a daily profile."""
    rng = random.Random(seed)
    planner = Planner(CONFIG)
    planner.realtime.register_app(AppSpec("chat", priority=6, min_gpus=1, max_gpus=6, profile=PROFILE))
    decisions, commits, ends = [], [], {}
    for step in range(days_steps):
        for _ in range(rng.choice([0, 1, 1, 2])):
            job = JobSpec(
                f"j{step}-{rng.randrange(10**6)}",
                "training",
                rng.randint(1, 9),
                rng.choice([1, 1, 2, 2, 4, 8]),
                rng.randint(1, 8),
                step,
            )
            decisions.append(planner.admission.submit(job))
        commit = planner.boundary.tick()
        commits.append(commit)
        for job_id in commit.started:
            spec = planner.running[job_id].spec
            ends[job_id] = step + max(1, spec.duration + rng.choice([-2, -1, 0, 0, 1, 3]))
        for job_id, end in list(ends.items()):
            if end <= step + 1:
                planner.admission.complete(job_id)
                del ends[job_id]
    return decisions, commits


def test_every_committed_step_is_legal_online():
    decisions, commits = run()
    assert len(decisions) > 30 and any(d.action == "start" for d in decisions)
    assert {d.action for d in decisions} <= {"start", "planned", "queued", "rejected"}
    assert online_violations(commits, {"chat": (1, 6, CONFIG.swap_cap)}, {"chat"}, node_size=8) == []


def test_the_grid_rebuilt_from_commits_matches_them():
    _, commits = run(days_steps=12)
    grid = applied(commits, CONFIG.gpus)
    for k, commit in enumerate(commits):
        for owner, gpus in commit.assignments.items():
            assert all(grid[g][k] == owner for g in gpus)


def test_same_events_give_the_same_decisions_and_commits():
    assert run(seed=9) == run(seed=9)


def test_a_job_too_big_for_the_pool_is_rejected_with_the_rule():
    planner = Planner(CONFIG)
    decision = planner.admission.submit(JobSpec("huge", "training", 5, 32, 3, 0))
    assert decision.action == "rejected" and "gpus" in decision.reason and "huge" not in planner.queued


def test_a_waiting_job_is_told_who_holds_its_block():
    planner = Planner(PoolConfig(gpus=8, horizon=12))
    assert planner.admission.submit(JobSpec("big", "training", 9, 8, 5, 0)).action == "start"
    planner.boundary.tick()
    decision = planner.admission.submit(JobSpec("next", "training", 5, 4, 2, 1))
    assert decision.action == "planned" and decision.start_step == 5
    assert "big (priority 9) until step 5" in decision.reason


def test_a_down_node_fails_and_requeues_its_jobs():
    planner = Planner(PoolConfig(gpus=16, gpus_per_node=8, horizon=12))
    planner.admission.submit(JobSpec("a", "training", 5, 8, 10, 0))
    planner.admission.submit(JobSpec("b", "training", 5, 8, 10, 0))
    planner.boundary.tick()
    mask = planner.running["a"].mask
    node = ((mask & -mask).bit_length() - 1) // 8
    failed = planner.pool_changes.node_status(node, "down")
    assert failed == ["a"] and "a" in planner.queued
    commit = planner.boundary.tick()
    down_gpus = set(range(node * 8, node * 8 + 8))
    assert not any(set(g) & down_gpus for g in commit.assignments.values())
    assert "a" not in commit.assignments  # no room left: b keeps the other node


def test_a_drained_node_keeps_its_running_work_and_takes_no_new_work():
    planner = Planner(PoolConfig(gpus=16, gpus_per_node=8, horizon=12))
    planner.admission.submit(JobSpec("a", "training", 5, 2, 10, 0))
    planner.boundary.tick()
    mask = planner.running["a"].mask
    node = ((mask & -mask).bit_length() - 1) // 8
    assert planner.pool_changes.node_status(node, "drained") == []
    for i in range(3):
        planner.admission.submit(JobSpec(f"n{i}", "training", 5, 2, 4, 1))
    commit = planner.boundary.tick()
    drained = set(range(node * 8, node * 8 + 8))
    assert set(commit.assignments["a"]) <= drained
    assert all(not set(commit.assignments[f"n{i}"]) & drained for i in range(3))


def test_gpus_freed_mid_step_are_planned_for_the_boundary_not_started_at_once():
    """A node agent binds a `start` at once, so `start` needs GPUs idle in the committed step;
    GPUs a job frees mid-step go to a new arrival from the next boundary (`planned`)."""
    planner = Planner(PoolConfig(gpus=4, horizon=6))
    planner.admission.submit(JobSpec("big", "training", 5, 4, 3, 0))
    planner.boundary.tick()
    planner.admission.complete("big")  # exits mid-step: its GPUs stay bound until the next commit
    decision = planner.admission.submit(JobSpec("next", "training", 5, 4, 2, planner.now))
    assert decision.action == "planned" and decision.start_step == planner.now, decision
    assert "free up at the boundary" in decision.reason
    commit = planner.boundary.tick()
    assert commit.started == ("next",)
    late = planner.admission.submit_all(
        [JobSpec("a", "training", 1, 4, 1, planner.now), JobSpec("a", "training", 1, 4, 1, planner.now)]
    )
    assert late[1].action == "rejected" and "already queued" in late[1].reason


def test_a_node_going_down_under_the_floors_lowers_them_instead_of_failing():
    """A running job holds node 0 and node 1 goes down: no GPU is left for the app's floor of 2.
    The planner plans anyway (the app takes the shortfall) and raises it again when GPUs return."""
    planner = Planner(PoolConfig(gpus=16, gpus_per_node=8, horizon=6))
    planner.realtime.register_app(AppSpec("chat", priority=3, min_gpus=2, max_gpus=4, profile=[2] * 24))
    planner.admission.submit(JobSpec("big", "training", 9, 8, 20, 0))
    planner.boundary.tick()
    node_of_big = (planner.running["big"].mask.bit_length() - 1) // 8
    planner.pool_changes.node_status(1 - node_of_big, "down")  # the other node
    commit = planner.boundary.tick()
    assert commit.assignments.get("chat", ()) == () and "big" in commit.assignments
    assert [a.min_gpus for a in commit.window.realtime] == [0]
    planner.pool_changes.node_status(0, "up")
    planner.pool_changes.node_status(1, "up")
    assert [a.min_gpus for a in planner.window_problem().realtime] == [2]


def test_draining_the_node_under_an_app_moves_the_app_instead_of_failing():
    """The app holds GPUs of a node that is drained while the rest of the pool is busy: it
    leaves them (the blocker takes them) rather than the planner failing to meet its floor.
    Found by the soak benchmark (`gpualloc bench soak`) with two apps and a full queue."""
    rng = random.Random(0)
    planner = Planner(PoolConfig(gpus=64, gpus_per_node=8, horizon=24))
    for app in ("a", "b"):
        planner.realtime.register_app(AppSpec(app, priority=5, min_gpus=1, max_gpus=8))
    commits, drained = [], None
    for step in range(8):
        planner.admission.submit_all(
            [
                JobSpec(
                    f"j{step}-{k}",
                    "training",
                    rng.randint(1, 9),
                    rng.choice([1, 2, 4, 8]),
                    rng.randint(1, 6),
                    planner.now,
                )
                for k in range(40 if step == 0 else 5)
            ]
        )
        for app in ("a", "b"):
            planner.realtime.observe_traffic(app, planner.now, rng.randint(0, 8))
        commits.append(planner.boundary.tick())
        if step == 1:
            drained = commits[-1].assignments["a"][0] // 8
            planner.pool_changes.node_status(drained, "drained")
    assert any(g // 8 == drained for g in commits[1].assignments["a"])
    assert not any(g // 8 == drained for g in commits[-1].assignments["a"])
    held = {job_id for c in commits[:2] for job_id in c.assignments}
    later = [set(g for job_id, gpus in c.assignments.items() if job_id not in held for g in gpus) for c in commits[2:]]
    assert not any(g // 8 == drained for gpus in later for g in gpus)  # no new work on the drained node


def test_a_refusal_names_the_pool_and_the_app_floors_it_keeps():
    """A job no count holds is refused with the pool's true size and the floors taken off it."""
    from gpualloc.forecasting.job_forecast import SizeError
    from gpualloc.schemas.features import TrainingFeatures

    unsharded = TrainingFeatures(
        variant="full",
        params_b=14.0,
        layers=48,
        hidden_size=5120,
        seq_len=2048,
        dataset_tokens_m=200,
        epochs=1,
        global_batch=32,
        micro_batch=4,
        gradient_checkpointing=True,
        zero_stage=0,
    )
    planner = Planner(PoolConfig(gpus=32, gpus_per_node=8, swap_cap=2, gpu_type="h100-80gb"))
    try:
        planner.size_job("training", unsharded, None, None)
    except SizeError as alone:
        assert "no count of the pool's 32 GPUs holds the job" in str(alone)
    else:
        raise AssertionError("a 14B full fine-tuning without sharding was given GPUs")
    planner.realtime.register_app(AppSpec("rt-0", priority=6, min_gpus=2, max_gpus=8))
    try:
        planner.size_job("training", unsharded, None, None)
    except SizeError as beside:
        assert "no count of the 30 GPUs left of the pool's 32 once app floors (rt-0: 2) are kept holds the job" in str(
            beside
        )
    else:
        raise AssertionError("a 14B full fine-tuning without sharding was given GPUs")


def _drained_with_a_job_ending(scheduler=None):
    """32 GPUs in nodes of 8: nodes 0 and 2 held past the window, node 3 for 5 steps more, node 1
    by pretrain-b for 3 steps more, then drained; 8-GPU jobs queued that fit soonest where
    pretrain-b ends."""
    from gpualloc.solvers.policies.heuristic import heuristic_schedule

    planner = Planner(
        PoolConfig(gpus=32, gpus_per_node=8, horizon=12, swap_cap=2), scheduler=scheduler or heuristic_schedule
    )
    for job_id in ("long-0", "pretrain-b", "long-2", "long-3"):  # inserted lowest GPUs first
        planner.admission.submit(JobSpec(job_id, "training", 9, 8, {"pretrain-b": 4, "long-3": 6}.get(job_id, 40), 0))
    planner.boundary.tick()
    assert planner.running["pretrain-b"].mask == 0xFF00, "pretrain-b runs on node 1"
    planner.pool_changes.node_status(1, "drained")
    decisions = [planner.admission.submit(JobSpec(f"sft-{k}", "training", 5, 8, 2, 1)) for k in range(3)]
    return planner, decisions


def test_a_drained_node_takes_no_new_work_once_its_running_job_ends():
    """Nothing new lands on a drained node at any step of the window, also after the job
    running there is planned to end; the validator checks each plan against its window."""
    from gpualloc.solvers.grid import batch_spans, to_grid
    from gpualloc.solvers.legality import check_plan
    from gpualloc.solvers.policies.fifo import fifo_schedule

    drained = 0xFF00
    for scheduler in (None, fifo_schedule):
        planner, decisions = _drained_with_a_job_ending(scheduler)
        assert all(not set(d.gpus) & set(range(8, 16)) for d in decisions), decisions
        for _ in range(6):  # pretrain-b's end (step 4) and after
            commit = planner.boundary.tick()
            assert not check_plan(commit.window, to_grid(commit.window, commit.schedule))
            for job_id, (_, _, mask) in batch_spans(commit.window, commit.schedule).items():
                if job_id in planner.queued or job_id in commit.started:
                    assert not mask & drained, (commit.step, job_id)
        problem, schedule = planner.plan()
        assert not check_plan(problem, to_grid(problem, schedule))
        assert all(not mask & drained for job_id, (_, mask) in schedule.batch.items() if job_id in planner.queued)


def test_a_drained_nodes_gpus_are_blocked_from_the_step_its_running_job_ends():
    from gpualloc.solvers.planner.records import BLOCKER, is_blocker

    planner, _ = _drained_with_a_job_ending()
    window = planner.window_problem()
    blockers = {j.id: (j.held_from, j.remaining, j.running_mask) for j in window.batch if is_blocker(j.id)}
    ends = planner.running["pretrain-b"].start + planner.running["pretrain-b"].spec.duration - planner.now
    assert blockers == {f"{BLOCKER}@{ends}": (ends, 12, 0xFF00)}
    assert window.running_busy[ends] & 0xFF00 == 0xFF00 and window.running_busy[11] & 0xFF00 == 0xFF00


def test_every_planner_keeps_new_work_off_a_drained_node_for_the_whole_window():
    """The hot path (Python and compiled), the greedy plan, FIFO and full mode's MILP, on the same
    window: legal by the validator, and no queued job on the drained node at any step."""
    from gpualloc.schemas.settings import FullModeOptions, SolveOptions
    from gpualloc.solvers.grid import to_grid
    from gpualloc.solvers.legality import check_plan
    from gpualloc.solvers.policies import policy
    from gpualloc.solvers.policies.heuristic import heuristic_schedule
    from gpualloc.solvers.policies.heuristic.native import AVAILABLE

    planner, _ = _drained_with_a_job_ending()
    window = planner.window_problem()
    options = SolveOptions(full_mode=FullModeOptions(time_limit=None, node_limit=200))  # a work limit: reproducible
    plans = {name: policy(name).schedule(window, options) for name in ("greedy", "fifo", "milp")}
    plans["python"] = heuristic_schedule(window, native=False)
    if AVAILABLE:
        plans["native"] = heuristic_schedule(window, native=True)
        assert plans["native"] == plans["python"]
    for name, schedule in plans.items():
        assert not check_plan(window, to_grid(window, schedule), exempt=policy("fifo").exempt), name
        queued = [mask for job_id, (_, mask) in schedule.batch.items() if job_id in planner.queued]
        assert queued and not any(mask & 0xFF00 for mask in queued), name


def test_drained_nodes_at_the_contract_limits_take_a_blocker_a_step_at_most():
    """4,096 GPUs in nodes of 8, all drained, each under a running job ending at its own step of
    a 336-step window (512 jobs, so ends repeat): one blocker per step some job ends at, and no
    GPU is free at any step."""
    from gpualloc.schemas.limits import LIMITS
    from gpualloc.solvers.planner.records import Running, is_blocker
    from gpualloc.solvers.planner.window import window

    G, T = LIMITS.gpus, LIMITS.horizon
    cfg = PoolConfig(gpus=G, gpus_per_node=8, horizon=T)
    running = {
        f"r{n}": Running(JobSpec(f"r{n}", "training", 1, 8, 1 + n % T, 0), 0xFF << (8 * n), 0) for n in range(G // 8)
    }
    problem = window(cfg, 0, running, {}, {}, (1 << G) - 1, lambda app: [0] * T)
    blockers = [j for j in problem.batch if is_blocker(j.id)]
    assert sorted(j.held_from for j in blockers) == list(range(1, T))  # a job ending at T leaves none
    assert all(busy == (1 << G) - 1 for busy in problem.running_busy)  # each GPU run on or blocked
