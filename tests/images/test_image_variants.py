"""One Dockerfile per framework: its CPU variant is the same file built with other build arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from images.catalog import (
    ACCELERATOR,
    CUDA,
    DESCRIPTION,
    DOCKERFILES_DIR,
    MIN_DRIVER,
    TITLE,
    VERSION,
    CatalogError,
    build_args,
    find_image,
    load_catalog,
)
from images.dockerfile import parse_dockerfile
from tests.images.test_image_catalog import GPU_BASE, own_labels, write_image

VARIANT_LABELS = {TITLE, DESCRIPTION, VERSION, "org.opencontainers.image.base.name"}
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


# Each folder with the smoke test its variants share and the parents of its GPU and CPU variants.
FOLDERS = {
    "base": ("smoke_test.sh", (None, None)),
    "pytorch": ("smoke_test.py", ("base", "base-cpu")),
    "tensorflow": ("smoke_test.py", ("base", "base-cpu")),
    "pytorch-jupyter": ("smoke_test.py", ("pytorch", "pytorch-cpu")),
}


def test_every_image_folder_is_named_here() -> None:
    assert sorted(p.parent.name for p in DOCKERFILES_DIR.glob("*/Dockerfile")) == sorted(FOLDERS)


@pytest.mark.parametrize("folder", sorted(FOLDERS))
def test_each_folder_has_one_dockerfile_and_one_smoke_test_for_both_variants(folder: str) -> None:
    smoke_test, parents = FOLDERS[folder]
    catalog = load_catalog()
    gpu, cpu = find_image(catalog, folder), find_image(catalog, f"{folder}-cpu")
    assert gpu.dockerfile == cpu.dockerfile == f"images/dockerfiles/{folder}/Dockerfile"
    assert gpu.smoke_test == cpu.smoke_test
    assert sorted(p.name for p in (DOCKERFILES_DIR / folder).glob("smoke_test*")) == [smoke_test]
    assert not (DOCKERFILES_DIR / f"{folder}-cpu").exists()
    assert (gpu.accelerator, cpu.accelerator) == ("gpu", "cpu")
    assert (gpu.parent, cpu.parent) == parents
    assert [i.key for i in catalog if i.dockerfile == gpu.dockerfile] == [folder, f"{folder}-cpu"]


def test_one_smoke_test_per_folder_is_what_every_image_runs() -> None:
    by_folder: dict[str, set[str]] = {}
    for image in load_catalog():
        by_folder.setdefault(image.dockerfile, set()).add(image.smoke_test)
    assert all(len(commands) == 1 for commands in by_folder.values()), by_folder


def test_the_cpu_base_is_the_base_dockerfile_on_plain_ubuntu_without_cuda_labels() -> None:
    catalog = load_catalog()
    gpu, cpu = find_image(catalog, "base"), find_image(catalog, "base-cpu")
    assert (gpu.base_image, cpu.base_image) == ("nvidia/cuda:12.4.1-runtime-ubuntu22.04", "ubuntu:22.04")
    assert (gpu.reference, cpu.reference) == (
        "gpu-platform/base:cuda12.4.1-py3.10",
        "gpu-platform/base-cpu:cpu-py3.10",
    )
    assert (gpu.cuda_version, gpu.min_driver) == ("12.4.1", "550.54.15")
    # Not merely empty: the CPU variant builds from a stage that never declares them.
    assert not {CUDA, MIN_DRIVER} & set(cpu.labels)
    assert gpu.labels["org.opencontainers.image.base.name"] == gpu.base_image
    assert cpu.labels["org.opencontainers.image.base.name"] == cpu.base_image
    shared = {
        k: v for k, v in gpu.labels.items() if k not in {*VARIANT_LABELS, CUDA, MIN_DRIVER, ACCELERATOR}
    }
    assert shared == {k: v for k, v in cpu.labels.items() if k not in {*VARIANT_LABELS, ACCELERATOR}}
    assert gpu.exposed_ports == cpu.exposed_ports == ("2222",)


def test_the_cpu_base_is_built_from_its_root_image_whatever_the_registry() -> None:
    catalog = load_catalog()
    # A root image is pulled from its own registry: only parents built here get the registry prefix.
    assert build_args(find_image(catalog, "base"), catalog, "reg.io/acme") == {}
    args = build_args(find_image(catalog, "base-cpu"), catalog, "reg.io/acme")
    assert (args["BASE_IMAGE"], args["ACCELERATOR"]) == ("ubuntu:22.04", "cpu")
    assert set(args) == set(find_image(catalog, "base-cpu").variant_args)


def test_the_base_picks_its_label_stage_by_accelerator() -> None:
    text = (DOCKERFILES_DIR / "base" / "Dockerfile").read_text()
    mislabelled = parse_dockerfile(text, build_args={"BASE_IMAGE": "ubuntu:22.04", "ACCELERATOR": "gpu"})
    assert mislabelled.labels[ACCELERATOR] == "gpu" and mislabelled.labels[CUDA] == "12.4.1"
    cpu = parse_dockerfile(text, build_args={"ACCELERATOR": "cpu"})
    assert cpu.labels[ACCELERATOR] == "cpu" and CUDA not in cpu.labels
    # Everything before the label stages is shared: the environment comes through unchanged.
    assert cpu.env == mislabelled.env and cpu.env["PATH"].startswith("/opt/venv/bin:")


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
