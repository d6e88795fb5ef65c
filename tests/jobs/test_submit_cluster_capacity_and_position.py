"""The submit-time cluster check reads a per-process summary of the node shapes that follows the
simulated cluster's node list, and a job's queue position from one COUNT equals its place in the
walked queue."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from jobs import cluster, selectors
from jobs.models import Job
from jobs.states import JobStatus

pytestmark = pytest.mark.django_db


def _set_gpu_count(path: Path, count: int) -> None:
    state = json.loads(path.read_text())
    for node in state["nodes"]:
        node["gpu_count"] = count
    path.write_text(json.dumps(state))


def test_the_capacity_summary_follows_a_change_of_the_node_list(tmp_path: Path) -> None:
    state = tmp_path / "cluster.json"
    with override_settings(CLUSTER_BACKEND="simulated", SIM_CLUSTER="demo", SIM_STATE_PATH=str(state)):
        first = max(n.gpu_count for n in cluster.cluster_capacity().nodes)
        _set_gpu_count(state, first + 8)  # a bigger node: a request that was impossible becomes possible
        grown = max(n.gpu_count for n in cluster.cluster_capacity().nodes)
        _set_gpu_count(state, 1)  # and back: possible becomes impossible
        shrunk = max(n.gpu_count for n in cluster.cluster_capacity().nodes)

    assert (grown, shrunk) == (first + 8, 1)


def _queued(job: Any, n: int, positions: list[int | None], priority: list[int]) -> list[int]:
    base = timezone.now()
    ids = []
    for i in range(n):
        clone = Job.objects.get(pk=job.pk)
        clone.pk = None
        clone.status = JobStatus.QUEUED.value
        clone.queue_position = positions[i]
        clone.priority = priority[i]
        clone.submitted_at = base + dt.timedelta(seconds=i % 3)  # ties broken by id
        clone.save(force_insert=True)
        ids.append(clone.pk)
    return ids


@pytest.mark.parametrize(
    "positions",
    [[None] * 7, [3, 1, 2, None, None, 1, None], [5, 4, 3, 2, 1, 6, 7]],
    ids=["unplaced", "mixed", "placed"],
)
def test_the_queue_position_equals_the_place_in_the_walked_queue(
    submit_job: Any, member: Any, positions: list[int | None]
) -> None:
    job = submit_job(member)
    ids = _queued(job, 7, positions, priority=[0, 100, -100, 0, 500, 0, 0])
    walked = selectors.queue_positions()

    assert {pk: selectors.queue_position(pk) for pk in [job.pk, *ids]} == {
        pk: walked[pk] for pk in [job.pk, *ids]
    }
    Job.objects.filter(pk=ids[0]).update(status=JobStatus.ADMITTED.value)
    assert selectors.queue_position(ids[0]) is None


@pytest.mark.parametrize(
    "positions",
    [[None] * 7, [3, 1, 2, None, None, 1, None], [5, 4, 3, 2, 1, 6, 7]],
    ids=["unplaced", "mixed", "placed"],
)
def test_a_pages_queue_positions_numbered_by_the_database_equal_the_walked_queue(
    submit_job: Any, member: Any, positions: list[int | None]
) -> None:
    job = submit_job(member)
    ids = _queued(job, 7, positions, priority=[0, 100, -100, 0, 500, 0, 0])
    Job.objects.filter(pk=ids[6]).update(submitted_at=None)  # sorts where this database puts nulls
    Job.objects.filter(pk=ids[5]).update(status=JobStatus.RUNNING.value)  # not in the queue
    walked = selectors.queue_positions()
    page = [ids[6], ids[5], ids[3], ids[0], job.pk]

    answer = selectors.queue_positions(page)

    assert answer == {pk: walked[pk] for pk in page if pk in walked}
    assert ids[5] not in answer
    assert selectors.queue_positions([]) == {}
