"""The hot path inserts arrivals into the current plan: a decision given is never moved by a later
arrival of its step, a `start` runs from its step on its GPUs, every commit stays legal, and a
snapshot taken mid-step decides the next arrival as the pool it was taken from does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples

from gpualloc.solvers.grid import to_grid
from gpualloc.solvers.legality import check_plan, online_violations
from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.records import AppSpec, JobSpec, PoolConfig
from gpualloc.solvers.planner.snapshot import dump_planner, load_planner
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.problem import mask_of


def test_a_start_is_not_moved_by_a_more_valuable_arrival_of_the_same_step():
    planner = Planner(PoolConfig(gpus=8, gpus_per_node=8, horizon=6))
    low = planner.admission.submit(JobSpec("low", "training", 1, 8, 3, 0))
    assert low.action == "start" and "low" in planner.running
    high = planner.admission.submit(JobSpec("high", "training", 9, 8, 1, 0))
    assert high.action == "planned" and high.start_step == 3  # behind low, which keeps the pool
    commit = planner.boundary.tick()
    assert commit.started == ("low",) and commit.assignments["low"] == low.gpus


def test_an_arrival_takes_the_earliest_block_the_plan_leaves_and_says_who_holds_it():
    planner = Planner(PoolConfig(gpus=8, gpus_per_node=4, horizon=8))
    planner.admission.submit(JobSpec("a", "training", 5, 4, 5, 0))
    planner.admission.submit(JobSpec("b", "training", 5, 4, 2, 0))
    planner.boundary.tick()
    decision = planner.admission.submit(JobSpec("c", "training", 5, 8, 2, 1))
    assert decision.action == "planned" and decision.start_step == 5 and decision.gpus == tuple(range(8))
    assert "a (priority 5) until step 5" in decision.reason and "b (priority 5)" in decision.reason


def test_a_job_that_leaves_mid_step_frees_its_gpus_for_the_boundary():
    planner = Planner(PoolConfig(gpus=4, horizon=6))
    planner.admission.submit(JobSpec("big", "training", 5, 4, 5, 0))
    planner.boundary.tick()
    planner.admission.cancel("big")
    decision = planner.admission.submit(JobSpec("next", "training", 5, 4, 2, planner.now))
    assert decision.action == "planned" and decision.start_step == planner.now  # bound in the committed step still


def test_a_down_node_takes_no_inserted_work():
    planner = Planner(PoolConfig(gpus=16, gpus_per_node=8, horizon=6))
    planner.admission.submit(JobSpec("first", "training", 5, 1, 2, 0))
    planner.pool_changes.node_status(1, "down")
    decisions = [planner.admission.submit(JobSpec(f"j{k}", "training", 5, 4, 2, 0)) for k in range(4)]
    assert all(not set(d.gpus) & set(range(8, 16)) for d in decisions)
    assert [d.action for d in decisions] == ["start", "planned", "planned", "planned"]


def test_a_mid_step_snapshot_decides_the_next_arrival_as_its_pool_does():
    planner = Planner(PoolConfig(gpus=16, gpus_per_node=8, horizon=8))
    planner.realtime.register_app(AppSpec("web", 8, min_gpus=2, max_gpus=6, profile=[3] * 24))
    for k in range(6):
        planner.admission.submit(JobSpec(f"a{k}", "training", 1 + k, 4, 3, 0))
    planner.boundary.tick()
    for k in range(3):
        planner.admission.submit(JobSpec(f"b{k}", "training", 2, 2, 2, 1))
    restored = load_planner(dump_planner(planner), heuristic_schedule)
    assert restored.busy == planner.busy
    job = JobSpec("next", "training", 4, 4, 2, 1)
    assert restored.admission.submit(job) == planner.admission.submit(job)
    assert restored.boundary.tick().assignments == planner.boundary.tick().assignments


JOBS = st.lists(
    st.tuples(st.integers(1, 9), st.sampled_from([1, 2, 4, 8]), st.integers(1, 5), st.integers(0, 3), st.booleans()),
    min_size=1,
    max_size=30,
)


@settings(max_examples=examples(60), deadline=None)
@given(JOBS, st.booleans(), st.integers(0, 2**30))
def test_inserted_decisions_never_overlap_and_every_start_is_committed_as_decided(jobs, app, seed):
    """Arrivals over several steps (`gap` steps before each, early exits now and then): in each
    step no two decisions' blocks overlap, each `start` is in its step's commit on its GPUs, and
    every commit passes the plan and online rules."""
    planner = Planner(PoolConfig(gpus=16, gpus_per_node=8, horizon=8))
    if app:
        planner.realtime.register_app(
            AppSpec("web", 8, min_gpus=1, max_gpus=6, profile=[(seed >> h) % 5 for h in range(24)])
        )
    commits, given_ = [], []
    for k, (priority, gpus, duration, gap, leave) in enumerate(jobs):
        for _ in range(gap):
            commits.append(check_commit(planner, given_))
            given_ = []
        if leave and planner.running:
            gone = sorted(planner.running)[(seed >> k) % len(planner.running)]
            planner.admission.complete(gone)  # its block is free again
            given_ = [(d, dur) for d, dur in given_ if d.job_id != gone]
        d = planner.admission.submit(JobSpec(f"j{k}", "training", priority, gpus, duration, planner.now))
        if d.action in ("start", "planned"):
            given_.append((d, duration))
    commits.append(check_commit(planner, given_))
    limits = {"web": (1, 6, planner.config.swap_cap)} if app else {}
    assert online_violations(commits, limits, set(limits), node_size=8) == []


def check_commit(planner: Planner, decided: list) -> object:
    """The step's decisions pairwise disjoint in GPUs x steps; its starts in its commit."""
    for i, (d, dur) in enumerate(decided):
        for e, other in decided[i + 1 :]:
            steps = set(range(d.start_step, d.start_step + dur)) & set(range(e.start_step, e.start_step + other))
            assert not (steps and mask_of(d.gpus) & mask_of(e.gpus)), (d, e)
    commit = planner.boundary.tick()
    assert check_plan(commit.window, to_grid(commit.window, commit.schedule)) == []
    for d, _ in decided:
        if d.action == "start":
            assert commit.assignments[d.job_id] == d.gpus and d.job_id in commit.started
    return commit


