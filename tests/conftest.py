"""Shared fixtures: the personas of the access matrix and small builders.

Personas (DESIGN.md §6), all in team ``vision`` unless said otherwise:

- ``owner``: owner of the team; ``member``: member (may submit); ``viewer``: read-only member;
- ``outsider``: signed in, member of another team (``other_team``) only;
- ``anonymous``: no credentials (``None`` in ``personas``);
- ``quota_admin``: staff with the Django permissions on quotas, member of no team.

``api_client_for(user)`` returns a DRF test client authenticated with a real API token of that user
(created through accounts.services), or an anonymous client for ``None``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.test import APIClient

from accounts.models import Membership, Role, Team
from images.models import JobImage
from quotas.models import Quota

PERSONAS = ("owner", "member", "viewer", "outsider", "anonymous")


def _user(username: str, **extra: Any) -> User:
    return User.objects.create_user(username=username, password=f"{username}-password-1", **extra)


@pytest.fixture(autouse=True)
def _fresh_throttles() -> None:
    """Every test starts with no rate-limit history and no login lockouts (accounts.throttles)."""
    from accounts.throttles import throttle_cache

    throttle_cache().clear()


@pytest.fixture
def team(db: Any) -> Team:
    team = Team.objects.create(name="Vision", slug="vision")
    Quota.objects.create(
        team=team,
        max_gpu_milli=8000,
        per_user_gpu_milli=8000,
        max_concurrent_jobs=20,
        gpu_hours_per_month=1000,
    )
    return team


@pytest.fixture
def other_team(db: Any) -> Team:
    team = Team.objects.create(name="Speech", slug="speech")
    Quota.objects.create(team=team, max_gpu_milli=8000)
    return team


@pytest.fixture
def owner(team: Team) -> User:
    user = _user("olivia")
    Membership.objects.create(user=user, team=team, role=Role.OWNER)
    return user


@pytest.fixture
def member(team: Team) -> User:
    user = _user("max")
    Membership.objects.create(user=user, team=team, role=Role.MEMBER)
    return user


@pytest.fixture
def viewer(team: Team) -> User:
    user = _user("vera")
    Membership.objects.create(user=user, team=team, role=Role.VIEWER)
    return user


@pytest.fixture
def outsider(other_team: Team) -> User:
    user = _user("oscar")
    Membership.objects.create(user=user, team=other_team, role=Role.OWNER)
    return user


@pytest.fixture
def quota_admin(db: Any) -> User:
    user = _user("quinn", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="quotas"))
    return User.objects.get(pk=user.pk)  # fresh instance: permission cache


@pytest.fixture
def personas(owner: User, member: User, viewer: User, outsider: User) -> dict[str, User | None]:
    return {"owner": owner, "member": member, "viewer": viewer, "outsider": outsider, "anonymous": None}


@pytest.fixture
def image(db: Any) -> JobImage:
    return JobImage.objects.create(name="pytorch", tag="2.4", framework="pytorch", cuda_version="12.4")


@pytest.fixture
def api_client_for(db: Any) -> Callable[[User | None], APIClient]:
    from accounts.services import token_create

    def build(user: User | None) -> APIClient:
        client = APIClient()
        if user is not None:
            _, raw = token_create(user=user, name="test")
            client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
        return client

    return build


@pytest.fixture
def job_spec() -> Callable[..., Any]:
    """``job_spec(**overrides)`` -> a jobs.specs.JobSpec for one shared-GPU replica."""
    from jobs.specs import JobSpec

    def build(**overrides: Any) -> JobSpec:
        values: dict[str, Any] = {"name": "train", "command": ["python", "train.py"], "gpu_milli": 250}
        values.update(overrides)
        return JobSpec(**values)

    return build


@pytest.fixture
def submit_job(team: Team, image: JobImage, job_spec: Callable[..., Any]) -> Callable[..., Any]:
    """``submit_job(user, **spec_overrides)`` -> a QUEUED Job submitted through jobs.services."""
    from jobs.services import job_submit

    def submit(user: User, **overrides: Any) -> Any:
        return job_submit(user=user, spec=job_spec(**overrides), image=image, team=team)

    return submit
