"""Per-node adapters for batch plugins: the per-node hooks run the batch math on a one-row view."""

from __future__ import annotations

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.framework import CycleState
from scheduler.model import Node, TaskRequest

_ROW0 = np.array([0])


def one_node_state(state: CycleState, node: Node) -> CycleState:
    """A CycleState whose ``arrays`` hold only ``node`` (row 0), sharing everything else."""
    running = [p for p in state.snapshot.running if p.node == node.name]
    return CycleState(
        snapshot=state.snapshot,
        job=state.job,
        data=state.data,
        arrays=ClusterArrays.from_nodes([node], running),
        seeded_rng=state.rng,
    )


class RowScoreMixin:
    """``score(state, task, node)`` from ``score_rows`` on a one-row view."""

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def score(self, state: CycleState, task: TaskRequest, node: Node) -> float:
        return float(self.score_rows(one_node_state(state, node), task, _ROW0)[0])


class RowChooserMixin:
    """``choose_gpus(state, task, node)`` from ``choose_gpus_row`` on a one-row view."""

    def choose_gpus_row(self, state: CycleState, task: TaskRequest, row: int) -> tuple[int, ...] | None:
        raise NotImplementedError

    def choose_gpus(self, state: CycleState, task: TaskRequest, node: Node) -> tuple[int, ...] | None:
        return self.choose_gpus_row(one_node_state(state, node), task, 0)