def test_a_pass_is_inserted_most_valuable_first_but_in_arrival_order_for_fifo():
    from gpualloc.solvers.policies.fifo import fifo_schedule

    def decided(planner: Planner) -> dict[str, str]:
        planner.boundary.tick()  # an empty pool's plan: the pass below is inserted into it
        jobs = [JobSpec("low", "training", 1, 8, 2, 1), JobSpec("high", "training", 9, 8, 2, 1)]
        return {d.job_id: d.action for d in planner.admission.submit_all(jobs)}

    config = PoolConfig(gpus=8, gpus_per_node=8, horizon=6)
    assert decided(Planner(config)) == {"high": "start", "low": "planned"}
    assert decided(Planner(config, scheduler=fifo_schedule, by_arrival=True)) == {"low": "start", "high": "planned"}


def test_a_small_queue_replans_its_pass_and_a_valuable_arrival_goes_before_planned_work():
    """Under `replan_work` a pass replans the window: the started job stays where it is, a
    planned one gives way to a more valuable arrival; above it the arrival is inserted behind."""
    starts = {}
    for work in (0, 8 * 3):
        planner = Planner(PoolConfig(gpus=8, gpus_per_node=8, horizon=8), replan_work=work)
        running = planner.admission.submit(JobSpec("run", "training", 1, 8, 2, 0))
        assert running.action == "start"
        assert planner.admission.submit(JobSpec("low", "training", 1, 8, 3, 0)).start_step == 2
        high = planner.admission.submit(JobSpec("high", "training", 9, 8, 2, 0))
        starts[work] = high.start_step
        assert planner.running["run"].mask == mask_of(range(8))  # the started job never moves
        commit = planner.boundary.tick()
        assert commit.assignments["run"] == running.gpus
    assert starts == {0: 5, 24: 2}
