"""Load demo data: an admin, a demo team with a quota, a researcher and a viewer, catalog images.

Idempotent: rerunning changes nothing that exists and prints the same credentials. Generated passwords
are kept in ``var/demo-credentials.json`` (mode 0600) so every run can print them; a user whose
password was changed by hand keeps it, and its stale entry is dropped from the file. The simulated
cluster's state file is created if absent and never reset here, so running jobs survive a restart.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from accounts.models import Membership, Team

logger = logging.getLogger(__name__)

DEMO_TEAM = {"name": "Demo team", "slug": "demo"}
DEMO_QUOTA = {
    "guaranteed_gpu_milli": 4000,
    "max_gpu_milli": 16000,
    "max_concurrent_jobs": 50,
    "gpu_hours_per_month": 5000.0,
    "per_user_gpu_milli": 8000,
}
# username -> (role in the demo team (accounts.models.Role value) or None, is superuser)
DEMO_USERS: dict[str, tuple[str | None, bool]] = {
    "admin": ("owner", True),
    "researcher": ("member", False),
    "viewer": ("viewer", False),
}
FALLBACK_IMAGES = [
    {
        "name": "pytorch",
        "tag": "2.4-cuda12.4",
        "framework": "pytorch",
        "framework_version": "2.4.1",
        "cuda_version": "12.4",
        "min_driver": "550.54",
        "python_version": "3.11",
        "description": "PyTorch with CUDA 12.4 and cuDNN 9.",
    },
    {
        "name": "tensorflow",
        "tag": "2.17-cuda12.3",
        "framework": "tensorflow",
        "framework_version": "2.17.0",
        "cuda_version": "12.3",
        "min_driver": "545.23",
        "python_version": "3.11",
        "description": "TensorFlow with CUDA 12.3.",
    },
    {
        "name": "jax",
        "tag": "0.4-cuda12.4",
        "framework": "jax",
        "framework_version": "0.4.31",
        "cuda_version": "12.4",
        "min_driver": "550.54",
        "python_version": "3.11",
        "description": "JAX with CUDA 12.4.",
    },
]


def credentials_path() -> Path:
    return Path(settings.VAR_DIR) / "demo-credentials.json"


def _load_credentials() -> dict[str, str]:
    try:
        data = json.loads(credentials_path().read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _save_credentials(creds: dict[str, str]) -> None:
    path = credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(creds, fh, indent=1)


def _ensure_user(username: str, superuser: bool, creds: dict[str, str]) -> tuple[Any, str | None]:
    """The user, and its password when known (generated now, or stored by an earlier run)."""
    User = get_user_model()
    user = User.objects.filter(username=username).first()
    if user is None:
        password = creds.get(username) or secrets.token_urlsafe(12)
        if superuser:
            user = User.objects.create_superuser(username, f"{username}@example.org", password)
        else:
            user = User.objects.create_user(username, f"{username}@example.org", password)
        creds[username] = password
        return user, password
    stored = creds.get(username)
    if stored and user.check_password(stored):
        return user, stored
    creds.pop(username, None)  # changed by hand: forget the stale value rather than print it
    return user, None


def _ensure_images() -> int:
    from images.models import JobImage

    try:
        from images import catalog
    except ImportError:
        catalog = None  # type: ignore[assignment]
    sync = getattr(catalog, "sync_catalog", None)
    if callable(sync):
        try:
            sync()
        except Exception:  # noqa: BLE001  (a broken Dockerfile label must not block the demo)
            logger.warning(
                "images.catalog.sync_catalog failed; using the built-in demo images", exc_info=True
            )
    if JobImage.objects.filter(is_active=True).exists():
        return JobImage.objects.filter(is_active=True).count()
    for row in FALLBACK_IMAGES:
        JobImage.objects.get_or_create(name=row["name"], tag=row["tag"], defaults=row)
    return JobImage.objects.count()


class Command(BaseCommand):
    help = "Create the demo admin, team, quota, users and images (idempotent); print the credentials."

    def handle(self, *args: Any, **options: Any) -> None:
        from accounts.services import team_create
        from quotas.services import quota_set

        creds = _load_credentials()
        with transaction.atomic():
            users = {name: _ensure_user(name, su, creds) for name, (_, su) in DEMO_USERS.items()}
            admin = users["admin"][0]
            team = Team.objects.filter(slug=DEMO_TEAM["slug"]).first()
            if team is None:
                team = team_create(name=DEMO_TEAM["name"], slug=DEMO_TEAM["slug"], actor=admin, owner=admin)
                quota_set(team=team, actor=admin, **DEMO_QUOTA)
            for name, (role, _) in DEMO_USERS.items():
                if role is not None:
                    Membership.objects.get_or_create(user=users[name][0], team=team, defaults={"role": role})
            images = _ensure_images()
        _save_credentials(creds)
        created = self._ensure_cluster()

        self.stdout.write(self.style.SUCCESS("Demo data ready."))
        self.stdout.write(f"  team: {team.name} (slug {team.slug}); {images} catalog image(s)")
        if created is not None:
            self.stdout.write(
                f"  simulated cluster: {'created' if created else 'kept'} ({settings.SIM_STATE_PATH})"
            )
        for name, (role, su) in DEMO_USERS.items():
            password = users[name][1]
            what = "superuser" if su else f"{role} of {team.slug}"
            shown = password if password else "(set by hand; unchanged)"
            self.stdout.write(f"  {name:<11} password: {shown:<20} {what}")

    def _ensure_cluster(self) -> bool | None:
        if settings.CLUSTER_BACKEND != "simulated":
            return None
        from jobs.cluster import get_backend

        backend = get_backend()
        return bool(backend.ensure_state())  # type: ignore[attr-defined]
