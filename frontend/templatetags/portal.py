"""Template filters of the portal."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def gpus(milli: int | float | None) -> str:
    """Milli-GPU as GPUs for people: 250 -> "0.25", 2000 -> "2", 1500 -> "1.5"."""
    value = (milli or 0) / 1000.0
    return f"{value:.3f}".rstrip("0").rstrip(".")
