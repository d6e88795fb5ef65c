"""Reads of jobs, scoped to the caller's teams: a job of another team does not exist for them (404)."""

from __future__ import annotations

import bisect
import datetime as dt
import re
from typing import Any

from django.core.cache import cache
from django.db import connection
from django.db.models import F, QuerySet, Sum
from django.http import Http404
from django.utils import timezone

from accounts.models import Membership
from images.models import JobImage
from jobs.models import Job, JobEvent, Task
from jobs.policy_settings import active_policy, queue_order_key
from jobs.queue_eta import eta_key
from jobs.states import JobStatus
from quotas.services import las_gpus

# The PREEMPTING event's reason as jobs.scheduling._preempt writes it.
PREEMPTION_REASON = re.compile(
    r"^(?P<kind>preempted|migrated) by rule (?P<rule>\S+)(?: for job (?P<by>\d+))?"
)


def jobs_for_user(*, user: Any) -> QuerySet[Job]:
    """Jobs of every team ``user`` belongs to (any role), newest first."""
    if not getattr(user, "is_authenticated", False):
        return Job.objects.none()
    team_ids = Membership.objects.filter(user=user).values("team_id")
    return Job.objects.filter(team_id__in=team_ids).select_related("team", "user", "image")


# Columns of a job only the scheduler reads (not JobOutput), and what JobOutput shows of the rows
# jobs_for_user joins. A page of 50 jobs loaded the team's, user's and image's every column (the
# password hash, dates, the image's labels: 36 columns a row) for these five.
_UNLISTED_JOB_COLUMNS = frozenset({"planned_placement", "preempted_at", "preemption_rule"})
_LISTED_RELATED = ("team__slug", "user__username", "image__registry", "image__name", "image__tag")


def listed_columns(jobs: QuerySet[Job]) -> QuerySet[Job]:
    """``jobs`` (from jobs_for_user) loading only the columns a job list answer reads. Another read of
    a deferred column costs a query per row, so tests/api/test_job_output_representation.py counts a
    list's queries."""
    own = [f.name for f in Job._meta.concrete_fields if f.name not in _UNLISTED_JOB_COLUMNS]
    return jobs.only(*own, *_LISTED_RELATED)


def job_for_user(*, user: Any, job_id: int | str) -> Job:
    """One job visible to ``user``; raises Http404 for unknown ids and for jobs of other teams alike."""
    try:
        return jobs_for_user(user=user).get(pk=int(job_id))
    except (Job.DoesNotExist, ValueError, TypeError):
        raise Http404("No job with this id.") from None


def job_tasks(*, job: Job) -> QuerySet[Task]:
    return Task.objects.filter(job=job).order_by("index")


def job_events(*, job: Job) -> QuerySet[JobEvent]:
    return JobEvent.objects.filter(job=job).order_by("created_at", "id")


def queue_positions(job_ids: list[int] | None = None) -> dict[int, int]:
    """1-based position of each QUEUED job in the cluster-wide queue.

    The order is the policy's, as the last scheduling cycle left it (``Job.queue_position``); jobs
    queued since then follow in submission order. Jobs not in the queue are absent from the result.
    With ``job_ids`` (a page of a job list) the database numbers the queue and returns those rows
    only (``_ranked_positions``), instead of every queued id coming back to be counted here.
    """
    if job_ids is not None:
        return _ranked_positions(job_ids)
    return _walked_positions()


