"""Every image's build context carries the throughput helper the Dockerfiles install."""

from __future__ import annotations

import tarfile

import pytest

from images.builder import HELPER_CONTEXT_NAME, build_context
from images.catalog import load_catalog


@pytest.mark.parametrize("image", load_catalog(), ids=lambda i: i.key)
def test_the_build_context_holds_the_image_folder_and_the_helper_package(image) -> None:
    with tarfile.open(fileobj=build_context(image.context_dir)) as tar:
        names = set(tar.getnames())
    assert "Dockerfile" in names
    assert {
        f"{HELPER_CONTEXT_NAME}/pyproject.toml",
        f"{HELPER_CONTEXT_NAME}/gpu_platform/__init__.py",
    } <= names
    assert not any("__pycache__" in n for n in names)


def test_the_base_images_install_the_helper_and_their_smoke_tests_check_it() -> None:
    for image in load_catalog():
        if image.parent is None:
            dockerfile = (image.context_dir / "Dockerfile").read_text()
            assert f"COPY {HELPER_CONTEXT_NAME} /opt/gpu-platform/helper" in dockerfile
            assert (
                "pip install --no-cache-dir --no-deps --no-build-isolation /opt/gpu-platform/helper"
                in dockerfile
            )
            assert "report_throughput" in (image.context_dir / "smoke_test.sh").read_text()
        else:
            assert "check_throughput_report(" in (image.context_dir / "smoke_test.py").read_text()
