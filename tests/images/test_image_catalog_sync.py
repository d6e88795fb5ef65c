"""`images sync` keeps the JobImage rows in step with the Dockerfiles, idempotently."""

from __future__ import annotations

import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from images.catalog import DOCKERFILES_DIR, CatalogError, find_image, load_catalog
from images.models import JobImage
from images.services import catalog_sync, image_record_build

pytestmark = pytest.mark.django_db

BASE = """FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
LABEL org.opencontainers.image.title="Base" \\
      org.opencontainers.image.description="{description}" \\
      org.opencontainers.image.version="{version}" \\
      org.gpu-platform.accelerator=gpu org.gpu-platform.python=3.10 org.gpu-platform.cuda=12.4.1 \\
      org.gpu-platform.min-driver={driver} org.gpu-platform.smoke-test=/smoke.sh
"""


def write_base(
    root: Path, *, version: str = "1", description: str = "first", driver: str = "550.54.15"
) -> None:
    (root / "base").mkdir(parents=True, exist_ok=True)
    (root / "base" / "Dockerfile").write_text(
        BASE.format(version=version, description=description, driver=driver)
    )


def test_sync_creates_one_active_row_per_catalog_image_with_its_labels() -> None:
    report = catalog_sync()
    catalog = load_catalog()
    assert [row.reference for row in report.images] == [image.reference for image in catalog]
    assert sorted(report.created) == sorted(image.reference for image in catalog)
    assert JobImage.objects.filter(is_active=True).count() == len(catalog)

    pytorch = JobImage.objects.get(name="gpu-platform/pytorch")
    image = find_image(catalog, "pytorch")
    assert pytorch.tag == image.tag
    assert (pytorch.framework, pytorch.framework_version) == ("pytorch", image.framework_version)
    assert (pytorch.cuda_version, pytorch.min_driver) == (image.cuda_version, image.min_driver)
    assert pytorch.min_driver and pytorch.accelerator == "gpu"
    assert pytorch.python_version == image.python_version
    assert pytorch.dockerfile == "images/dockerfiles/pytorch/Dockerfile"
    assert pytorch.base_image == find_image(catalog, "base").reference
    assert pytorch.labels["org.gpu-platform.framework"] == "pytorch"
    assert pytorch.description == image.description

    cpu = JobImage.objects.get(name="gpu-platform/pytorch-cpu")
    assert (cpu.accelerator, cpu.cuda_version, cpu.min_driver) == ("cpu", "", "")


def test_a_repeated_sync_changes_nothing() -> None:
    catalog_sync()
    before = {row.pk: (row.updated_at, row.labels) for row in JobImage.objects.all()}
    report = catalog_sync()
    assert report.created == [] and report.updated == [] and report.retired == []
    assert len(report.unchanged) == len(before)
    after = {row.pk: (row.updated_at, row.labels) for row in JobImage.objects.all()}
    assert after == before


def test_a_changed_label_updates_the_row_and_keeps_its_build_results(tmp_path: Path) -> None:
    write_base(tmp_path)
    (row,) = catalog_sync(root=tmp_path).images
    JobImage.objects.filter(pk=row.pk).update(digest="sha256:" + "a" * 64, image_id="sha256:" + "b" * 64)

    write_base(tmp_path, description="second", driver="560.28.03")
    report = catalog_sync(root=tmp_path)

    assert report.updated == ["gpu-platform/base:1"]
    row.refresh_from_db()
    assert (row.description, row.min_driver) == ("second", "560.28.03")
    assert row.labels["org.gpu-platform.min-driver"] == "560.28.03"
    assert row.digest == "sha256:" + "a" * 64 and row.image_id == "sha256:" + "b" * 64
    assert row.updated_at > row.created_at


def test_a_new_tag_retires_the_old_row_but_keeps_it_for_the_jobs_that_use_it(tmp_path: Path) -> None:
    write_base(tmp_path, version="1")
    catalog_sync(root=tmp_path)
    write_base(tmp_path, version="2")
    report = catalog_sync(root=tmp_path)

    assert report.created == ["gpu-platform/base:2"]
    assert report.retired == ["gpu-platform/base:1"]
    assert JobImage.objects.get(tag="1").is_active is False
    assert JobImage.objects.get(tag="2").is_active is True


