"""Writes to the image catalog. Keyword-only, typed, atomic."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from images.catalog import DOCKERFILES_DIR, NAMESPACE, CatalogImage, load_catalog
from images.models import JobImage


def is_catalog_row(row: JobImage) -> bool:
    """Whether ``row`` came from our Dockerfiles (our namespace, a Dockerfile recorded). Other rows are
    custom images an admin registered; a sync never touches them."""
    return row.name.startswith(f"{NAMESPACE}/") and bool(row.dockerfile)


@dataclass
class CatalogSyncReport:
    """What a sync did. ``images`` holds the catalog's rows in catalog order (parents first)."""

    images: list[JobImage] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)


def _catalog_fields(image: CatalogImage) -> dict[str, object]:
    return {
        "framework": image.framework,
        "framework_version": image.framework_version,
        "cuda_version": image.cuda_version,
        "min_driver": image.min_driver,
        "python_version": image.python_version,
        "description": image.description,
        "dockerfile": image.dockerfile,
        "accelerator": image.accelerator,
        "base_image": image.base_image,
        "labels": dict(image.labels),
    }


def _upsert(image: CatalogImage, registry: str | None, now: datetime) -> tuple[JobImage, str]:
    """Create or update the row of ``image``; returns it and "created", "updated" or "unchanged"."""
    wanted = _catalog_fields(image)
    if registry is not None:
        wanted["registry"] = registry
    row = JobImage.objects.select_for_update().filter(name=image.name, tag=image.tag).first()
    if row is None:
        row = JobImage.objects.create(
            name=image.name, tag=image.tag, created_at=now, updated_at=now, **wanted
        )
        return row, "created"
    changed = [name for name, value in wanted.items() if getattr(row, name) != value]
    if not changed:
        return row, "unchanged"
    for name in changed:
        setattr(row, name, wanted[name])
    row.updated_at = now
    row.save(update_fields=[*changed, "updated_at"])
    return row, "updated"


@transaction.atomic
def catalog_sync(
    *, catalog: list[CatalogImage] | None = None, root: Path = DOCKERFILES_DIR, registry: str | None = None
) -> CatalogSyncReport:
    """Make the JobImage rows match the Dockerfiles' labels; idempotent.

    One row per catalog image, keyed by (name, tag): created when missing, updated only when a field
    differs (so a repeat sync changes nothing, ``updated_at`` included). Build results (``digest``,
    ``image_id``, ``built_at``) are kept, and so is ``is_active`` of existing rows: an image an admin
    retired stays retired. Catalog rows whose (name, tag) is no longer declared are retired
    (``is_active=False``), never deleted: jobs keep referring to them. ``catalog`` defaults to
    :func:`images.catalog.load_catalog` of ``root``. ``registry`` sets the registry prefix of the
    catalog rows; None leaves existing rows' prefix as it is. Raises
    :class:`images.catalog.CatalogError` for invalid Dockerfiles, before any write.
    """
    images = catalog if catalog is not None else load_catalog(root)
    report = CatalogSyncReport()
    now = timezone.now()
    for image in images:
        row, outcome = _upsert(image, registry, now)
        getattr(report, outcome).append(row.reference)
        report.images.append(row)
    declared = {(image.name, image.tag) for image in images}
    stale = (
        JobImage.objects.select_for_update()
        .filter(name__startswith=f"{NAMESPACE}/", is_active=True)
        .exclude(dockerfile="")
    )
    for row in stale:
        if (row.name, row.tag) not in declared and is_catalog_row(row):
            row.is_active = False
            row.updated_at = now
            row.save(update_fields=["is_active", "updated_at"])
            report.retired.append(row.reference)
    return report


@transaction.atomic
def image_record_build(*, image: CatalogImage, registry: str, image_id: str, digest: str = "") -> JobImage:
    """Record a build that passed its smoke test: image ID, registry digest (after a push), time.

    The row is created or refreshed from ``image`` first, so building a new Dockerfile needs no
    separate sync (other rows are left alone). Without a push (``digest`` empty) the previous registry
    digest is kept only while the image ID is unchanged: otherwise it would name other content.
    """
    now = timezone.now()
    row, _ = _upsert(image, registry, now)
    if digest or row.image_id != image_id:
        row.digest = digest
    row.image_id = image_id
    row.built_at = now
    row.updated_at = now
    row.save(update_fields=["digest", "image_id", "built_at", "updated_at"])
    return row
