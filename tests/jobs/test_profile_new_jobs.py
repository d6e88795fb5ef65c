"""``PROFILE_NEW_JOBS``: a job whose configuration has no solo profile gets its first minutes alone
on an idle GPU when one is free, and nothing is packed beside it meanwhile.

Real cycle, bind and sync on the simulated cluster (one node, 2 T4s, injected time); the policy is
first fit (``fifo``), which packs whenever a share fits, so every job alone below is the rule's doing.
"""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache

from jobs import scheduling
from jobs.binding import job_bind
from jobs.models import Job
from jobs.profiling_services import solo_profile_record
from jobs.solo_first import MARK
from jobs.sync import sync_status
from scheduler.backends.simulated import SimulatedBackend
from tests.jobs.runtime_fixtures import clock, image, researcher, sim, submit, team  # noqa: F401  (fixtures)

PROFILED = ["python", "train.py", "--known"]


@pytest.fixture(autouse=True)
def first_fit(settings: Any, clock: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.SCHEDULER_POLICY = "fifo"
    monkeypatch.setattr(scheduling, "clock", clock)  # the cycle's time is the cluster's


def cycle(sim: SimulatedBackend) -> None:
    cache.delete(scheduling.round_key())
    scheduling.run_scheduling_cycle(backend=sim)


def place(sim: SimulatedBackend, clock: Any, jobs: list[Job]) -> dict[int, tuple[int, ...]]:
    """Cycle, bind what was placed, let it start; job id -> GPU indices of its task."""
    cycle(sim)
    for job in jobs:
        job.refresh_from_db()
        if job.status == "ADMITTED":
            assert job_bind(job_id=job.pk, backend=sim) == "bound"
    clock.advance(15)
    sync_status(backend=sim)
    out = {}
    for job in jobs:
        task = job.tasks.first()
        if task is not None:
            out[job.pk] = tuple(task.gpu_indices)
    return out


def profiled(image: Any, command: list[str] = PROFILED) -> None:
    samples = [{"t": float(t), "gpu_util": 50.0, "mem_util": 20.0, "memory_mib": 1000.0} for t in range(3)]
    solo_profile_record(image=image.reference, command=command, gpu_model="T4", samples=samples, warmup_s=0.0)


def test_without_the_setting_first_fit_packs_new_jobs_together(
    sim: SimulatedBackend, clock: Any, researcher: Any, image: Any, settings: Any
) -> None:
    settings.PROFILE_NEW_JOBS = 0
    jobs = [submit(researcher, image, command=["python", f"new{i}.py"], gpu_milli=400) for i in range(2)]

    gpus = place(sim, clock, jobs)

    assert gpus[jobs[0].pk] == gpus[jobs[1].pk]


def test_new_configurations_start_alone_with_their_own_share_and_nothing_is_packed_beside_them(
    sim: SimulatedBackend, clock: Any, researcher: Any, image: Any, settings: Any
) -> None:
    settings.PROFILE_NEW_JOBS = 10
    profiled(image)
    jobs = [submit(researcher, image, command=["python", f"new{i}.py"], gpu_milli=400) for i in range(2)]

    gpus = place(sim, clock, jobs)

    assert {gpus[jobs[0].pk], gpus[jobs[1].pk]} == {(0,), (1,)}
    for job in jobs:
        job.refresh_from_db()
        task = job.tasks.get()
        assert (task.gpu_milli, job.status) == (400, "RUNNING")
        assert MARK in task.placement_reason
    # A profiled job that would fit beside either waits while both are in their window.
    known = submit(researcher, image, command=PROFILED, gpu_milli=400)
    assert known.pk not in place(sim, clock, [known])

    # Ten minutes after they started the GPUs are shared again.
    clock.advance(10 * 60)
    sync_status(backend=sim)
    assert place(sim, clock, [known])[known.pk] in {(0,), (1,)}


def test_a_profile_arriving_ends_the_window_early(
    sim: SimulatedBackend, clock: Any, researcher: Any, image: Any, settings: Any
) -> None:
    settings.PROFILE_NEW_JOBS = 10
    profiled(image)
    new = submit(researcher, image, command=["python", "new.py"], gpu_milli=400)
    whole = submit(researcher, image, command=PROFILED, gpus=1)
    place(sim, clock, [new, whole])
    known = submit(researcher, image, command=PROFILED, gpu_milli=400)
    assert known.pk not in place(sim, clock, [known])

    profiled(image, ["python", "new.py"])  # the node agent's samples of the new job arrived

    assert place(sim, clock, [known])[known.pk] == tuple(new.tasks.get().gpu_indices)


def test_with_no_idle_gpu_a_new_job_is_packed_rather_than_kept_waiting(
    sim: SimulatedBackend, clock: Any, researcher: Any, image: Any, settings: Any
) -> None:
    settings.PROFILE_NEW_JOBS = 10
    profiled(image)
    whole = submit(researcher, image, command=PROFILED, gpus=1)
    known = submit(researcher, image, command=PROFILED, gpu_milli=400)
    place(sim, clock, [whole, known])
    new = submit(researcher, image, command=["python", "new.py"], gpu_milli=400)

    gpus = place(sim, clock, [new])

    assert gpus[new.pk] == tuple(known.tasks.get().gpu_indices)
    assert MARK not in new.tasks.get().placement_reason