def _ranked_positions(job_ids: list[int]) -> dict[int, int]:
    """queue_positions' answer for ``job_ids`` in one statement: ROW_NUMBER() over the QUEUED jobs in
    _walked_positions' order, kept for the asked ids. ``queue_position IS NULL`` first in the key
    puts unplaced jobs last on every database (the ORM's nulls_last); ``submitted_at`` with no
    modifier sorts its nulls where the ORM's order_by does on this database."""
    wanted = sorted({int(pk) for pk in job_ids})
    if not wanted:
        return {}
    job = connection.ops.quote_name(Job._meta.db_table)
    marks = ", ".join(["%s"] * len(wanted))
    sql = (
        "SELECT id, pos FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY queue_position IS NULL, "
        f"queue_position, submitted_at, id) AS pos FROM {job} WHERE status = %s) ranked "
        f"WHERE id IN ({marks})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [JobStatus.QUEUED.value, *wanted])
        return {int(pk): int(pos) for pk, pos in cursor.fetchall()}


def _walked_positions() -> dict[int, int]:
    """Every QUEUED id in order through the ORM, counted here (the whole queue)."""
    ordered = (
        Job.objects.filter(status=JobStatus.QUEUED.value)
        .order_by(F("queue_position").asc(nulls_last=True), "submitted_at", "id")
        .values_list("id", flat=True)
    )
    return {job_id: position for position, job_id in enumerate(ordered.iterator(), start=1)}


def queue_position(job_id: int) -> int | None:
    """``queue_positions([job_id]).get(job_id)`` without walking the queue: one COUNT of the QUEUED
    jobs that come before it in queue_positions' order (``queue_position`` with nulls last, then
    ``submitted_at``, then id), in one statement so that it reads one snapshot of the queue, as the
    walk does. None when the job is not QUEUED. Hand-written SQL: the ORM spent longer compiling the
    conditional COUNT than the database took to run it."""
    job = connection.ops.quote_name(Job._meta.db_table)
    # Inside one queue_position group: earlier submissions, then lower ids at the same instant. A row
    # without a submission time sorts first where the database puts nulls first (SQLite), last where
    # it puts them last (PostgreSQL: connection.features.nulls_order_largest).
    earlier = "(j.submitted_at < me.sub OR (j.submitted_at = me.sub AND j.id < me.id)"
    earlier += ")" if connection.features.nulls_order_largest else " OR j.submitted_at IS NULL)"
    sql = (
        f"WITH me AS (SELECT id, queue_position AS qp, submitted_at AS sub FROM {job} "
        "WHERE id = %s AND status = %s) "
        "SELECT (SELECT COUNT(*) FROM me), (SELECT COUNT(*) FROM me WHERE sub IS NULL), "
        f"(SELECT COUNT(*) FROM {job} j, me WHERE j.status = %s AND ("
        f"(me.qp IS NULL AND (j.queue_position IS NOT NULL OR (j.queue_position IS NULL AND {earlier}))) "
        f"OR j.queue_position < me.qp OR (j.queue_position = me.qp AND {earlier})))"
    )
    queued = JobStatus.QUEUED.value
    with connection.cursor() as cursor:
        cursor.execute(sql, [job_id, queued, queued])
        found, unsubmitted, before = cursor.fetchone()
    if not found:
        return None
    if unsubmitted:
        # Where its own missing submission time sorts differs by database: walk the queue as before.
        return queue_positions([job_id]).get(job_id)
    return int(before) + 1


def queue_order() -> str:
    """The rule that ordered the queue in the last scheduling cycle ("" before the first one)."""
    try:
        return str(cache.get(queue_order_key()) or "")
    except Exception:  # noqa: BLE001  (a cache outage must not break a read)
        return ""


def queue_cache_context(*, etas: bool) -> dict[str, Any]:
    """The queue's cached facts for the job serializers' context in one cache round trip: the order
    rule (``queue_order``, as queue_order() answers it) and, with ``etas`` (some job shown is QUEUED),
    the start estimates (``_etas``, what JobOutput would otherwise read itself). On a cache outage
    only the rule is given ("", as queue_order() answers then) and the serializer reads the estimates
    itself, as it always did."""
    if not etas:
        return {"queue_order": queue_order()}
    try:
        order_key, etas_key = queue_order_key(), eta_key()
        found = cache.get_many([order_key, etas_key])
    except Exception:  # noqa: BLE001  (a cache outage must not break a read)
        return {"queue_order": ""}
    return {"queue_order": str(found.get(order_key) or ""), "_etas": found.get(etas_key) or {}}


def attained_now(job: Job, now: dt.datetime | None = None) -> float:
    """Attained service in GPU-seconds (the 2D-LAS measure): finished runs plus the current one."""
    total = job.attained_gpu_seconds
    if job.run_started_at is not None:
        gpus = las_gpus(gpus=job.gpus, gpu_milli=job.gpu_milli, replicas=job.replicas)
        total += gpus * max(0.0, ((now or timezone.now()) - job.run_started_at).total_seconds())
    return total


def las_thresholds() -> tuple[float, ...]:
    """The attained-service thresholds (GPU-seconds) of the platform policy's 2D-LAS levels; empty
    when the policy orders by something else."""
    try:
        policy = active_policy()
    except ValueError:
        return ()
    if getattr(policy, "order", "las") != "las":
        return ()
    return tuple(float(t) for t in getattr(policy, "las_thresholds", ()) or ())


def las_level(attained_gpu_s: float, thresholds: tuple[float, ...] | None = None) -> int | None:
    """The LAS level (0 = least served) of this much attained service under the platform policy, or
    None when the policy has no levels."""
    limits = las_thresholds() if thresholds is None else thresholds
    if not limits:
        return None
    return bisect.bisect_right(limits, attained_gpu_s)


def preemption_history(*, job: Job) -> list[dict[str, Any]]:
    """Each time the job was preempted or migrated: when, the rule and the preemptor (from the
    PREEMPTING events, whose reason is written by jobs.scheduling), and when it stopped."""
    events = list(JobEvent.objects.filter(job=job).order_by("created_at", "id"))
    out: list[dict[str, Any]] = []
    for i, event in enumerate(events):
        if event.to_status != JobStatus.PREEMPTING.value:
            continue
        match = PREEMPTION_REASON.match(event.reason)
        stopped = next(
            (e.created_at for e in events[i + 1 :] if e.from_status == JobStatus.PREEMPTING.value), None
        )
        out.append(
            {
                "at": event.created_at,
                "kind": match.group("kind") if match else "preempted",
                "rule": match.group("rule") if match else "",
                "preemptor": int(match.group("by")) if match and match.group("by") else None,
                "reason": event.reason,
                "stopped_at": stopped,
            }
        )
    return out


def preemption_counts(*, team_ids: Any = None) -> dict[str, int]:
    """Preemptions and migrations over all jobs (of ``team_ids`` when given)."""
    jobs = Job.objects.all() if team_ids is None else Job.objects.filter(team_id__in=team_ids)
    totals = jobs.aggregate(preemptions=Sum("preemptions"), migrations=Sum("migrations"))
    return {key: int(value or 0) for key, value in totals.items()}


def resolve_image(reference: JobImage | int | str) -> JobImage | None:
    """An image by id, by ``name:tag`` (optionally with the registry prefix) or by bare name (tag
    ``latest``). Returns None when none matches; inactive images are returned (callers refuse them)."""
    if isinstance(reference, JobImage):
        return reference
    if isinstance(reference, int) and not isinstance(reference, bool):
        return JobImage.objects.filter(pk=reference).first()
    if not isinstance(reference, str) or not reference.strip():
        return None
    text = reference.strip()
    if text.isdigit():
        return JobImage.objects.filter(pk=int(text)).first()
    name, _, tag = text.rpartition(":") if ":" in text.rsplit("/", 1)[-1] else (text, "", "latest")
    candidates = JobImage.objects.filter(tag=tag or "latest")
    for image in candidates.filter(name=name.rsplit("/", 1)[-1]) | candidates.filter(name=name):
        if image.name == name or image.reference == text or image.reference == f"{name}:{tag}":
            return image
    return None


def job_logs(*, job: Job, task_index: int | None = None) -> list[dict[str, Any]]:
    """Captured output of each task of ``job`` (or of one task), from the cluster backend.

    Backend errors propagate (scheduler.backends.base.BackendError): the API answers 503 for them.
    """
    from jobs.cluster import get_backend

    tasks = job_tasks(job=job)
    if task_index is not None:
        tasks = tasks.filter(index=task_index)
    task_list = list(tasks)
    if not task_list:
        return []
    backend = get_backend()
    return [
        {
            "task": task.name,
            "index": task.index,
            "phase": task.phase,
            "log": backend.logs(str(job.pk), task.name),
        }
        for task in task_list
    ]


def cluster_for_user(*, user: Any) -> dict[str, Any]:
    """The cluster view of jobs.cluster, with other teams' job and task ids hidden.

    Everyone signed in sees every node, GPU and how much of it is allocated (and to which team), so
    they can judge where their job fits; only members of a job's team see which job holds a GPU.
    """
    from jobs.cluster import cluster_view

    view = cluster_view()
    allocations = [
        allocation
        for node in view.get("nodes", [])
        for gpu in node.get("gpus", [])
        for allocation in gpu.get("allocations", [])
    ]
    ids = {a.get("job_id") for a in allocations if isinstance(a.get("job_id"), int)}
    visible = set(jobs_for_user(user=user).filter(pk__in=ids).values_list("pk", flat=True))
    for allocation in allocations:
        if allocation.get("job_id") not in visible:
            allocation["job_id"] = None
            allocation["task_id"] = None
    return view
