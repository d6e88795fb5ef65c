"""The plugin registry: plugin name -> factory, filled by ``@register`` as plugin modules load.

A leaf module (it imports nothing of the scheduler), so that the contracts (``scheduler.framework``,
whose ``Profile.build`` creates plugins by name) and the plugins (``scheduler.plugins``, which register
themselves) both import it without importing each other. The package root (``scheduler/__init__.py``)
imports ``scheduler.plugins``, so every built-in plugin is registered before any code of the library
runs; ``create_plugin`` never has to load anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PluginFactory = Callable[..., Any]
REGISTRY: dict[str, PluginFactory] = {}


def register(name: str) -> Callable[[PluginFactory], PluginFactory]:
    """Class decorator: make a plugin available to profiles under ``name``."""

    def wrap(cls: PluginFactory) -> PluginFactory:
        if name in REGISTRY and REGISTRY[name] is not cls:
            raise ValueError(f"plugin name {name!r} registered twice")
        REGISTRY[name] = cls
        cls.name = name  # type: ignore[attr-defined]
        return cls

    return wrap


def create_plugin(name: str, args: dict[str, Any] | None = None) -> Any:
    """A new instance of the plugin registered as ``name``, made with ``args`` as keywords."""
    try:
        factory = REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise ValueError(f"unknown scheduler plugin {name!r}; known plugins: {known}") from None
    return factory(**(args or {}))
