"""Cancel several jobs at once from the jobs list: each through jobs.services.job_cancel, so every rule
of a single cancel holds (who may, what a finished job answers); one refusal does not stop the rest."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404

from jobs.selectors import job_for_user
from jobs.services import JobConflict, job_cancel

MAX_JOBS = 100


@dataclass
class BulkCancelResult:
    cancelled: list[dict[str, Any]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)


def jobs_cancel(*, user: Any, job_ids: list[int]) -> BulkCancelResult:
    """Cancel each job of ``job_ids`` on behalf of ``user``. A job of another team is refused as "not
    found" (as the API's 404), one the user may not cancel or that already finished with the
    service's message."""
    result = BulkCancelResult()
    for job_id in dict.fromkeys(job_ids):  # once each, in the order given
        try:
            job = job_cancel(job=job_for_user(user=user, job_id=job_id), user=user)
        except Http404:
            result.refused.append({"id": job_id, "message": "No job with this id."})
        except (PermissionDenied, JobConflict) as exc:
            result.refused.append({"id": job_id, "message": str(exc)})
        else:
            result.cancelled.append({"id": job.pk, "status": job.status})
    return result
