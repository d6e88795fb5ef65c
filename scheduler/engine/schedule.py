"""``schedule()``: place a queue of jobs, in the caller's order, on a copy of the cluster.

Per job, each task goes through ``PlacementEngine.place`` and is reserved on the working copy so later
tasks and jobs see it; if one task of the job fits nowhere, the job's reservations are undone (a gang
is placed all or nothing) and the job gets the engine's reason in ``Decision.unschedulable``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduler.engine.arrays import ClusterArrays
from scheduler.engine.placement import PlacementEngine
from scheduler.framework import BuiltProfile, CycleState, Profile
from scheduler.model import ClusterSnapshot, Decision, JobRequest, Placement


def schedule(
    snapshot: ClusterSnapshot,
    pending: Sequence[JobRequest],
    profile: Profile | BuiltProfile | None = None,
    *,
    data: dict[str, Any] | None = None,
    arrays: ClusterArrays | None = None,
    explain: bool = True,
    annotate: bool = True,
) -> Decision:
    """Place ``pending`` jobs, in the given order, onto ``snapshot``; the snapshot is not modified.

    ``data`` seeds ``CycleState.data`` (e.g. ``{"target_workload": [...tasks...]}`` for FGD).
    ``arrays``: a ``ClusterArrays`` equal to ``ClusterArrays.from_snapshot(snapshot)``, for callers
    that keep one up to date more cheaply than building it (a batch simulator); ``schedule()`` takes
    it over (the call reserves on it). ``explain=False`` skips the per-node pass that builds a job's
    user-facing reason when a task fits nowhere (``Decision.unschedulable`` then says only "no node
    fits") and the placements' score lines; ``annotate=False`` skips the plugins' annotate hooks
    (``Placement.predicted_slowdown`` stays None, no topology or interference reason lines). The
    decisions are the same either way.
    """
    built = profile if isinstance(profile, BuiltProfile) else (profile or Profile()).build()
    working = snapshot.copy()
    cycle_data = dict(data or {})
    # The queue is part of the workload mix that fragmentation-aware plugins measure against.
    cycle_data.setdefault("pending_tasks", [t for job in pending for t in job.tasks])
    if arrays is None:
        arrays = ClusterArrays.from_snapshot(working)
    elif arrays.n != len(working.nodes):
        raise ValueError(f"arrays has {arrays.n} rows for {len(working.nodes)} snapshot nodes")
    state = CycleState(snapshot=working, data=cycle_data, arrays=arrays)
    engine = PlacementEngine(built, state, working.nodes, explain=explain, annotate=annotate)
    decision = Decision()
    for job in pending:
        state.job = job
        placed: list[tuple[int, Placement]] = []
        failure = ""
        for task in job.tasks:
            outcome = engine.place(task)
            if outcome.placement is None:
                failure = outcome.reason
                break
            engine.commit(outcome.row, outcome.placement)
            placed.append((outcome.row, outcome.placement))
        if failure:
            for row, placement in reversed(placed):
                engine.release(row, placement)
            decision.unschedulable[job.job_id] = failure
        else:
            decision.placements.extend(p for _, p in placed)
    state.job = None
    return decision
