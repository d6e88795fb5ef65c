"""Pure functions: from pairwise slowdowns to the slowdown of each job in a set, and the analytic
estimate used when no trained model is available.

Composition for k > 2 jobs on one GPU (*excess slowdowns add up*)::

    s_i = 1 + sum_{j != i} (s_ij - 1)          y_i = 1 / s_i

where ``s_ij`` is job i's predicted slowdown next to job j alone. It is exact for ideal time slicing of
k saturating jobs (each pair ``s_ij = 2`` gives ``s_i = k``, every job gets 1/k of the GPU), never
smaller than the worst pairwise slowdown, and reduces to ``s_ij`` for a pair. The product rule
``y_i = prod_j y_ij`` is the more pessimistic alternative (it would give ``2^(k-1)`` for the same case).
No public data set holds measurements of three or more training jobs on one GPU (Gavel and Lucid
measured pairs only, Tally one training job next to one inference server), so the rule is checked
against the time-slicing identity above rather than against measurements.

Analytic fallback (no trained model, or a job the model knows nothing about) for an ordered pair::

    u = gpu_util / 100   (else the declared share gpu_share, else 1.0: assume it saturates the GPU)
    m = mem_util / 100   (else u)
    y_ij = min(1, 1 / max(u_i + u_j, m_i + m_j)) / (1 + CONTENTION)

i.e. when the two jobs together ask for more than the GPU's SMs or memory bandwidth they share it in
proportion (time slicing), and even when they fit there is a context-switch / cache contention cost of
``CONTENTION = 0.10`` (Lucid's lightly loaded 3090 pairs show a median slowdown of 1.04x; 0.10 is
deliberately on the safe side). Then compose as above.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

CONTENTION = 0.10
# Memory head-room per CUDA context and the share of GPU memory we are willing to fill.
CONTEXT_MIB = 512.0
MEMORY_FILL = 0.9


def compose_slowdowns(pairwise: np.ndarray) -> np.ndarray:
    """Per-job slowdown of a set from the k x k matrix ``pairwise[i, j] = s_ij`` (diagonal ignored)."""
    s = np.asarray(pairwise, dtype=float)
    k = s.shape[0]
    if k == 0:
        return np.zeros(0)
    excess = np.clip(s - 1.0, 0.0, None)
    np.fill_diagonal(excess, 0.0)
    return 1.0 + excess.sum(axis=1)


def _value(profile: Mapping[str, float | str], key: str) -> float:
    v = profile.get(key)
    if v is None or isinstance(v, str):
        return math.nan
    f = float(v)
    return f


def load_fractions(profile: Mapping[str, float | str]) -> tuple[float, float]:
    """(u, m): the job's SM and memory-bandwidth load as fractions of the GPU, conservatively."""
    u = _value(profile, "gpu_util") / 100.0
    if math.isnan(u):
        u = _value(profile, "gpu_share")
    if math.isnan(u) or u <= 0:
        u = 1.0
    m = _value(profile, "mem_util") / 100.0
    if math.isnan(m) or m < 0:
        m = u
    return min(u, 1.0), min(m, 1.0)


def analytic_pair_throughput(
    self_profile: Mapping[str, float | str], other_profile: Mapping[str, float | str]
) -> float:
    """Normalised throughput ``y_ij`` of job i next to job j by the analytic rule (module docstring)."""
    ui, mi = load_fractions(self_profile)
    uj, mj = load_fractions(other_profile)
    load = max(ui + uj, mi + mj)
    return min(1.0, 1.0 / load) / (1.0 + CONTENTION) if load > 0 else 1.0 / (1.0 + CONTENTION)


def memory_fits(profiles: list[Mapping[str, float | str]], gpu_memory_mib: float) -> bool | None:
    """``sum(footprint_i + CONTEXT_MIB) <= MEMORY_FILL * capacity``; None when anything is unknown."""
    if not gpu_memory_mib or gpu_memory_mib <= 0:
        return None
    total = 0.0
    for p in profiles:
        mem = _value(p, "gpu_memory_mib")
        if math.isnan(mem):
            return None
        total += mem + CONTEXT_MIB
    return total <= MEMORY_FILL * gpu_memory_mib