def test_sync_leaves_custom_images_alone(tmp_path: Path) -> None:
    custom = JobImage.objects.create(name="acme/custom", tag="v3", framework="jax")
    write_base(tmp_path)
    report = catalog_sync(root=tmp_path)
    custom.refresh_from_db()
    assert custom.is_active is True and custom.framework == "jax"
    assert "acme/custom:v3" not in report.retired


def test_an_image_an_admin_retired_stays_retired(tmp_path: Path) -> None:
    write_base(tmp_path)
    catalog_sync(root=tmp_path)
    JobImage.objects.filter(name="gpu-platform/base").update(is_active=False)
    report = catalog_sync(root=tmp_path)
    assert report.unchanged == ["gpu-platform/base:1"]
    assert JobImage.objects.get(name="gpu-platform/base").is_active is False


def test_the_registry_is_set_when_given_and_kept_otherwise(tmp_path: Path) -> None:
    write_base(tmp_path)
    (row,) = catalog_sync(root=tmp_path, registry="ghcr.io/acme").images
    assert row.reference == "ghcr.io/acme/gpu-platform/base:1"
    (row,) = catalog_sync(root=tmp_path).images
    assert row.registry == "ghcr.io/acme"
    (row,) = catalog_sync(root=tmp_path, registry="").images
    assert row.reference == "gpu-platform/base:1"


def test_an_invalid_catalog_writes_nothing(tmp_path: Path) -> None:
    shutil.copytree(DOCKERFILES_DIR, tmp_path / "dockerfiles")
    dockerfile = tmp_path / "dockerfiles" / "pytorch" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace("org.gpu-platform.framework-version=", "org.x="))
    with pytest.raises(CatalogError, match="pytorch/Dockerfile"):
        catalog_sync(root=tmp_path / "dockerfiles")
    assert JobImage.objects.count() == 0


def test_a_recorded_build_keeps_the_registry_digest_only_while_the_image_is_the_same(tmp_path: Path) -> None:
    write_base(tmp_path)
    image = load_catalog(tmp_path)[0]
    first = image_record_build(image=image, registry="", image_id="sha256:1", digest="sha256:pushed")
    assert (first.image_id, first.digest) == ("sha256:1", "sha256:pushed")
    assert first.built_at is not None

    same = image_record_build(image=image, registry="", image_id="sha256:1")
    assert same.digest == "sha256:pushed"
    rebuilt = image_record_build(image=image, registry="", image_id="sha256:2")
    assert (rebuilt.image_id, rebuilt.digest) == ("sha256:2", "")
    assert JobImage.objects.count() == 1


def test_the_sync_command_reports_each_image_and_a_summary() -> None:
    out = StringIO()
    call_command("images", "sync", stdout=out)
    lines = out.getvalue().splitlines()
    count = len(load_catalog())
    assert lines[-1] == f"{count} images: {count} created, 0 updated, 0 unchanged, 0 retired"
    assert "created   gpu-platform/pytorch:" in out.getvalue()

    out = StringIO()
    call_command("images", "sync", stdout=out)
    assert (
        out.getvalue().splitlines()[-1]
        == f"{count} images: 0 created, 0 updated, {count} unchanged, 0 retired"
    )


def test_the_list_command_shows_the_catalog_and_hides_retired_images() -> None:
    out = StringIO()
    call_command("images", "list", stdout=out)
    assert "catalog is empty" in out.getvalue()

    catalog_sync()
    JobImage.objects.filter(name="gpu-platform/tensorflow-cpu").update(is_active=False)
    out = StringIO()
    call_command("images", "list", stdout=out)
    text = out.getvalue()
    assert text.startswith("IMAGE")
    assert "gpu-platform/pytorch:" in text and "550.54.15" in text
    assert "gpu-platform/tensorflow-cpu" not in text

    out = StringIO()
    call_command("images", "list", "--all", stdout=out)
    assert "gpu-platform/tensorflow-cpu" in out.getvalue()


def test_sync_catalog_is_the_shortcut_seed_code_calls() -> None:
    from images.catalog import sync_catalog

    rows = sync_catalog()
    assert [row.reference for row in rows] == [image.reference for image in load_catalog()]
    assert all(isinstance(row, JobImage) and row.pk for row in rows)
    assert [row.pk for row in sync_catalog()] == [row.pk for row in rows]
