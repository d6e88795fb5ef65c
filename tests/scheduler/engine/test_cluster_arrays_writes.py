"""``ClusterArrays.writes``, the stamp of the whole cluster state that plugins key memos with, moves
exactly as ``version.sum()`` does, without summing every row."""

from __future__ import annotations

import random

from scheduler.engine.arrays import ClusterArrays
from scheduler.model import Node, Placement


def test_the_writes_stamp_moves_with_the_version_sum() -> None:
    nodes = [Node(name=f"n{i}", cpu_milli=8000, memory_mib=65536) for i in range(3)]
    arrays = ClusterArrays.from_nodes(nodes)
    rng = random.Random(0)
    placements: list[tuple[int, Placement]] = []
    for _ in range(50):
        row = rng.randrange(3)
        if placements and rng.random() < 0.4:
            at, p = placements.pop()
            arrays.apply(at, p, -1)
        elif rng.random() < 0.2:
            arrays.refresh_row(row, nodes[row])
        else:
            p = Placement(
                job_id="j", task_id="t", node=f"n{row}", gpu_indices=(), cpu_milli=100, memory_mib=64
            )
            arrays.apply(row, p, +1)
            placements.append((row, p))
        assert arrays.writes == int(arrays.version.sum())
    sub = arrays.take([2, 0])
    assert sub.writes == int(sub.version.sum()) == 0
