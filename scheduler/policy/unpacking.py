"""Unpacking: which job of a shared GPU is moved off it, and when.

- ``gandiva`` (introspection, Gandiva): a GPU whose tenants' measured combined progress rate is
  below 1 (packing loses to taking turns) loses its newest tenant.
- ``tolerance`` (ours): the same, and also when a tenant's measured rate is below
  1 / its ``slowdown_tolerance`` (the prediction that admitted it was too optimistic).
- *on idle* (ours, ``Policy.unpack_on_idle``): when idle GPUs are left over after every waiting
  job's need, the newest tenant of each shared GPU (in GPU order, one per spare GPU) is restarted so
  that the next cycle places it alone (idle GPU first): alone, both jobs run at 1.

The moved job waits again (its restart costs the checkpoint restore); under ``gandiva`` and
``tolerance`` it learns to avoid its former co-tenants' job types (``hints["avoid_types"]``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

EPS = 1e-9
T = TypeVar("T")


def unpack_victim(
    tenants: Sequence[T],
    rates: Sequence[float],
    started: Sequence[Any],
    rule: str,
    tolerance: float | Sequence[float],
) -> T | None:
    """The tenant to move off one GPU (the newest: the largest ``started`` key), or None.

    ``rates``: measured progress rate of each tenant (1.0 = as fast as alone); ``started``: each
    tenant's start, any comparable key (the policy round passes ``(start, submit order)``);
    ``tolerance``: the tenants' slowdown tolerances (one for all, or one each)."""
    if len(tenants) < 2:
        return None
    tols = [tolerance] * len(rates) if isinstance(tolerance, (int, float)) else list(tolerance)
    slow = rule == "tolerance" and any(r * t < 1.0 - EPS for r, t in zip(rates, tols, strict=True))
    if sum(rates) >= 1.0 and not slow:
        return None
    return newest(tenants, started)


def newest(tenants: Sequence[T], started: Sequence[Any]) -> T:
    """The most recently started tenant (the largest ``started`` key; the first of equal keys)."""
    best = 0
    for i in range(1, len(tenants)):
        if started[i] > started[best]:
            best = i
    return tenants[best]


def spare_gpus(idle: int, needs: Iterable[float]) -> float:
    """Idle GPUs left after every waiting job's need (0 when none is spare). Stops as soon as no
    spare GPU can be left (needs are >= 0), so a long queue is not walked for nothing."""
    need = 0.0
    for n in needs:
        need += n
        if idle - need < 1 - EPS:
            return 0.0
    spare = idle - need
    return spare if spare >= 1 - EPS else 0.0


def unpack_on_idle(shared: Iterable[tuple[Sequence[T], Sequence[Any]]], spare: float) -> list[T]:
    """Tenants to restart alone: the newest of each shared GPU (``(tenants, their starts)``, in GPU
    order), one per spare GPU."""
    moved: list[T] = []
    for tenants, started in shared:
        if len(tenants) < 2:
            continue
        if len(moved) + 1 > spare + EPS:
            break
        moved.append(newest(tenants, started))
    return moved
