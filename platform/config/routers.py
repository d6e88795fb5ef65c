"""The API's router (kept apart from config.api, which DRF imports while its own modules load)."""

from __future__ import annotations

from rest_framework.routers import SimpleRouter


class OptionalSlashRouter(SimpleRouter):
    """A router whose routes match with or without the trailing slash, so ``POST /api/v1/jobs`` works
    as well as ``/api/v1/jobs/`` (Django cannot redirect a POST to add the slash)."""

    def __init__(self) -> None:
        super().__init__()
        self.trailing_slash = "/?"
