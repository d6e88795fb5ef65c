"""``balance_yield`` on a few rows in plain Python (``BalanceYield._score_small``) gives the array
path's scores to the bit: randomised nodes (GPU and CPU-only, empty and busy, reserved sizes or not),
tasks (whole GPUs, shares, CPU only) and row sets (one row, repeats, up to ``SMALL_ROWS``); NumPy's
``std`` over the three resources adds them one after another, as the Python sum does."""

from __future__ import annotations

import random

import numpy as np
import pytest

import scheduler.plugins.balance_yield as by
from scheduler.engine.arrays import ClusterArrays
from scheduler.frag.fragmentation import TargetWorkload
from scheduler.framework import CycleState
from scheduler.model import GPU_MILLI, ClusterSnapshot, Gpu, Node, TaskRequest


def _node(rng: random.Random, i: int) -> Node:
    n = rng.choice([0, 1, 2, 4, 8, 8])
    cpu = rng.choice([8000, 32000, 96000, 1])
    mem = rng.choice([16000, 128000, 1])
    empty = rng.random() < 0.3
    gpus = [
        Gpu(
            index=g,
            model="T4",
            memory_mib=16000,
            used_milli=0 if empty else rng.choice([0, 0, GPU_MILLI, 250, 500, 700]),
        )
        for g in range(n)
    ]
    return Node(
        name=f"n{i}",
        cpu_milli=cpu,
        memory_mib=mem,
        used_cpu_milli=0 if empty else rng.randrange(0, cpu + 1),
        used_memory_mib=0 if empty else rng.randrange(0, mem + 1),
        gpus=gpus,
    )


def _task(rng: random.Random, i: int) -> TaskRequest:
    kind = rng.choice(["whole", "shared", "cpu"])
    return TaskRequest(
        f"t{i}",
        cpu_milli=rng.choice([0, 1000, 4000, 12345]),
        memory_mib=rng.choice([0, 2000, 8000, 33333]),
        gpus=rng.choice([1, 2, 4, 8]) if kind == "whole" else 0,
        gpu_milli=rng.choice([100, 250, 500, 999]) if kind == "shared" else 0,
        gpu_memory_mib=rng.choice([0, 4000]) if kind == "shared" else 0,
    )


@pytest.mark.parametrize("seed", range(6))
def test_the_small_path_equals_the_array_path_to_the_bit(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    rng = random.Random(seed)
    nodes = [_node(rng, i) for i in range(24)]
    nodes.append(
        Node(name="empty8", cpu_milli=96000, memory_mib=128000, gpus=[Gpu(g, "T4", 16000) for g in range(8)])
    )
    for node in nodes[:-1]:  # one empty 8-GPU node, the one a gang demand reserves
        if len(node.gpus) == 8:
            node.gpus[0].used_milli = GPU_MILLI
    gang = TaskRequest("gang", cpu_milli=32000, memory_mib=64000, gpus=8)
    one = TaskRequest("one", cpu_milli=4000, memory_mib=8000, gpus=1)
    compared = reserved_seen = scored = 0
    for case in range(200):
        tasks = [_task(rng, k) for k in range(rng.randrange(1, 12))]
        if rng.random() < 0.5:
            tasks = [one] * 32 + [gang]  # gang demand: the empty 8-GPU node reserved
        state = CycleState(
            snapshot=ClusterSnapshot(nodes=nodes),
            data={"target_workload": TargetWorkload.from_tasks(tasks)},
            arrays=ClusterArrays.from_nodes(nodes),
            seeded_rng=np.random.default_rng(0),
        )
        task = _task(rng, 100 + case)
        k = rng.randrange(1, by.SMALL_ROWS + 1)
        rows = np.array([rng.randrange(len(nodes)) for _ in range(k)], dtype=np.int64)
        if rng.random() < 0.5:
            rows[0] = len(nodes) - 1
        plugin = by.BalanceYield(reserve_for_gangs=rng.random() < 0.8)
        small = plugin.score_rows(state, task, rows)
        monkeypatch.setattr(by, "SMALL_ROWS", -1)  # the array path
        arrays = plugin.score_rows(state, task, rows)
        monkeypatch.setattr(by, "SMALL_ROWS", 16)
        assert small.dtype == arrays.dtype == np.float64 and small.shape == arrays.shape
        assert small.tobytes() == arrays.tobytes(), (small, arrays)
        np.testing.assert_array_equal(plugin.normalize_rows(small), plugin.normalize_rows(arrays))
        compared += 1
        reserved_seen += bool((arrays < 0).any())
        scored += bool((arrays > 0).any())
    assert compared == 200 and reserved_seen and scored
