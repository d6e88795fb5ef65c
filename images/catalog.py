"""The standard-image catalog as declared by ``images/dockerfiles/<key>/Dockerfile``. No Django here.

Each directory under ``dockerfiles/`` is one image named ``gpu-platform/<key>``, plus one per table of
its ``variants.toml`` (``[pytorch-cpu]``: the same Dockerfile built with those build arguments, e.g. a
CPU ``BASE_IMAGE``). Its tag is its own
``org.opencontainers.image.version`` label; everything else a user picks an image by comes from labels:

=====================================  ====================================================
``org.opencontainers.image.title``     human title (own label, required)
``org.opencontainers.image.description`` one paragraph (own label, required)
``org.opencontainers.image.version``   the tag, e.g. ``2.5.1-cuda12.4-py3.10`` (own label, required)
``org.gpu-platform.accelerator``       ``gpu`` or ``cpu`` (required)
``org.gpu-platform.python``            Python major.minor (required)
``org.gpu-platform.cuda``              CUDA toolkit version (GPU images only, required there)
``org.gpu-platform.min-driver``        minimum NVIDIA driver (GPU images only, required there; a CPU
                                       image must not have either label, not even an empty one)
``org.gpu-platform.framework``         ``pytorch`` / ``tensorflow`` (framework images)
``org.gpu-platform.framework-version`` the framework's version (required with a framework)
``org.gpu-platform.smoke-test``        command that checks the image from inside (required)
=====================================  ====================================================

The database side lives in :mod:`images.services`; :func:`sync_catalog` is a shortcut to it for demo
and seed code.

Labels follow Docker's inheritance: an image built ``FROM`` another catalog image (through the default
of its ``BASE_IMAGE`` ARG) inherits that image's labels and overrides them with its own, so the CUDA
version and driver floor are declared once, in the base image.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from images.compat import parse_driver_version
from images.dockerfile import DockerfileError, parse_dockerfile

if TYPE_CHECKING:
    from images.models import JobImage

NAMESPACE = "gpu-platform"
DOCKERFILES_DIR = Path(__file__).resolve().parent / "dockerfiles"
REPO_ROOT = Path(__file__).resolve().parent.parent
# Beside a Dockerfile: further images built from it with other build arguments (a CPU variant).
VARIANTS_FILE = "variants.toml"

OCI = "org.opencontainers.image."
OURS = "org.gpu-platform."
TITLE, DESCRIPTION, VERSION = f"{OCI}title", f"{OCI}description", f"{OCI}version"
ACCELERATOR, PYTHON, CUDA, MIN_DRIVER = (
    f"{OURS}accelerator",
    f"{OURS}python",
    f"{OURS}cuda",
    f"{OURS}min-driver",
)
FRAMEWORK, FRAMEWORK_VERSION, SMOKE_TEST = f"{OURS}framework", f"{OURS}framework-version", f"{OURS}smoke-test"
OWN_LABELS = (TITLE, DESCRIPTION, VERSION)

# Docker's tag grammar (distribution/reference).
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_KEY = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*$")


class CatalogError(ValueError):
    """The Dockerfiles do not describe a valid catalog; the message is one line naming the file."""


@dataclass(frozen=True)
class CatalogImage:
    """One standard image, with its labels resolved through its catalog ancestors."""

    key: str
    tag: str
    dockerfile: str  # relative to the repository root
    base_image: str  # FROM, with ARG defaults applied
    parent: str | None  # key of the catalog image it is built on
    labels: dict[str, str] = field(default_factory=dict)
    exposed_ports: tuple[str, ...] = ()
    # Build arguments of a variant (``variants.toml`` beside the Dockerfile); empty for the default build.
    variant_args: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{NAMESPACE}/{self.key}"

    @property
    def reference(self) -> str:
        return f"{self.name}:{self.tag}"

    def reference_in(self, registry: str) -> str:
        """The reference under ``registry`` (``ghcr.io/acme``), or the bare one when it is empty."""
        return f"{registry.rstrip('/')}/{self.reference}" if registry else self.reference

    @property
    def title(self) -> str:
        return self.labels[TITLE]

    @property
    def description(self) -> str:
        return self.labels[DESCRIPTION]

    @property
    def accelerator(self) -> str:
        return self.labels[ACCELERATOR]

    @property
    def python_version(self) -> str:
        return self.labels[PYTHON]

    @property
    def cuda_version(self) -> str:
        return self.labels.get(CUDA, "")

    @property
    def min_driver(self) -> str:
        return self.labels.get(MIN_DRIVER, "")

    @property
    def framework(self) -> str:
        return self.labels.get(FRAMEWORK, "")

    @property
    def framework_version(self) -> str:
        return self.labels.get(FRAMEWORK_VERSION, "")

    @property
    def smoke_test(self) -> str:
        return self.labels[SMOKE_TEST]

    @property
    def context_dir(self) -> Path:
        return REPO_ROOT / Path(self.dockerfile).parent


@dataclass(frozen=True)
class _Declared:
    key: str
    dockerfile: Path
    base_image: str
    own_labels: dict[str, str]
    exposed: tuple[str, ...]
    variant_args: dict[str, str]


def _relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return path.as_posix()


def _variants(directory: Path) -> dict[str, dict[str, str]]:
    """The variants declared in ``directory/variants.toml``: image key -> build arguments."""
    path = directory / VARIANTS_FILE
    if not path.is_file():
        return {}
    where = _relative(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{where}: {exc}") from None
    variants: dict[str, dict[str, str]] = {}
    for key, args in data.items():
        if not isinstance(args, dict) or not all(isinstance(v, str) for v in args.values()):
            raise CatalogError(f"{where}: [{key}] must be a table of build arguments with string values")
        variants[key] = dict(args)
    return variants


def _declare(directory: Path, key: str | None = None, build_args: dict[str, str] | None = None) -> _Declared:
    """The image ``key`` (the directory's name when None) built from the directory's Dockerfile."""
    dockerfile = directory / "Dockerfile"
    where = _relative(dockerfile)
    key = key or directory.name
    if not _KEY.match(key):
        raise CatalogError(f"{where}: {key!r} is not a valid image name")
    try:
        parsed = parse_dockerfile(dockerfile.read_text(encoding="utf-8"), build_args=build_args)
    except (DockerfileError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{where}: {exc}") from None
    for label in OWN_LABELS:
        if not parsed.labels.get(label, "").strip():
            raise CatalogError(f"{where}: missing its own LABEL {label}")
    if not _TAG.match(parsed.labels[VERSION]):
        raise CatalogError(f"{where}: {VERSION}={parsed.labels[VERSION]!r} is not a valid Docker tag")
    return _Declared(
        key, dockerfile, parsed.base_image, parsed.labels, parsed.exposed_ports, dict(build_args or {})
    )


def _declare_all(root: Path) -> dict[str, _Declared]:
    declared: dict[str, _Declared] = {}
    for path in sorted(root.iterdir()):
        if not (path / "Dockerfile").is_file():
            continue
        for d in (_declare(path), *(_declare(path, k, a) for k, a in _variants(path).items())):
            if d.key in declared:
                raise CatalogError(f"{_relative(d.dockerfile)}: image {d.key!r} is declared twice")
            declared[d.key] = d
    return declared


def _validate(image: CatalogImage) -> None:
    where = image.dockerfile
    labels = image.labels
    for label in (ACCELERATOR, PYTHON, SMOKE_TEST):
        if not labels.get(label, "").strip():
            raise CatalogError(f"{where}: missing LABEL {label} (own or inherited)")
    if image.accelerator not in {"gpu", "cpu"}:
        raise CatalogError(f"{where}: {ACCELERATOR} must be 'gpu' or 'cpu', not {image.accelerator!r}")
    if image.accelerator == "gpu":
        if not image.cuda_version:
            raise CatalogError(f"{where}: a GPU image needs LABEL {CUDA}")
        if parse_driver_version(image.min_driver) is None:
            raise CatalogError(f"{where}: a GPU image needs a dotted {MIN_DRIVER}, got {image.min_driver!r}")
    elif CUDA in labels or MIN_DRIVER in labels:
        # Even empty: `docker inspect` would then show a CPU image with a CUDA label.
        raise CatalogError(f"{where}: a CPU image must not declare {CUDA} or {MIN_DRIVER}")
    if image.framework and not image.framework_version:
        raise CatalogError(f"{where}: {FRAMEWORK}={image.framework} needs {FRAMEWORK_VERSION}")


def load_catalog(root: Path = DOCKERFILES_DIR) -> list[CatalogImage]:
    """Every image under ``root``, parents before children, then by key.

    Raises :class:`CatalogError` (one line) for an unreadable Dockerfile, a missing or invalid label,
    a ``FROM gpu-platform/...`` that names no image in the catalog, or a cycle.
    """
    if not root.is_dir():
        raise CatalogError(f"{root}: no such Dockerfile directory")
    declared = _declare_all(root)
    by_reference = {f"{NAMESPACE}/{d.key}:{d.own_labels[VERSION]}": d.key for d in declared.values()}
    parents: dict[str, str | None] = {}
    for d in declared.values():
        parent = by_reference.get(d.base_image)
        if parent is None and d.base_image.startswith(f"{NAMESPACE}/"):
            raise CatalogError(
                f"{_relative(d.dockerfile)}: FROM {d.base_image} is not an image of this catalog "
                f"(known: {', '.join(sorted(by_reference))})"
            )
        parents[d.key] = parent

    resolved: dict[str, CatalogImage] = {}
    order: list[CatalogImage] = []

    def resolve(key: str, seen: tuple[str, ...]) -> CatalogImage:
        if key in resolved:
            return resolved[key]
        if key in seen:
            raise CatalogError(f"{_relative(root)}: FROM cycle {' -> '.join((*seen, key))}")
        d = declared[key]
        parent_key = parents[key]
        inherited = resolve(parent_key, (*seen, key)).labels if parent_key else {}
        parent_ports = resolved[parent_key].exposed_ports if parent_key else ()
        image = CatalogImage(
            key=key,
            tag=d.own_labels[VERSION],
            dockerfile=_relative(d.dockerfile),
            base_image=d.base_image,
            parent=parent_key,
            labels={**inherited, **d.own_labels},
            exposed_ports=tuple(dict.fromkeys((*parent_ports, *d.exposed))),
            variant_args=d.variant_args,
        )
        _validate(image)
        resolved[key] = image
        order.append(image)
        return image

    for key in sorted(declared):
        resolve(key, ())
    return order


def find_image(catalog: list[CatalogImage], key: str) -> CatalogImage:
    """The image called ``key`` (``pytorch`` or ``gpu-platform/pytorch``); CatalogError if unknown."""
    wanted = key.removeprefix(f"{NAMESPACE}/").split(":", 1)[0]
    for image in catalog:
        if image.key == wanted:
            return image
    raise CatalogError(f"unknown image {key!r}; the catalog has: {', '.join(i.key for i in catalog)}")


def build_plan(catalog: list[CatalogImage], keys: list[str]) -> list[CatalogImage]:
    """The images to build for ``keys`` (all when empty): each with its ancestors, parents first."""
    if not keys:
        return list(catalog)
    by_key = {image.key: image for image in catalog}
    wanted: set[str] = set()
    for key in keys:
        image: CatalogImage | None = find_image(catalog, key)
        while image is not None:
            wanted.add(image.key)
            image = by_key[image.parent] if image.parent else None
    # The catalog is already parents-first, so filtering it keeps a valid build order.
    return [image for image in catalog if image.key in wanted]


def build_args(image: CatalogImage, catalog: list[CatalogImage], registry: str = "") -> dict[str, str]:
    """``--build-arg`` values: a variant's own, and ``BASE_IMAGE`` pointing at the parent as tagged by
    this build."""
    if image.parent is None:
        return dict(image.variant_args)
    parent = find_image(catalog, image.parent)
    return {**image.variant_args, "BASE_IMAGE": parent.reference_in(registry)}


def sync_catalog(root: Path = DOCKERFILES_DIR, registry: str | None = None) -> list[JobImage]:
    """Load the catalog into JobImage rows (``manage.py images sync``); returns them, parents first.

    A shortcut to :func:`images.services.catalog_sync` (see it for the contract), imported lazily so
    that this module stays free of Django for the code that only parses Dockerfiles.
    """
    from images.services import catalog_sync

    return catalog_sync(root=root, registry=registry).images
