"""``manage.py images sync|list|build``: the standard-image catalog from the command line.

* ``sync``: read ``images/dockerfiles/*/Dockerfile`` labels into JobImage rows (idempotent).
* ``list``: the catalog rows, with build state.
* ``build [NAME ...]``: build each image (and the catalog images it is built on) through the Docker
  SDK, run its smoke test in the built image, optionally push, and record image ID / digest. Without
  a reachable Docker engine it says so in one line and exits non-zero.

Errors end with a one-line CommandError (exit status 1), never a traceback.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from images import builder
from images.catalog import DOCKERFILES_DIR, CatalogError, build_args, build_plan, load_catalog
from images.models import JobImage
from images.services import catalog_sync, image_record_build

REGISTRY_ENV = "GPU_PLATFORM_IMAGE_REGISTRY"


class Command(BaseCommand):
    help = (
        "Standard job images: sync the catalog from the Dockerfiles, list it, or build and smoke-test images."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", metavar="{sync,list,build}", required=True)
        sync = actions.add_parser("sync", help="read the Dockerfiles' labels into the catalog (idempotent)")
        sync.add_argument(
            "--registry", help=f"registry prefix for the rows (default: ${REGISTRY_ENV} if set)"
        )
        sync.add_argument(
            "--dockerfiles", type=Path, default=DOCKERFILES_DIR, help=_dockerfiles_help(DOCKERFILES_DIR)
        )

        listing = actions.add_parser("list", help="show the catalog rows")
        listing.add_argument("--all", action="store_true", help="include retired images")

        build = actions.add_parser(
            "build", help="build, smoke-test and record images (needs a Docker engine)"
        )
        build.add_argument(
            "names", nargs="*", metavar="NAME", help="images to build (default: all), e.g. pytorch"
        )
        build.add_argument("--registry", help=f"tag and push under this prefix (default: ${REGISTRY_ENV})")
        build.add_argument(
            "--push", action="store_true", help="push each image and record its registry digest"
        )
        build.add_argument("--no-gpu", action="store_true", help="smoke-test GPU images without GPUs")
        build.add_argument("--no-cache", action="store_true", help="build without Docker's layer cache")
        build.add_argument(
            "--smoke-timeout", type=int, default=900, help="seconds per smoke test (default 900)"
        )
        build.add_argument(
            "--dockerfiles", type=Path, default=DOCKERFILES_DIR, help=_dockerfiles_help(DOCKERFILES_DIR)
        )

    def handle(self, *args: Any, **options: Any) -> None:
        handler = {"sync": self.sync, "list": self.list, "build": self.build}[options["action"]]
        try:
            handler(options)
        except (CatalogError, builder.BuildError) as exc:
            raise CommandError(str(exc)) from None
        except DatabaseError as exc:
            # The catalog lives in the database: say which one is unreachable, not a traceback.
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CommandError(f"the database is unavailable: {first_line}") from None

    def sync(self, options: dict[str, Any]) -> None:
        if not Path(options["dockerfiles"]).is_dir():
            raise CatalogError(f"{options['dockerfiles']}: no such Dockerfile directory")
        registry = options["registry"] if options["registry"] is not None else os.environ.get(REGISTRY_ENV)
        report = catalog_sync(root=options["dockerfiles"], registry=registry)
        for outcome in ("created", "updated", "unchanged", "retired"):
            for reference in getattr(report, outcome):
                self.stdout.write(f"{outcome:<9} {reference}")
        self.stdout.write(
            f"{len(report.images)} images: {len(report.created)} created, {len(report.updated)} updated, "
            f"{len(report.unchanged)} unchanged, {len(report.retired)} retired"
        )

    def list(self, options: dict[str, Any]) -> None:
        rows = JobImage.objects.all() if options["all"] else JobImage.objects.filter(is_active=True)
        if not rows.exists():
            self.stdout.write("The catalog is empty; run `manage.py images sync`.")
            return
        header = ("IMAGE", "FRAMEWORK", "CUDA", "MIN DRIVER", "PYTHON", "BUILT", "ACTIVE")
        table = [header]
        for row in rows:
            framework = f"{row.framework} {row.framework_version}".strip() or "-"
            built = (row.digest or row.image_id)[:19] or "never"
            table.append(
                (
                    row.reference,
                    framework,
                    row.cuda_version or "-",
                    row.min_driver or "-",
                    row.python_version or "-",
                    built,
                    "yes" if row.is_active else "no",
                )
            )
        widths = [max(len(line[i]) for line in table) for i in range(len(header))]
        for line in table:
            self.stdout.write(
                "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
            )

    def build(self, options: dict[str, Any]) -> None:
        registry = (
            options["registry"] if options["registry"] is not None else os.environ.get(REGISTRY_ENV, "")
        )
        if options["push"] and not registry:
            raise CommandError(f"--push needs --registry (or ${REGISTRY_ENV}): where should the images go?")
        catalog = load_catalog(options["dockerfiles"])
        plan = build_plan(catalog, options["names"])
        # Ask for the engine before anything else: without one there is nothing useful to do.
        client = builder.connect()
        verbose = options["verbosity"] >= 2
        for image in plan:
            reference = image.reference_in(registry)
            gpus = image.accelerator == "gpu" and not options["no_gpu"]
            self.stdout.write(f"building {reference} from {image.dockerfile}")
            image_id = builder.build(
                client,
                image,
                reference=reference,
                build_args=build_args(image, catalog, registry),
                no_cache=options["no_cache"],
                log=(lambda line: self.stdout.write(f"  {line}")) if verbose else (lambda line: None),
            )
            self.stdout.write(f"smoke-testing {reference} ({'with' if gpus else 'without'} GPUs)")
            output = builder.smoke_test(
                client, image, reference=reference, gpus=gpus, timeout_s=options["smoke_timeout"]
            )
            if verbose:
                for line in output.splitlines():
                    self.stdout.write(f"  {line}")
            digest = builder.push(client, reference) if options["push"] else ""
            row = image_record_build(image=image, registry=registry, image_id=image_id, digest=digest)
            self.stdout.write(
                f"recorded  {row.reference} image {image_id}" + (f" digest {digest}" if digest else "")
            )


def _dockerfiles_help(path: Path) -> str:
    return f"directory of <image>/Dockerfile (default: {path})"
