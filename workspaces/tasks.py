"""Celery tasks of the workspaces: the idle culler, run by beat (settings.CELERY_BEAT_SCHEDULE)."""

from __future__ import annotations

from celery import shared_task

from workspaces import culling


@shared_task(name="workspaces.tasks.cull_idle_workspaces")
def cull_idle_workspaces() -> list[int]:
    return [c.job_id for c in culling.cull_idle_workspaces()]
