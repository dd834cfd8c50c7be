"""What a real-time app needs now: the contract's observed need ("Reactive commits"), the one
definition the reactive grants answer and `status`, `explain` and the shortfall metric report.
Pure: a function of the app's observations and the committed step."""

from __future__ import annotations

from collections.abc import Mapping

from gpualloc.solvers.planner.records import AppState


def observed_need(app: AppState, step: int) -> int | None:
    """GPUs `app` needs in the committed `step`: its last observation, when it was made in that
    step or the step before (an observation holds until the next), else the largest one known
    ahead for that step; None: none."""
    if app.latest is not None and step - 1 <= app.latest.step <= step:
        return app.latest.gpus
    return app.observed.get(step)


def needs(apps: Mapping[str, AppState], step: int, gpus: int) -> dict[str, int]:
    """Each app's observed need in `step` within its ceiling in a pool of `gpus` (0: none
    observed): what it is short of when it holds fewer."""
    return {app_id: min(observed_need(app, step) or 0, app.spec.ceiling(gpus)) for app_id, app in apps.items()}
