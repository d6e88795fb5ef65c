"""The standard images' Dockerfiles describe a valid, self-consistent catalog."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from images.catalog import (
    CatalogError,
    build_args,
    build_plan,
    find_image,
    load_catalog,
)
from images.compat import parse_driver_version

FRAMEWORKS = {"pytorch", "tensorflow"}


def write_image(root: Path, key: str, body: str) -> None:
    (root / key).mkdir(parents=True)
    (root / key / "Dockerfile").write_text(body)


def own_labels(version: str, extra: str = "") -> str:
    return f'LABEL org.opencontainers.image.title="t" org.opencontainers.image.description="d" org.opencontainers.image.version="{version}" {extra}\n'


GPU_BASE = "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n" + own_labels(
    "1",
    "org.gpu-platform.accelerator=gpu org.gpu-platform.python=3.10 org.gpu-platform.cuda=12.4.1 "
    'org.gpu-platform.min-driver=550.54.15 org.gpu-platform.smoke-test="base.sh"',
)


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_the_catalog_has_a_base_pytorch_and_tensorflow_image_each_with_a_cpu_twin(catalog) -> None:
    keys = {image.key for image in catalog}
    assert keys == {
        "base", "base-cpu", "pytorch", "pytorch-cpu", "tensorflow", "tensorflow-cpu",
        "pytorch-jupyter", "pytorch-jupyter-cpu",  # the workspaces' notebook image (issue 25)
    }  # fmt: skip
    for image in catalog:
        twin = image.key.removesuffix("-cpu")
        assert image.accelerator == ("cpu" if image.key.endswith("-cpu") else "gpu")
        assert twin in keys


def test_parents_come_before_children(catalog) -> None:
    seen: set[str] = set()
    for image in catalog:
        assert image.parent is None or image.parent in seen, image.key
        seen.add(image.key)


def test_framework_images_build_on_the_base_of_their_own_accelerator(catalog) -> None:
    for image in catalog:
        if image.framework:
            expected = "base-cpu" if image.accelerator == "cpu" else "base"
            # A layer over a framework image (the notebook image) is built on that framework's image.
            over = image.framework + ("-cpu" if image.accelerator == "cpu" else "")
            assert image.parent in (expected, over), image.key
        else:
            assert image.parent is None, image.key


def test_gpu_images_inherit_cuda_and_the_minimum_driver_from_the_base(catalog) -> None:
    base = find_image(catalog, "base")
    assert parse_driver_version(base.min_driver) is not None
    for image in catalog:
        if image.accelerator == "gpu":
            assert (image.cuda_version, image.min_driver) == (base.cuda_version, base.min_driver)
        else:
            assert image.cuda_version == "" and image.min_driver == ""


def test_twins_ship_the_same_framework_and_python_versions(catalog) -> None:
    for image in catalog:
        if image.accelerator == "gpu":
            twin = find_image(catalog, f"{image.key}-cpu")
            assert (twin.framework, twin.framework_version, twin.python_version) == (
                image.framework,
                image.framework_version,
                image.python_version,
            )


def test_every_tag_names_framework_version_cuda_or_cpu_and_python(catalog) -> None:
    for image in catalog:
        parts = image.tag.split("-")
        if image.framework:
            assert image.framework in FRAMEWORKS
            assert parts[0] == image.framework_version, image.tag
        cuda = ".".join(image.cuda_version.split(".")[:2])
        if image.accelerator == "gpu":
            assert any(part.startswith(f"cuda{cuda}") for part in parts), image.tag
        else:
            assert "cpu" in parts, image.tag
        assert parts[-1] == f"py{image.python_version}", image.tag


def test_every_image_declares_title_description_and_a_smoke_test_it_ships(catalog) -> None:
    for image in catalog:
        assert image.title and image.description and image.smoke_test
        # The smoke-test command runs a file the Dockerfile copies into the image.
        script = next(part for part in image.smoke_test.split() if part.startswith("/opt/gpu-platform/"))
        dockerfile = (image.context_dir / "Dockerfile").read_text()
        assert re.search(rf"^COPY \S+ {re.escape(script)}$", dockerfile, re.M), (image.key, script)


def test_images_are_named_in_the_gpu_platform_namespace(catalog) -> None:
    pytorch = find_image(catalog, "gpu-platform/pytorch:whatever")
    assert pytorch.name == "gpu-platform/pytorch"
    assert pytorch.reference == f"gpu-platform/pytorch:{pytorch.tag}"
    assert pytorch.reference_in("ghcr.io/acme/") == f"ghcr.io/acme/gpu-platform/pytorch:{pytorch.tag}"
    assert pytorch.dockerfile == "images/dockerfiles/pytorch/Dockerfile"


def test_building_one_image_builds_its_ancestors_first(catalog) -> None:
    assert [image.key for image in build_plan(catalog, ["pytorch"])] == ["base", "pytorch"]
    assert [image.key for image in build_plan(catalog, ["tensorflow-cpu", "base"])] == [
        "base",
        "base-cpu",
        "tensorflow-cpu",
    ]
    assert len(build_plan(catalog, [])) == len(catalog)
    with pytest.raises(CatalogError, match="unknown image 'nope'"):
        build_plan(catalog, ["nope"])


def test_a_child_is_built_from_its_parent_as_tagged_by_the_same_build(catalog) -> None:
    pytorch = find_image(catalog, "pytorch")
    base = find_image(catalog, "base")
    assert build_args(pytorch, catalog, "reg.io/acme") == {"BASE_IMAGE": f"reg.io/acme/{base.reference}"}
    assert build_args(pytorch, catalog) == {"BASE_IMAGE": base.reference}
    assert build_args(base, catalog, "reg.io/acme") == {}


def test_a_child_overrides_inherited_labels(tmp_path: Path) -> None:
    write_image(tmp_path, "base", GPU_BASE)
    write_image(
        tmp_path,
        "child",
        "ARG BASE_IMAGE=gpu-platform/base:1\nFROM ${BASE_IMAGE}\n"
        + own_labels(
            "2",
            "org.gpu-platform.min-driver=560.28.03 org.gpu-platform.framework=pytorch "
            "org.gpu-platform.framework-version=2.5.1",
        ),
    )
    child = find_image(load_catalog(tmp_path), "child")
    assert child.parent == "base"
    assert child.min_driver == "560.28.03"
    assert child.cuda_version == "12.4.1"
    assert child.labels["org.opencontainers.image.version"] == "2"


@pytest.mark.parametrize(
    ("images", "message"),
    [
        ({"base": "FROM ubuntu:22.04\nLABEL org.opencontainers.image.version=1\n"}, "missing its own LABEL"),
        ({"base": GPU_BASE.replace('version="1"', 'version="bad tag"')}, "not a valid Docker tag"),
        ({"base": GPU_BASE.replace("550.54.15", "latest")}, "needs a dotted org.gpu-platform.min-driver"),
        (
            {"base": GPU_BASE.replace("org.gpu-platform.cuda=12.4.1 ", "")},
            "needs LABEL org.gpu-platform.cuda",
        ),
        ({"base": GPU_BASE.replace("accelerator=gpu", "accelerator=tpu")}, "must be 'gpu' or 'cpu'"),
        ({"base": GPU_BASE.replace("accelerator=gpu", "accelerator=cpu")}, "must not declare"),
        (
            # Emptied rather than left out: `docker inspect` would still show them.
            {
                "base": GPU_BASE.replace("accelerator=gpu", "accelerator=cpu")
                .replace("=12.4.1", '=""')
                .replace("=550.54.15", '=""')
            },
            "must not declare",
        ),
        (
            {"base": GPU_BASE.replace('org.gpu-platform.smoke-test="base.sh"', "")},
            "missing LABEL org.gpu-platform.smoke-test",
        ),
        (
            {"base": GPU_BASE, "child": "FROM gpu-platform/base:0\n" + own_labels("2")},
            "not an image of this catalog",
        ),
        (
            {
                "base": GPU_BASE,
                "child": "FROM gpu-platform/base:1\n" + own_labels("2", "org.gpu-platform.framework=x"),
            },
            "needs org.gpu-platform.framework-version",
        ),
        (
            {
                "a": "FROM gpu-platform/b:1\n" + own_labels("1"),
                "b": "FROM gpu-platform/a:1\n" + own_labels("1"),
            },
            "FROM cycle",
        ),
        ({"Bad_Name": GPU_BASE}, "not a valid image name"),
        ({"base": "FROM a:1\nLABEL broken\n"}, "line 2"),
    ],
)
def test_an_invalid_catalog_is_refused_in_one_line_naming_the_file(tmp_path: Path, images, message) -> None:
    for key, body in images.items():
        write_image(tmp_path, key, body)
    with pytest.raises(CatalogError, match=re.escape(message)) as caught:
        load_catalog(tmp_path)
    assert "\n" not in str(caught.value)
    assert "Dockerfile" in str(caught.value) or "cycle" in str(caught.value)


def test_a_missing_dockerfile_directory_is_a_catalog_error(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="no such Dockerfile directory"):
        load_catalog(tmp_path / "absent")
