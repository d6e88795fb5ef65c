"""Co-location measurements (issue 21): two jobs that shared a GPU, measured against their solo runs.

Write: ``colocation_record`` turns the throughputs two jobs reported while sharing one GPU (the
throughput contract, ``scheduler.backends.throughput``) into a ``ColocationMeasurement``, when both
configurations have a solo throughput on that GPU model (``SoloProfile``)::

    norm_X = throughput of X while sharing / solo throughput of X on the same GPU model

Nothing is recorded (None) when either solo throughput is unknown or not positive: a ratio against
another GPU model's rate would mix hardware speed into the interference.

Reads: ``measured_normalised`` is the mean measured pair of two configurations (either order), what
the unpacking rule is to prefer over a prediction once it exists; ``colocation_pair_records`` gives
every measurement as a ``PairRecord`` of dataset ``platform``, the form the interference model and
the online correction (``scheduler.interference.online``) learn from.

Sweep: ``colocation_sweep`` (beat, ``jobs.tasks.record_colocations``) reads the backend's running
tasks and records every GPU shared by exactly two of them that both report a throughput.

Acted on: ``measured_rates`` gives the cycle's view the measured rate of a shared job whose backend
measures none (``jobs.scheduling``), the input of the policy's unpacking rule.

Retraining: ``interference_retrain`` (beat, ``jobs.tasks.retrain_interference``) refits the model when
enough new measurements exist, kept only if no worse on them (``scheduler.interference.retrain``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from jobs.cluster import get_backend
from jobs.models import ColocationMeasurement, Job, SoloProfile, Task
from jobs.profiling_services import as_job_profile, job_configuration
from scheduler.backends.base import ClusterBackend, TaskStatus
from scheduler.backends.base import TaskPhase as BackendPhase
from scheduler.datapaths import default_data_dir
from scheduler.interference.datasets import PairRecord, available_datasets, load_datasets
from scheduler.interference.features import normalize_gpu_type
from scheduler.interference.retrain import RetrainOutcome, read_history, retrain_guarded
from scheduler.interference.store import ModelError, default_model_dir, default_model_path, load_model
from scheduler.policy.view import RunningJob


def _solo(image: str, command_hash: str, gpu_model: str) -> SoloProfile | None:
    return SoloProfile.objects.filter(image=image, command_hash=command_hash, gpu_model=gpu_model).first()


@transaction.atomic
def colocation_record(
    *,
    job_a: Job,
    job_b: Job,
    gpu_model: str,
    throughput_a: float,
    throughput_b: float,
    share_a_milli: int,
    share_b_milli: int,
    node: str = "",
    gpu_index: int | None = None,
    predicted_a: float | None = None,
    predicted_b: float | None = None,
    measured_at: datetime | None = None,
) -> ColocationMeasurement | None:
    """Record one measured co-location (module docstring); None when a solo throughput is missing."""
    if throughput_a < 0 or throughput_b < 0:
        raise ValueError("throughputs must be >= 0")
    (image_a, hash_a), (image_b, hash_b) = job_configuration(job_a), job_configuration(job_b)
    solo_a, solo_b = _solo(image_a, hash_a, gpu_model), _solo(image_b, hash_b, gpu_model)
    if solo_a is None or solo_b is None:
        return None
    if not (solo_a.solo_throughput and solo_a.solo_throughput > 0):
        return None
    if not (solo_b.solo_throughput and solo_b.solo_throughput > 0):
        return None
    return ColocationMeasurement.objects.create(
        job_a=job_a,
        job_b=job_b,
        image_a=image_a,
        command_hash_a=hash_a,
        image_b=image_b,
        command_hash_b=hash_b,
        gpu_model=gpu_model,
        node=node,
        gpu_index=gpu_index,
        share_a_milli=share_a_milli,
        share_b_milli=share_b_milli,
        throughput_a=throughput_a,
        throughput_b=throughput_b,
        solo_throughput_a=solo_a.solo_throughput,
        solo_throughput_b=solo_b.solo_throughput,
        norm_a=throughput_a / solo_a.solo_throughput,
        norm_b=throughput_b / solo_b.solo_throughput,
        predicted_a=predicted_a,
        predicted_b=predicted_b,
        measured_at=measured_at or timezone.now(),
    )


def measured_normalised(job_a: Job, job_b: Job, gpu_model: str = "") -> tuple[float, float] | None:
    """Mean measured (norm of A, norm of B) over every measurement of the two configurations, in
    either order (optionally on one GPU model); None when they were never measured together."""
    (image_a, hash_a), (image_b, hash_b) = job_configuration(job_a), job_configuration(job_b)
    rows = ColocationMeasurement.objects.all()
    if gpu_model:
        rows = rows.filter(gpu_model=gpu_model)
    values: list[tuple[float, float]] = []
    for row in rows.filter(image_a=image_a, command_hash_a=hash_a, image_b=image_b, command_hash_b=hash_b):
        values.append((row.norm_a, row.norm_b))
    for row in rows.filter(image_a=image_b, command_hash_a=hash_b, image_b=image_a, command_hash_b=hash_a):
        values.append((row.norm_b, row.norm_a))
    if not values:
        return None
    return (sum(v[0] for v in values) / len(values), sum(v[1] for v in values) / len(values))


def colocation_pair_records() -> list[PairRecord]:
    """Every measurement as a ``PairRecord`` (dataset ``platform``) with both jobs' solo profiles."""
    out: list[PairRecord] = []
    solos = {(s.image, s.command_hash, s.gpu_model): s for s in SoloProfile.objects.all()}
    for row in ColocationMeasurement.objects.order_by("measured_at", "id"):
        sa = solos.get((row.image_a, row.command_hash_a, row.gpu_model))
        sb = solos.get((row.image_b, row.command_hash_b, row.gpu_model))
        if sa is None or sb is None:
            continue
        out.append(
            PairRecord(
                dataset="platform",
                gpu_type=normalize_gpu_type(row.gpu_model),
                profile_a=as_job_profile(sa),
                profile_b=as_job_profile(sb),
                feasible=True,
                norm_a=row.norm_a,
                norm_b=row.norm_b,
            )
        )
    return out


