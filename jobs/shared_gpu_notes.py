"""One prediction per shared GPU for the tasks of one job.

The placement engine annotates each task as it places it, so when two replicas of a job share a GPU
the first was predicted alone (x1.00) and the second next to the first (x1.10): two numbers for one
GPU that both tasks share from the start. Before the placements are stored, every task of the job on
a shared GPU takes the prediction made with all of its siblings there (the last one placed on that
GPU), and its "interference: ..." line with it.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduler.model import Placement

GPU_MILLI = 1000
INTERFERENCE = "interference:"


def _lines(reason: str) -> list[str]:
    return [line for line in reason.split("; ") if line] if reason else []


def agree_on_shared_gpus(placements: Iterable[Placement]) -> list[Placement]:
    """``placements`` (one job's, in placement order) with one predicted slowdown and one interference
    line per shared GPU. Changes the placements in place and returns them as a list."""
    placements = list(placements)
    last_on: dict[tuple[str, int], Placement] = {}
    for p in placements:
        if len(p.gpu_indices) == 1 and 0 < p.gpu_milli < GPU_MILLI:
            last_on[(p.node, p.gpu_indices[0])] = p
    for p in placements:
        if len(p.gpu_indices) != 1 or not 0 < p.gpu_milli < GPU_MILLI:
            continue
        last = last_on[(p.node, p.gpu_indices[0])]
        if last is p:
            continue
        p.predicted_slowdown = last.predicted_slowdown
        theirs = [line for line in _lines(last.reason) if line.startswith(INTERFERENCE)]
        mine = [line for line in _lines(p.reason) if not line.startswith(INTERFERENCE)]
        p.reason = "; ".join(mine + theirs)
    return placements
