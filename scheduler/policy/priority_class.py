"""Priority classes inside a team: ``low``, ``normal``, ``high`` and ``urgent``.

A job's priority is an integer (``JobRequest.priority``, higher first); a class is a band of it, and
a class name given at submit stands for the band's value below. A job of a higher class may preempt
one of a lower class of the same team (the policy's ``priority`` rule); across teams only reclaim
evicts (``scheduler.policy.cohort``). Who may submit ``urgent`` is set per team by an admin.
"""

from __future__ import annotations

# Class name -> the priority it stands for; each class covers [its value, the next class's value).
PRIORITY_CLASSES: dict[str, int] = {"low": -100, "normal": 0, "high": 100, "urgent": 500}


def class_of(priority: int) -> str:
    """The class whose band holds ``priority`` (below ``normal``: ``low``)."""
    name = "low"
    for candidate, start in sorted(PRIORITY_CLASSES.items(), key=lambda item: item[1]):
        if priority >= start:
            name = candidate
    return name


def is_urgent(priority: int) -> bool:
    return class_of(priority) == "urgent"


def priority_value(value: int | str) -> int:
    """An integer priority, or a class name's value; ValueError for an unknown name."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    name = str(value).strip().lower()
    if name not in PRIORITY_CLASSES:
        raise ValueError(f"unknown priority class {value!r}; known: {', '.join(PRIORITY_CLASSES)}")
    return PRIORITY_CLASSES[name]
