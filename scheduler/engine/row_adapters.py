"""Per-node adapters for batch plugins (the per-node hooks run the batch math on a one-row view), and
the GPU choosers' common rule."""

from __future__ import annotations

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.engine.fit import fitting_gpu_mask, fitting_gpus
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


class SharedGpuRowChooser(RowChooserMixin):
    """The built-in choosers' rule: a task of k whole GPUs takes the k lowest-indexed GPUs that fit it
    (none when fewer fit); only a shared task's one GPU is the chooser's own ``choose_shared_row``,
    among ``fitting`` (the fitting GPUs of ``row``, ascending, never empty)."""

    def choose_gpus_row(self, state: CycleState, task: TaskRequest, row: int) -> tuple[int, ...] | None:
        fitting = np.flatnonzero(fitting_gpu_mask(state.arrays, task, np.array([row]))[0])
        needed = max(task.gpus, 1)
        if fitting.size < needed:
            return None
        if task.gpus:
            return tuple(int(i) for i in fitting[:needed])
        return self.choose_shared_row(state, task, row, fitting)

    def choose_shared_row(
        self, state: CycleState, task: TaskRequest, row: int, fitting: np.ndarray
    ) -> tuple[int, ...] | None:
        raise NotImplementedError


class SharedGpuNodeChooser:
    """``SharedGpuRowChooser``'s rule for a per-node chooser: ``choose_shared`` picks a shared task's GPU
    among ``fits`` (``fitting_gpus(task, node)``, never empty)."""

    def choose_gpus(self, state: CycleState, task: TaskRequest, node: Node) -> tuple[int, ...] | None:
        fits = fitting_gpus(task, node)
        needed = max(task.gpus, 1)
        if len(fits) < needed:
            return None
        if task.gpus:
            return tuple(fits[:needed])
        return self.choose_shared(state, task, node, fits)

    def choose_shared(
        self, state: CycleState, task: TaskRequest, node: Node, fits: list[int]
    ) -> tuple[int, ...] | None:
        raise NotImplementedError
