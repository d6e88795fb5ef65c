"""Template filters of the portal."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def gpus(milli: int | float | None) -> str:
    """Milli-GPU as GPUs for people: 250 -> "0.25", 2000 -> "2", 1500 -> "1.5"."""
    value = (milli or 0) / 1000.0
    return f"{value:.3f}".rstrip("0").rstrip(".")


@register.simple_tag
def may_submit(user: object) -> bool:
    """Whether ``user`` is an owner or member of some team (the navigation's Submit link)."""
    from frontend.selectors import writable_teams

    if not getattr(user, "is_authenticated", False):
        return False
    return bool(getattr(user, "is_superuser", False) or writable_teams(user=user))