def interference_retrain(*, min_new: int = 20, data_dir: Path | None = None) -> RetrainOutcome | None:
    """Beat's retraining pass: when at least ``min_new`` measurements arrived since the last decision,
    retrain on the public permissive pairs (Gavel, if the data folder has them) plus all own
    measurements, guarded by ``retrain_guarded``; None when there was nothing new enough."""
    own = colocation_pair_records()
    model_dir = default_model_dir()
    history = read_history(model_dir)
    seen = int(history[-1]["measurements"]) if history else 0
    if len(own) - seen < min_new:
        return None
    folder = data_dir or default_data_dir()
    base = load_datasets(folder, ["gavel"]) if "gavel" in available_datasets(folder) else []
    try:
        old = load_model(default_model_path())
    except ModelError:
        old = None
    return retrain_guarded(base=base, own=own, old=old, model_dir=model_dir, min_measurements=min_new)


def colocation_sweep(backend: ClusterBackend | None = None) -> int:
    """Record every pair of running tasks that share one GPU and both report a throughput.

    Only a GPU with exactly two tenants, each holding a share (0 < milli < 1000) of that one GPU, is a
    pair measurement. One row per (job A, job B, node, GPU): a later sweep updates it with the newest
    rates, so a long co-location counts once. The prediction at placement time is the task's stored
    ``predicted_slowdown`` (as a normalised throughput, 1 / slowdown). Returns the rows written."""
    backend = backend or get_backend()
    running = [
        s
        for s in backend.task_statuses()
        if s.phase is BackendPhase.RUNNING and s.throughput is not None and len(s.gpu_indices) == 1
    ]
    if len(running) < 2:
        return 0
    tasks = {
        t.name: t
        for t in Task.objects.filter(name__in=[s.task_id for s in running]).select_related("job__image")
    }
    models = {(n.name, g.index): g.model for n in backend.snapshot().nodes for g in n.gpus}
    by_gpu: dict[tuple[str, int], list[tuple[TaskStatus, Task]]] = {}
    for status in running:
        task = tasks.get(status.task_id)
        if task is not None and 0 < task.gpu_milli < 1000:
            by_gpu.setdefault((status.node, status.gpu_indices[0]), []).append((status, task))
    written = 0
    for (node, index), tenants in sorted(by_gpu.items()):
        if len(tenants) != 2 or tenants[0][1].job_id == tenants[1][1].job_id:
            continue
        (sa, ta), (sb, tb) = sorted(tenants, key=lambda pair: pair[1].job_id)
        gpu_model = models.get((node, index), "")
        ColocationMeasurement.objects.filter(job_a=ta.job, job_b=tb.job, node=node, gpu_index=index).delete()
        row = colocation_record(
            job_a=ta.job,
            job_b=tb.job,
            gpu_model=gpu_model,
            throughput_a=float(sa.throughput or 0.0),
            throughput_b=float(sb.throughput or 0.0),
            share_a_milli=ta.gpu_milli,
            share_b_milli=tb.gpu_milli,
            node=node,
            gpu_index=index,
            predicted_a=1.0 / ta.predicted_slowdown if ta.predicted_slowdown else None,
            predicted_b=1.0 / tb.predicted_slowdown if tb.predicted_slowdown else None,
        )
        written += row is not None
    return written


def job_colocations(job: Job, limit: int = 20) -> list[dict[str, Any]]:
    """The job's measured co-locations, newest first, from its side: the partner (its id only when it
    belongs to the same team), the GPU model, and the measured and predicted slowdowns (1 / y)."""
    rows = ColocationMeasurement.objects.filter(Q(job_a=job) | Q(job_b=job)).select_related("job_a", "job_b")
    out: list[dict[str, Any]] = []
    for row in rows[:limit]:
        mine_a = row.job_a_id == job.pk
        partner = row.job_b if mine_a else row.job_a
        norm = row.norm_a if mine_a else row.norm_b
        predicted = row.predicted_a if mine_a else row.predicted_b
        out.append(
            {
                "partner": partner.pk if partner is not None and partner.team_id == job.team_id else None,
                "gpu_model": row.gpu_model,
                "measured_slowdown": 1.0 / max(norm, 0.01),
                "predicted_slowdown": 1.0 / max(predicted, 0.01) if predicted else None,
                "measured_at": row.measured_at,
            }
        )
    return out


def measured_rates(running: Sequence[RunningJob]) -> dict[str, float]:
    """``RunningJob.rate`` from measurements, for shared jobs whose backend gives none: the job's
    normalised throughput in the newest measurement of its current co-location (same node and GPU),
    so the unpacking rule acts on what was measured."""
    wanted = {
        int(r.job_id): (p.node, p.gpu_indices[0])
        for r in running
        if r.shared and r.job_id.isdigit()
        for p in r.placements[:1]
        if len(p.gpu_indices) == 1
    }
    if not wanted:
        return {}
    rows = ColocationMeasurement.objects.filter(Q(job_a_id__in=wanted) | Q(job_b_id__in=wanted)).order_by(
        "measured_at", "id"
    )
    out: dict[str, float] = {}
    for row in rows:  # ascending: the newest of each job stays
        for job_id, norm in ((row.job_a_id, row.norm_a), (row.job_b_id, row.norm_b)):
            if job_id in wanted and wanted[job_id] == (row.node, row.gpu_index):
                out[str(job_id)] = norm
    return out
