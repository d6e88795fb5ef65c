"""Can a cluster's NVIDIA drivers run an image? Pure functions, no Django.

The rule (what job submission enforces):

* An image with no minimum driver (CPU images, custom images nobody described) runs anywhere.
* Driver versions are dotted numbers (``535.104.05``) compared part by part as integers, missing parts
  counting as zero, so ``550.54`` == ``550.54.0`` and ``535.104.05`` > ``535.54.03``.
* A node whose driver is unknown (empty string, ``None`` or not a dotted number: a node agent that has
  not reported yet, a CPU-only node) neither proves nor disproves anything and is ignored.
* The image is refused only when at least one node reports a driver and *every* reporting node's
  driver is older than the image's minimum. One new-enough node is enough: the scheduler's filters,
  not submission, keep the job off the older nodes.

The minimum driver is what NVIDIA's CUDA release notes list for the image's CUDA toolkit; the container
runtime enforces the same floor through ``NVIDIA_REQUIRE_CUDA``, so a refused job would otherwise fail
at container start with a far less helpful message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_DRIVER = re.compile(r"^\d+(\.\d+)*$")

DriverVersion = tuple[int, ...]


def parse_driver_version(text: str | None) -> DriverVersion | None:
    """``"535.104.05"`` -> ``(535, 104, 5)``; None for an empty or malformed version."""
    if not text:
        return None
    text = text.strip()
    if not _DRIVER.match(text):
        return None
    parts = [int(part) for part in text.split(".")]
    # Trailing zeros carry no meaning ("550.54" is "550.54.0"), so drop them to compare equal.
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def _newest(node_drivers: Iterable[str | None]) -> tuple[DriverVersion, str] | None:
    best: tuple[DriverVersion, str] | None = None
    for raw in node_drivers:
        version = parse_driver_version(raw)
        if version is not None and (best is None or version > best[0]):
            best = (version, (raw or "").strip())
    return best


def newest_driver(node_drivers: Iterable[str | None]) -> str | None:
    """The newest known driver among ``node_drivers`` as reported, or None when none is known."""
    best = _newest(node_drivers)
    return best[1] if best else None


def driver_incompatibility(
    min_driver: str, node_drivers: Iterable[str | None], *, image: str = "this image"
) -> str | None:
    """Why no node can run an image needing NVIDIA driver >= ``min_driver``, or None if one can.

    ``node_drivers`` holds one entry per node (duplicates are fine); see the module docstring for how
    unknown drivers count. ``image`` names the image in the message. The message says what to do:
    pick an image with a lower floor or ask for a driver upgrade. A malformed ``min_driver`` is a
    catalog error, reported the same way so that submission refuses instead of guessing.
    """
    required = (min_driver or "").strip()
    if not required:
        return None
    required_version = parse_driver_version(required)
    if required_version is None:
        return (
            f"{image} declares an invalid minimum NVIDIA driver {required!r}; "
            "ask a platform admin to correct the image catalog"
        )
    best = _newest(node_drivers)
    if best is None or best[0] >= required_version:
        return None
    newest = best[1]
    return (
        f"{image} needs NVIDIA driver >= {required}, but the newest driver on the cluster's nodes is "
        f"{newest}; choose an image built for an older CUDA (minimum driver <= {newest}) or a CPU image, "
        "or ask a platform admin to upgrade the node drivers"
    )
