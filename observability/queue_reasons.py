"""A waiting job's ``pending_reason`` reduced to one of a few words: the ``reason`` label of the
queue-length metric must stay a small, fixed set (free text would make a series per message)."""

from __future__ import annotations

from jobs.states import JobStatus

REASONS = ("submitted", "requeued", "new", "preemption", "budget", "quota", "resources")


def queue_reason(status: str, pending_reason: str) -> str:
    """``submitted``/``requeued`` by status; for QUEUED jobs: ``new`` (no cycle has looked yet),
    ``preemption`` (waiting for a victim to stop), ``budget``, ``quota``, else ``resources``."""
    if status == JobStatus.SUBMITTED.value:
        return "submitted"
    if status == JobStatus.REQUEUED.value:
        return "requeued"
    text = (pending_reason or "").lower()
    if "waiting for the next scheduling cycle" in text:
        return "new"
    if "waiting for preempted job" in text:
        return "preemption"
    if "waiting for budget" in text:
        return "budget"
    if "waiting for quota" in text:
        return "quota"
    return "resources"
