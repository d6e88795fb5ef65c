"""The cluster as NumPy arrays: one row per node, one column per GPU slot.

Vectorised plugins score every node at once from these arrays; ``schedule()`` and the fragmentation
benchmark both keep one ``ClusterArrays`` in step with their ``Node`` objects, so the same plugin math
drives the platform and the benchmark.

Layout (N nodes, G = the largest GPU count of any node):

* ``cpu_free``/``mem_free`` (N,): free milli-CPU and MiB of host memory;
* ``gpu_free`` (N, G): free milli-GPU per GPU; slots a node does not have hold 0 and are False in
  ``gpu_exists``, so sums and ``>= request`` tests ignore them for any request > 0;
* ``gpu_mem_free``/``gpu_mem_cap`` (N, G): GPU memory in MiB;
* ``model_id`` (N,): index into ``models`` (0 = no GPU);
* ``tags`` (N, 5): how many GPU tasks of each kind (shared, 1, 2, 4, 8+ GPUs) run on the node, the
  "affinity" GPU clustering packs by;
* ``version`` (N,): bumped whenever a row changes, so score caches can recompute only changed rows;
  whoever writes a row outside ``apply`` must bump it too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.model import GPU_MILLI, ClusterSnapshot, Node, Placement, TaskRequest

# Columns of ``ClusterArrays.tags``.
TAG_SHARED, TAG_1, TAG_2, TAG_4, TAG_8 = range(5)

IntArray = np.ndarray


def tag_of(gpus: int, gpu_milli: int) -> int:
    """Affinity tag of a GPU task: shared (< 1 GPU) or 1/2/4/8-GPU; -1 for a task without GPUs."""
    if gpus <= 0:
        return TAG_SHARED if 0 < gpu_milli < GPU_MILLI else -1
    if gpus == 1:
        return TAG_SHARED if 0 < gpu_milli < GPU_MILLI else TAG_1
    if gpus == 2:
        return TAG_2
    if gpus <= 4:
        return TAG_4
    return TAG_8


def task_tag(task: TaskRequest) -> int:
    if task.gpus:
        return tag_of(task.gpus, GPU_MILLI)
    return tag_of(0, task.gpu_milli)


def placement_tag(placement: Placement) -> int:
    n = len(placement.gpu_indices)
    if n == 0:
        return -1
    if n == 1 and placement.gpu_milli < GPU_MILLI:
        return TAG_SHARED
    return tag_of(n, GPU_MILLI)


@dataclass
class ClusterArrays:
    names: list[str]
    cpu_cap: IntArray
    cpu_free: IntArray
    mem_cap: IntArray
    mem_free: IntArray
    gpu_count: IntArray
    gpu_exists: np.ndarray
    gpu_free: IntArray
    gpu_mem_cap: IntArray
    gpu_mem_free: IntArray
    model_id: IntArray
    models: list[str]
    schedulable: np.ndarray
    tags: IntArray
    version: IntArray
    # Derived per-row values that plugins memoise, stamped with ``version`` (e.g. the fragment terms
    # of ``scheduler.frag.fragmentation``); they live and die with these arrays.
    memo: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
    # How many times a row's ``version`` was bumped (``refresh_row``, ``apply`` and the placement
    # engine's admission mask): a stamp of the whole cluster state, equal to ``version.sum()`` less
    # its value at creation, without a reduction over every row (plugins key memos with it).
    writes: int = field(default=0, repr=False, compare=False)

    @property
    def n(self) -> int:
        return len(self.names)

    @classmethod
    def from_nodes(cls, nodes: Sequence[Node], running: Iterable[Placement] = ()) -> ClusterArrays:
        n = len(nodes)
        g = max((len(node.gpus) for node in nodes), default=0) or 1
        models = [""]
        model_index = {"": 0}
        model_id: list[int] = []
        # Padded per-slot lists, converted once: element-wise writes into NumPy arrays cost more
        # than the rest of a small ``schedule()`` call.
        free: list[list[int]] = []
        mem_cap: list[list[int]] = []
        mem_free: list[list[int]] = []
        count: list[int] = []
        for node in nodes:
            model = node.gpu_model
            if model not in model_index:
                model_index[model] = len(models)
                models.append(model)
            model_id.append(model_index[model])
            gpus = node.gpus
            pad = [0] * (g - len(gpus))
            count.append(len(gpus))
            free.append([GPU_MILLI - gpu.used_milli for gpu in gpus] + pad)
            mem_cap.append([gpu.memory_mib for gpu in gpus] + pad)
            mem_free.append([gpu.memory_mib - gpu.used_memory_mib for gpu in gpus] + pad)
        gpu_count = np.array(count, dtype=np.int64).reshape(n)
        arr = cls(
            names=[node.name for node in nodes],
            cpu_cap=np.array([node.cpu_milli for node in nodes], dtype=np.int64),
            cpu_free=np.array([node.free_cpu_milli for node in nodes], dtype=np.int64),
            mem_cap=np.array([node.memory_mib for node in nodes], dtype=np.int64),
            mem_free=np.array([node.free_memory_mib for node in nodes], dtype=np.int64),
            gpu_count=gpu_count,
            gpu_exists=np.arange(g)[None, :] < gpu_count[:, None],
            gpu_free=np.array(free, dtype=np.int64).reshape(n, g),
            gpu_mem_cap=np.array(mem_cap, dtype=np.int64).reshape(n, g),
            gpu_mem_free=np.array(mem_free, dtype=np.int64).reshape(n, g),
            model_id=np.array(model_id, dtype=np.int64).reshape(n),
            models=models,
            schedulable=np.array([node.schedulable for node in nodes], dtype=bool),
            tags=np.zeros((n, 5), dtype=np.int64),
            version=np.zeros(n, dtype=np.int64),
        )
        rows = {name: i for i, name in enumerate(arr.names)}
        for placement in running:
            tag = placement_tag(placement)
            at = rows.get(placement.node)
            if tag >= 0 and at is not None:
                arr.tags[at, tag] += 1
        return arr

    @classmethod
    def from_snapshot(cls, snapshot: ClusterSnapshot) -> ClusterArrays:
        return cls.from_nodes(snapshot.nodes, snapshot.running)

    def refresh_row(self, row: int, node: Node, running: Iterable[Placement] = ()) -> None:
        """Rewrite ``row`` from ``node`` and the placements running on it, as ``from_nodes`` would
        (the node's GPU model and count must not change); bumps its version."""
        gpus = node.gpus
        k = len(gpus)
        tags = [0] * 5
        for placement in running:
            tag = placement_tag(placement)
            if tag >= 0:
                tags[tag] += 1
        self.cpu_free[row] = node.free_cpu_milli
        self.mem_free[row] = node.free_memory_mib
        self.gpu_free[row, :k] = [GPU_MILLI - gpu.used_milli for gpu in gpus]
        self.gpu_mem_free[row, :k] = [gpu.memory_mib - gpu.used_memory_mib for gpu in gpus]
        self.schedulable[row] = node.schedulable
        self.tags[row] = tags
        self.version[row] += 1
        self.writes += 1

    def take(self, rows: Sequence[int] | np.ndarray) -> ClusterArrays:
        """New arrays of ``rows`` (in that order), equal to ``from_nodes`` of those nodes with their
        running placements: columns up to the largest GPU count among them, models numbered in order
        of first appearance, versions 0, an empty memo."""
        idx = np.asarray(rows, dtype=np.int64)
        n = idx.size
        count = self.gpu_count[idx]
        g = int(count.max()) if n else 0
        g = g or 1
        old = self.model_id[idx]
        # ``from_nodes`` numbers models from 1 in order of first appearance ("" is always 0).
        uniq, first = np.unique(old, return_index=True)
        order = uniq[np.argsort(first, kind="stable")]
        models = [""]
        remap = np.zeros(len(self.models), dtype=np.int64)
        for m in order.tolist():
            if m != 0:
                remap[m] = len(models)
                models.append(self.models[m])
        names = self.names
        return ClusterArrays(
            names=[names[i] for i in idx.tolist()],
            cpu_cap=self.cpu_cap[idx],
            cpu_free=self.cpu_free[idx],
            mem_cap=self.mem_cap[idx],
            mem_free=self.mem_free[idx],
            gpu_count=count,
            gpu_exists=np.arange(g)[None, :] < count[:, None],
            gpu_free=self.gpu_free[idx, :g],
            gpu_mem_cap=self.gpu_mem_cap[idx, :g],
            gpu_mem_free=self.gpu_mem_free[idx, :g],
            model_id=remap[old],
            models=models,
            schedulable=self.schedulable[idx],
            tags=self.tags[idx],
            version=np.zeros(n, dtype=np.int64),
        )

    def model_mask(self, gpu_models: tuple[str, ...]) -> np.ndarray:
        """Rows whose GPU model is acceptable (all rows when no model is asked for)."""
        if not gpu_models:
            return np.ones(self.n, dtype=bool)
        # Models never change for a row, so one mask per model set serves the whole run (read-only,
        # as it is shared).
        key = ("model_mask", gpu_models)
        mask: np.ndarray | None = self.memo.get(key)
        if mask is None:
            ids = [i for i, m in enumerate(self.models) if m in gpu_models]
            mask = np.isin(self.model_id, ids)
            mask.flags.writeable = False
            self.memo[key] = mask
        return mask

    def apply(self, row: int, placement: Placement, sign: int = 1) -> None:
        """Account (sign=+1) or release (sign=-1) a placement on ``row``."""
        self.cpu_free[row] -= sign * placement.cpu_milli
        self.mem_free[row] -= sign * placement.memory_mib
        for idx in placement.gpu_indices:
            self.gpu_free[row, idx] -= sign * placement.gpu_milli
            self.gpu_mem_free[row, idx] -= sign * placement.gpu_memory_mib
        tag = placement_tag(placement)
        if tag >= 0:
            self.tags[row, tag] += sign
        self.version[row] += 1
        self.writes += 1
