"""Admins see the catalog; sync-owned fields of catalog images are read-only for them."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from images.models import JobImage
from images.services import catalog_sync

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client() -> Client:
    user = get_user_model().objects.create_superuser("root-admin", "root@example.org", "pw-for-tests")
    client = Client()
    client.force_login(user)
    return client


def test_the_changelist_lists_catalog_images_by_reference(admin_client: Client) -> None:
    catalog_sync()
    response = admin_client.get("/admin/images/jobimage/")
    assert response.status_code == 200
    pytorch = JobImage.objects.get(name="gpu-platform/pytorch")
    assert pytorch.reference in response.content.decode()


def test_catalog_images_cannot_be_edited_by_hand_but_custom_images_can(admin_client: Client) -> None:
    catalog_sync()
    pytorch = JobImage.objects.get(name="gpu-platform/pytorch")
    page = admin_client.get(f"/admin/images/jobimage/{pytorch.pk}/change/").content.decode()
    assert 'name="min_driver"' not in page  # shown, not editable
    assert pytorch.min_driver in page
    assert 'name="is_active"' in page  # retiring stays possible

    custom = JobImage.objects.create(name="acme/custom", tag="v1")
    page = admin_client.get(f"/admin/images/jobimage/{custom.pk}/change/").content.decode()
    assert 'name="min_driver"' in page
    assert 'name="digest"' not in page  # written by builds only


def test_the_retire_action_hides_images_from_new_jobs(admin_client: Client) -> None:
    catalog_sync()
    ids = list(JobImage.objects.filter(framework="tensorflow").values_list("pk", flat=True))
    response = admin_client.post(
        "/admin/images/jobimage/", {"action": "retire", "_selected_action": [str(pk) for pk in ids]}
    )
    assert response.status_code == 302
    assert not JobImage.objects.filter(pk__in=ids, is_active=True).exists()
    # pytorch, its CPU twin and the notebook layer over each (pytorch-jupyter)
    assert JobImage.objects.filter(framework="pytorch", is_active=True).count() == 4
