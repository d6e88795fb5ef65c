"""Binning of per-arrival logs onto arrived-workload percent, as the FGD paper's analysis scripts do.

Each log line has ``arrived`` % (cumulative requested milli-GPU of all pods offered so far, failed
ones included, over cluster capacity) and metric values. Line -> bin ``round(arrived)`` (half up);
the value of bin b is the mean of its lines; an empty bin takes the lines of bins b-1 and b+1.
"""

from __future__ import annotations

import math

import numpy as np

MAX_BIN = 130


def bin_by_arrived(arrived_pct: np.ndarray, values: np.ndarray, max_bin: int = MAX_BIN) -> list[float | None]:
    """Mean of ``values`` per integer arrived-% bin 0..max_bin (None where no line is near)."""
    bins = np.floor(np.asarray(arrived_pct, dtype=float) + 0.5).astype(np.int64)
    values = np.asarray(values, dtype=float)
    keep = (bins >= 0) & (bins <= max_bin)
    sums = np.bincount(bins[keep], weights=values[keep], minlength=max_bin + 1)
    counts = np.bincount(bins[keep], minlength=max_bin + 1)
    out: list[float | None] = []
    for b in range(max_bin + 1):
        if counts[b]:
            out.append(float(sums[b] / counts[b]))
            continue
        lo, hi = max(b - 1, 0), min(b + 1, max_bin)
        n = counts[lo : hi + 1].sum()
        out.append(float(sums[lo : hi + 1].sum() / n) if n else None)
    return out


def mean_sd(values: list[float]) -> tuple[float, float]:
    """Mean and population standard deviation (the reference summaries use population sd)."""
    if not values:
        return math.nan, math.nan
    arr = np.asarray(values, dtype=float)
    return float(arr.mean()), float(arr.std())
