"""A placement written into a Task row by the cycle reads back as the same placement."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import pytest

from jobs import scheduling
from jobs.models import Job, Task
from jobs.placements import task_fields, task_placement
from jobs.states import JobStatus
from scheduler.model import Placement
from tests.jobs.runtime_fixtures import (  # noqa: F401  (fixtures)
    clock,
    image,
    researcher,
    sim,
    submit,
    team,
)


def test_a_task_row_reads_back_as_the_placement_that_wrote_it(sim, researcher, image) -> None:
    job = submit(researcher, image, gpu_milli=250)
    written = Placement(
        job_id=str(job.pk),
        task_id=scheduling.task_name(job.pk, 0),
        node="node-a",
        gpu_indices=(1, 3),
        gpu_milli=250,
        gpu_memory_mib=4096,
        cpu_milli=job.cpu_milli,
        memory_mib=job.memory_mib,
        reason="fits best",
        predicted_slowdown=1.25,
    )
    task = Task.objects.create(job=job, index=0, name=written.task_id, **task_fields(written))
    task.refresh_from_db()
    assert task_placement(job, task) == written


def test_the_cycle_binds_what_it_recorded(sim, researcher, image) -> None:
    job = submit(researcher, image, gpus=1, replicas=2)
    scheduling.run_scheduling_cycle(backend=sim)
    job = Job.objects.get(pk=job.pk)
    assert job.status == JobStatus.ADMITTED.value
    recorded = [task_placement(job, t) for t in job.tasks.order_by("index")]
    assert [p.task_id for p in recorded] == [f"job-{job.pk}-0", f"job-{job.pk}-1"]
    assert all(p.gpu_milli == 1000 and len(p.gpu_indices) == 1 for p in recorded)


def test_a_placement_survives_its_dict_form() -> None:
    placement = Placement("7", "job-7-0", "n1", (0, 2), 500, 1024, 2000, 4096, "why", 1.1)
    assert Placement.from_dict(placement.to_dict()) == placement


def test_an_older_record_without_the_optional_fields_still_reads() -> None:
    placement = Placement.from_dict({"job_id": 7, "task_id": "job-7-0", "node": "n1"})
    assert placement == Placement("7", "job-7-0", "n1")


@pytest.mark.parametrize(
    "bad", [{"task_id": "t", "node": "n"}, {"job_id": "1", "task_id": "t", "node": "n", "gpu_milli": "x"}]
)
def test_a_malformed_record_raises(bad: dict[str, object]) -> None:
    with pytest.raises((KeyError, ValueError)):
        Placement.from_dict(bad)
