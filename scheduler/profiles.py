"""Named scheduler profiles. The platform picks one by name (setting ``SCHEDULER_PROFILE``)."""

from __future__ import annotations

from collections.abc import Callable

from scheduler.framework import Profile


def _first_fit() -> Profile:
    return Profile(name="first_fit", filters=("resource_fit",), scores={}, gpu_chooser="first_fit_gpus")


PROFILES: dict[str, Callable[[], Profile]] = {
    "first_fit": _first_fit,
    # Until the fine-grained profile lands, the default is first fit.
    "default": _first_fit,
}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]()
    except KeyError:
        raise ValueError(
            f"unknown scheduler profile {name!r}; known: {', '.join(sorted(PROFILES))}"
        ) from None
