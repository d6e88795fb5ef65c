"""Fair share between teams: usage with an exponential decay, and the factor that orders teams
competing for idle capacity (the cohort's borrowing; ``scheduler.policy.cohort``).

Decayed usage (Slurm's ``PriorityDecayHalfLife``, default 7 days): GPU-hours weighted by
``2 ** (-age / half_life)``. A run that held ``g`` GPUs from ``s`` to ``e`` contributes the integral of
its rate over time, each instant weighted by its age at ``now``::

    U = g / 3600 * integral_s^e 2 ** (-(now - t) / h) dt
      = g / 3600 * h / ln 2 * (2 ** (-(now - e) / h) - 2 ** (-(now - s) / h))

(exact, not sampled: the value does not depend on how often it is computed).

Fair-share factor (Slurm's classic formula): ``F = 2 ** (-U_norm / S_norm)``, where ``U_norm`` is the
team's share of all teams' decayed usage and ``S_norm`` its share of the guarantees (the weight). F is
1 for a team that used nothing, 0.5 for one that used exactly its share, and falls towards 0 the more
it used beyond it. Teams borrowing idle GPUs are served by the lowest *effective share*
``(held + request) / (S_norm * F)``: with equal history idle GPUs split in proportion to the
guarantees (the weights), and a team with heavy recent use gets less of them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

DEFAULT_HALF_LIFE_S = 7 * 24 * 3600.0
# Weight of a team without a guarantee: it may still borrow, after the guaranteed teams.
MIN_WEIGHT = 1e-3


def decayed_gpu_hours(
    runs: Iterable[tuple[float, float, float]], *, now: float, half_life_s: float = DEFAULT_HALF_LIFE_S
) -> float:
    """Decayed GPU-hours of ``runs`` (start, end, GPUs held) at ``now`` (seconds, one clock). The part
    of a run after ``now`` does not count; ``half_life_s <= 0`` means no decay."""
    total = 0.0
    for start, end, gpus in runs:
        end = min(end, now)
        if end <= start or gpus <= 0:
            continue
        if half_life_s <= 0:
            total += gpus * (end - start) / 3600.0
            continue
        k = math.log(2.0) / half_life_s
        total += gpus / 3600.0 * (math.exp(-k * (now - end)) - math.exp(-k * (now - start))) / k
    return total


def weights(guarantees: Mapping[str, float]) -> dict[str, float]:
    """Each team's normalised share of the guarantees (``S_norm``); teams without a guarantee get
    ``MIN_WEIGHT`` of an equal share, so that they borrow last but still borrow."""
    total = sum(max(0.0, g) for g in guarantees.values())
    if total <= 0:
        return {t: 1.0 / max(1, len(guarantees)) for t in guarantees}
    return {t: max(max(0.0, g) / total, MIN_WEIGHT / max(1, len(guarantees))) for t, g in guarantees.items()}


def fair_share_factors(usage: Mapping[str, float], guarantees: Mapping[str, float]) -> dict[str, float]:
    """Slurm's classic fair-share factor ``2 ** (-U_norm / S_norm)`` of each team in ``guarantees``
    (``usage``: decayed GPU-hours; a team absent from it used nothing)."""
    shares = weights(guarantees)
    total = sum(max(0.0, usage.get(t, 0.0)) for t in guarantees)
    if total <= 0:
        return {t: 1.0 for t in guarantees}
    return {t: 2.0 ** (-(max(0.0, usage.get(t, 0.0)) / total) / shares[t]) for t in guarantees}


def effective_share(held_milli: float, weight: float, factor: float) -> float:
    """Lower is served first among borrowers: GPUs held over the team's weight scaled by its factor."""
    return held_milli / max(weight * factor, 1e-12)
