"""Score ``fgd``: fragmentation gradient descent (Weng et al., USENIX ATC'23), the node score of
``scheduler.frag.fgd_scores`` (floored as the paper does)."""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from scheduler.engine.row_adapters import RowScoreMixin
from scheduler.frag.fgd_scores import fgd_scores, target_workload
from scheduler.framework import CycleState
from scheduler.model import TaskRequest
from scheduler.plugin_registry import register


@register("fgd")
class Fgd(RowScoreMixin):
    name = "fgd"
    cacheable = True

    def cache_token(self, state: CycleState) -> Hashable:
        wl = target_workload(state)
        return (id(wl), wl.version)

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        return fgd_scores(state, task, rows, target_workload(state))[0]
