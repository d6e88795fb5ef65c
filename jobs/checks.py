"""System checks run at start-up (manage.py check, runserver, the worker): fail early, not mid-cycle."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register

from jobs.cluster import KNOWN_BACKENDS


@register(Tags.compatibility, deploy=False)
def check_scheduler_profile(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """SCHEDULER_PROFILE must name a profile whose plugins all exist."""
    from scheduler.profiles import get_profile

    try:
        get_profile(settings.SCHEDULER_PROFILE).build()
    except ValueError as exc:
        return [Error(str(exc), hint="Set SCHEDULER_PROFILE to a known profile.", id="jobs.E001")]
    return []


@register(Tags.compatibility)
def check_cluster_backend(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """CLUSTER_BACKEND must be known, and the simulated backend needs a sane time scale and cluster."""
    name = settings.CLUSTER_BACKEND
    if name not in KNOWN_BACKENDS:
        return [
            Error(
                f"unknown CLUSTER_BACKEND {name!r}",
                hint=f"Use one of: {', '.join(KNOWN_BACKENDS)}.",
                id="jobs.E002",
            )
        ]
    errors: list[CheckMessage] = []
    if name == "simulated":
        from scheduler.backends.sim_clusters import cluster_spec

        if settings.SIM_TIME_SCALE <= 0:
            errors.append(
                Error(f"SIM_TIME_SCALE must be positive, got {settings.SIM_TIME_SCALE}", id="jobs.E003")
            )
        try:
            cluster_spec(settings.SIM_CLUSTER)
        except ValueError as exc:
            errors.append(Error(str(exc), hint="Set SIM_CLUSTER to a known cluster.", id="jobs.E004"))
    return errors
