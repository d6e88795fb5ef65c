"""One Dockerfile per framework: its CPU variant is the same file built with other build arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from images.catalog import DOCKERFILES_DIR, CatalogError, build_args, find_image, load_catalog
from tests.images.test_image_catalog import GPU_BASE, own_labels, write_image

CPU_BASE = "FROM python:3.10-slim\n" + own_labels(
    "cpu1",
    'org.gpu-platform.accelerator=cpu org.gpu-platform.python=3.10 org.gpu-platform.smoke-test="base.sh"',
)
FRAMEWORK = (
    "ARG BASE_IMAGE=gpu-platform/base:1\nFROM ${BASE_IMAGE}\nARG BASE_IMAGE\nARG VARIANT_TAG=cuda\n"
    'LABEL org.opencontainers.image.title="fw (${VARIANT_TAG})" org.opencontainers.image.description="d" '
    'org.opencontainers.image.version="2-${VARIANT_TAG}" org.gpu-platform.framework=fw '
    "org.gpu-platform.framework-version=2\n"
)


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_each_framework_has_one_dockerfile_and_one_smoke_test_for_both_variants(framework: str) -> None:
    catalog = load_catalog()
    gpu, cpu = find_image(catalog, framework), find_image(catalog, f"{framework}-cpu")
    assert gpu.dockerfile == cpu.dockerfile == f"images/dockerfiles/{framework}/Dockerfile"
    assert gpu.smoke_test == cpu.smoke_test
    assert sorted(p.name for p in (DOCKERFILES_DIR / framework).glob("smoke_test*")) == ["smoke_test.py"]
    assert not (DOCKERFILES_DIR / f"{framework}-cpu").exists()
    assert (gpu.accelerator, cpu.accelerator) == ("gpu", "cpu")
    assert (gpu.parent, cpu.parent) == ("base", "base-cpu")


def test_the_cpu_variant_is_built_with_its_own_arguments_on_the_cpu_base() -> None:
    catalog = load_catalog()
    cpu = find_image(catalog, "pytorch-cpu")
    args = build_args(cpu, catalog, "reg.io/acme")
    assert args["BASE_IMAGE"] == f"reg.io/acme/{find_image(catalog, 'base-cpu').reference}"
    assert args["TORCH_INDEX_URL"] == "https://download.pytorch.org/whl/cpu"
    assert "TORCH_INDEX_URL" not in build_args(find_image(catalog, "pytorch"), catalog)


def test_a_variant_takes_its_labels_and_parent_from_its_build_arguments(tmp_path: Path) -> None:
    write_image(tmp_path, "base", GPU_BASE)
    write_image(tmp_path, "base-cpu", CPU_BASE)
    write_image(tmp_path, "fw", FRAMEWORK)
    (tmp_path / "fw" / "variants.toml").write_text(
        '[fw-cpu]\nBASE_IMAGE = "gpu-platform/base-cpu:cpu1"\nVARIANT_TAG = "cpu"\n'
    )
    catalog = load_catalog(tmp_path)
    gpu, cpu = find_image(catalog, "fw"), find_image(catalog, "fw-cpu")
    assert (gpu.tag, gpu.title, gpu.parent, gpu.cuda_version) == ("2-cuda", "fw (cuda)", "base", "12.4.1")
    assert (cpu.tag, cpu.title, cpu.parent, cpu.cuda_version) == ("2-cpu", "fw (cpu)", "base-cpu", "")


@pytest.mark.parametrize(
    ("variants", "message"),
    [
        ('[base]\nVARIANT_TAG = "x"\n', "image 'base' is declared twice"),
        ("[fw-cpu]\nVARIANT_TAG = 3\n", r"\[fw-cpu\] must be a table of build arguments with string values"),
        ("[fw-cpu\n", "variants.toml"),
        ('["Bad Name"]\nVARIANT_TAG = "x"\n', "'Bad Name' is not a valid image name"),
    ],
)
def test_a_bad_variants_file_is_refused_in_one_line(tmp_path: Path, variants: str, message: str) -> None:
    write_image(tmp_path, "base", GPU_BASE)
    write_image(tmp_path, "fw", FRAMEWORK)
    (tmp_path / "fw" / "variants.toml").write_text(variants)
    with pytest.raises(CatalogError, match=message) as caught:
        load_catalog(tmp_path)
    assert "\n" not in str(caught.value)
