"""The scheduling cycle: queue order, placements persisted as tasks, reasons for the unplaced."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

from typing import Any

from django.core.cache import cache

from jobs import lease, scheduling
from jobs.binding import job_bind
from jobs.models import Job, JobEvent
from jobs.states import JobStatus
from scheduler.backends.simulated import SimulatedBackend
from tests.jobs.runtime_fixtures import (  # noqa: F401  (fixtures)
    clock,
    image,
    make_member,
    make_team,
    researcher,
    sim,
    submit,
    team,
)


def cycle(sim: SimulatedBackend) -> scheduling.CycleResult:
    result = scheduling.run_scheduling_cycle(backend=sim)
    assert result is not None
    return result


def test_a_queued_job_that_fits_is_admitted_with_one_deterministic_task(sim, researcher, image) -> None:
    job = submit(researcher, image, gpu_milli=250, gpu_memory_mib=4096)
    result = cycle(sim)
    job.refresh_from_db()
    assert result.admitted == [job.pk]
    assert job.status == JobStatus.ADMITTED.value
    assert job.pending_reason == ""
    (task,) = job.tasks.all()
    assert task.name == f"job-{job.pk}-0"
    assert (task.node, task.gpu_indices, task.gpu_milli, task.gpu_memory_mib) == ("t4-1", [0], 250, 4096)
    assert task.placement_reason
    event = JobEvent.objects.get(job=job, to_status=JobStatus.ADMITTED.value)
    assert event.actor == "scheduler" and "t4-1" in event.reason


def test_a_job_gets_one_task_per_replica_on_distinct_gpus(sim, researcher, image) -> None:
    job = submit(researcher, image, gpus=1, replicas=2)
    cycle(sim)
    tasks = list(Job.objects.get(pk=job.pk).tasks.order_by("index"))
    assert [t.name for t in tasks] == [f"job-{job.pk}-0", f"job-{job.pk}-1"]
    assert sorted(i for t in tasks for i in t.gpu_indices) == [0, 1]
    assert all(t.gpu_milli == 1000 for t in tasks)


def test_a_job_that_cannot_fit_stays_queued_with_its_position_and_reason(sim, researcher, image) -> None:
    # A job no node could ever hold is refused at submit; this one only waits for GPUs in use.
    submit(researcher, image, gpus=2, replicas=len(sim.snapshot().nodes))
    cycle(sim)
    job = submit(researcher, image, gpus=2)
    result = cycle(sim)
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED.value
    assert job.pending_reason.startswith(f"#1 in queue ({cache.get(scheduling.queue_order_key())}): ")
    assert job.queue_position == 1
    assert "fewer than 2 free whole GPU" in job.pending_reason
    assert result.pending == {job.pk: job.pending_reason}
    assert not job.tasks.exists()


def test_higher_priority_is_placed_before_older_jobs(sim, researcher, image) -> None:
    old = submit(researcher, image, gpus=2, priority=0)
    urgent = submit(researcher, image, gpus=2, priority=10)
    cycle(sim)
    old.refresh_from_db()
    urgent.refresh_from_db()
    assert urgent.status == JobStatus.ADMITTED.value
    assert old.status == JobStatus.QUEUED.value
    assert old.pending_reason.startswith("#1 in queue")


def test_at_equal_priority_the_older_job_goes_first(sim, researcher, image) -> None:
    first = submit(researcher, image, gpus=2)
    second = submit(researcher, image, gpus=2)
    cycle(sim)
    assert Job.objects.get(pk=first.pk).status == JobStatus.ADMITTED.value
    assert Job.objects.get(pk=second.pk).status == JobStatus.QUEUED.value


def test_placements_waiting_for_their_bind_are_not_given_away_twice(sim, researcher, image) -> None:
    first = submit(researcher, image, gpus=2)
    cycle(sim)
    assert Job.objects.get(pk=first.pk).status == JobStatus.ADMITTED.value
    second = submit(researcher, image, gpu_milli=100)
    cycle(sim)  # the backend shows nothing bound yet, but both GPUs are promised to the first job
    assert Job.objects.get(pk=second.pk).status == JobStatus.QUEUED.value
    job_bind(job_id=first.pk, backend=sim)
    cycle(sim)  # now the backend itself holds them
    assert Job.objects.get(pk=second.pk).status == JobStatus.QUEUED.value


def test_shared_gpus_are_packed_without_oversubscription(sim, researcher, image) -> None:
    jobs = [submit(researcher, image, gpu_milli=400, gpu_memory_mib=1024) for _ in range(5)]
    cycle(sim)
    admitted = [j for j in jobs if Job.objects.get(pk=j.pk).status == JobStatus.ADMITTED.value]
    assert len(admitted) == 4  # two per T4: 2 x 400 fits in 1000, 3 x 400 does not
    per_gpu: dict[int, int] = {}
    for job in admitted:
        for task in job.tasks.all():
            for idx in task.gpu_indices:
                per_gpu[idx] = per_gpu.get(idx, 0) + task.gpu_milli
    assert per_gpu == {0: 800, 1: 800}


def test_a_cycle_does_nothing_while_another_holds_the_lock_and_asks_it_to_go_again(
    sim, researcher, image
) -> None:
    job = submit(researcher, image, gpu_milli=250)
    someone_else = lease.make_lease()
    assert someone_else.acquire()
    assert scheduling.run_scheduling_cycle(backend=sim) is None
    assert Job.objects.get(pk=job.pk).status == JobStatus.QUEUED.value
    assert cache.get(scheduling.rerun_key())
    someone_else.release()
    cycle(sim)
    assert Job.objects.get(pk=job.pk).status == JobStatus.ADMITTED.value
    again = lease.make_lease()
    assert again.acquire()  # the cycle gave its lease back
    again.release()


def test_repeating_a_cycle_admits_a_job_only_once(sim, researcher, image) -> None:
    job = submit(researcher, image, gpu_milli=250)
    cycle(sim)
    second = cycle(sim)
    assert second.admitted == []
    assert JobEvent.objects.filter(job=job, to_status=JobStatus.ADMITTED.value).count() == 1
    assert job.tasks.count() == 1


def test_cpu_only_jobs_are_placed_without_gpus(sim, researcher, image) -> None:
    job = submit(researcher, image, cpu_milli=2000)
    cycle(sim)
    (task,) = Job.objects.get(pk=job.pk).tasks.all()
    assert task.gpu_indices == [] and task.gpu_milli == 0


def test_job_requests_carry_the_gang_and_its_team(researcher, image, team, settings: Any) -> None:
    job = submit(researcher, image, gpus=1, replicas=3, priority=5)
    request = scheduling.job_request(job)
    assert [t.task_id for t in request.tasks] == [f"job-{job.pk}-{i}" for i in range(3)]
    assert all(t.gpus == 1 and t.gpu_milli == 0 for t in request.tasks)
    assert (request.team, request.user, request.priority) == (team.slug, "ada", 5)
