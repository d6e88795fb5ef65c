"""``sim_interference``'s row views for a few rows in plain Python (``_views_small``,
``_row_classes_small``) give the answers of the array path (``_views_arrays``, ``_row_classes``):
compared in place on every call of simulated runs (the filter's busy slots and the score's and
admission's candidates, admitted and refused classes, ties between GPUs, a NaN throughput, one row
and several), and whole runs with either path give the same decisions. The cluster-state stamp
``ClusterArrays.writes`` moves with ``version.sum()``."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from sim_helpers import cluster, two_type_perf

import scheduler.plugins.sim_interference as placement
from scheduler.engine.arrays import ClusterArrays
from scheduler.framework import Profile
from scheduler.interference.predict import SetPrediction, SetQuery
from scheduler.model import Node, Placement
from scheduler.policy.registry import Policy
from scheduler.sim.engine import SimConfig, SimResult, Simulator
from scheduler.sim.trace import TraceJob


def _policy(idle_first: bool) -> Policy:
    profile = Profile(
        name="t-sim-row-views",
        filters=("resource_fit", "sim_interference"),
        scores={"sim_interference": 1.0},
        gpu_chooser="sim_interference",
        args={
            "sim_interference": {"use_model": False, "min_total_throughput": 1.0, "idle_first": idle_first}
        },
    )
    return Policy(name="t-ours-row-views", order="las", share="half", profile=profile, preemptive=True)


def _fake(nan: bool) -> Any:
    """Predictions that depend on who shares (LM next to LM refused; the rest admitted at a
    throughput of the mix, so GPUs of one mix tie); ``nan``: a mixed pair's throughput is NaN."""

    def fake(model: object, queries: Sequence[SetQuery]) -> list[SetPrediction]:
        out = []
        for q in queries:
            lm = sum(1 for p in q.profiles if "LM" in str(p.get("job_key", p.get("job_type", ""))))
            s = np.full(len(q.profiles), 1.9 if lm >= 2 else 1.2 + 0.1 * lm)
            if nan and lm == 1:
                s = np.full(
                    len(q.profiles), math.nan
                )  # admitted (no slowdown over tolerance), throughput NaN
            out.append(SetPrediction(s, s.copy(), 1.0, "model"))
        return out

    return fake


def _jobs(n: int, seed: int, multi: bool = True) -> list[TraceJob]:
    rng = random.Random(seed)
    jobs = []
    t = 0.0
    for i in range(n):
        t += rng.expovariate(1 / 15.0)
        gpus = 1 if rng.random() < 0.85 or not multi else rng.choice([2, 4])
        jobs.append(TraceJob(f"j{i}", t, rng.uniform(50, 900), gpus, family=rng.choice(["ResNet-18", "LM"])))
    return jobs


def _run(jobs: list[TraceJob], idle_first: bool, nodes: int = 3, gpus: int = 4) -> SimResult:
    sim = Simulator(
        jobs,
        cluster(nodes=nodes, gpus=gpus),
        _policy(idle_first),
        two_type_perf(0.7, 0.8),
        SimConfig(cycle_s=10.0),
    )
    return sim.run()


def _same_views(small: list[Any] | None, arrays: list[Any] | None) -> None:
    assert (small is None) == (arrays is None)
    if small is None or arrays is None:
        return
    assert len(small) == len(arrays)
    for a, b in zip(small, arrays, strict=True):
        assert type(a.admits) is type(b.admits) is bool and a.admits == b.admits
        assert type(a.busy) is type(b.busy) is bool and a.busy == b.busy
        assert type(a.score) is type(b.score) is float
        assert a.score == b.score or (math.isnan(a.score) and math.isnan(b.score))
        assert a.allowed.dtype == b.allowed.dtype == bool and a.allowed.shape == b.allowed.shape
        np.testing.assert_array_equal(a.allowed, b.allowed)


@pytest.mark.parametrize(
    ("seed", "idle_first", "nan", "gpus"),
    [
        (0, True, False, 4),
        (1, True, False, 4),
        (0, False, False, 4),
        (2, False, False, 1),
        (1, False, True, 4),
    ],
)
def test_the_small_row_views_equal_the_array_views_in_place(
    monkeypatch: pytest.MonkeyPatch, seed: int, idle_first: bool, nan: bool, gpus: int
) -> None:
    monkeypatch.setattr(placement, "predict_sets", _fake(nan))
    cls = placement.CachedInterference
    small, arrays = cls._views_small, cls._views_arrays
    seen = {"calls": 0, "given": 0, "rows>1": 0, "refused": 0, "admitted": 0, "none": 0, "nan": 0}

    def spy(
        self: Any, state: Any, cycle: Any, task: Any, sub: Any, given: Any, cand: Any, counts: Any
    ) -> Any:
        got = small(self, state, cycle, task, sub, given, cand, counts)
        # The array path on the same inputs (the class verdicts are now memoised: only a cache).
        _same_views(got, arrays(self, state, cycle, task, sub, given, cand, counts))
        seen["calls"] += 1
        seen["given"] += given is not None
        seen["rows>1"] += len(sub) > 1
        if got is None:
            seen["none"] += 1
        else:
            seen["refused"] += any(v.busy and not v.admits for v in got)
            seen["admitted"] += any(v.admits for v in got)
            # Admitted on a GPU whose predicted throughput is NaN only: scored 0.0 (numpy's max).
            seen["nan"] += any(v.admits and v.score == 0.0 for v in got)
        return got

    rows_small = cls._row_classes_small

    def classes(self: Any, state: Any, sub: Any) -> list[list[int]]:
        got = rows_small(self, state, sub)
        assert got == cls._row_classes(self, state, sub).tolist()
        seen["classed"] = seen.get("classed", 0) + 1
        return got

    monkeypatch.setattr(cls, "_views_small", spy)
    monkeypatch.setattr(cls, "_row_classes_small", classes)
    _run(_jobs(150, seed, multi=gpus > 1), idle_first, nodes=3 if gpus > 1 else 6, gpus=gpus)
    assert seen["calls"] and seen["rows>1"] and seen.get("classed"), seen
    if gpus > 1:
        assert seen["given"] and seen["refused"] and seen["admitted"], seen
    assert bool(seen["nan"]) == nan, seen


@pytest.mark.parametrize(("seed", "idle_first"), [(0, True), (1, False), (3, False)])
def test_runs_with_the_small_or_the_array_path_give_the_same_decisions(
    monkeypatch: pytest.MonkeyPatch, seed: int, idle_first: bool
) -> None:
    monkeypatch.setattr(placement, "predict_sets", _fake(False))
    jobs = _jobs(150, seed)
    fast = _run(jobs, idle_first)
    monkeypatch.setattr(placement, "SMALL_VIEW_SLOTS", 0)  # every view over arrays
    slow = _run(jobs, idle_first)
    assert fast.placements == slow.placements > 0
    assert (fast.preemptions, fast.violations, fast.unpacks_on_idle, fast.migrations) == (
        slow.preemptions,
        slow.violations,
        slow.unpacks_on_idle,
        slow.migrations,
    )
    np.testing.assert_array_equal(fast.first_start, slow.first_start)
    np.testing.assert_array_equal(fast.finish, slow.finish)
    np.testing.assert_array_equal(fast.useful, slow.useful)


def test_the_writes_stamp_moves_with_the_version_sum() -> None:
    nodes = [Node(name=f"n{i}", cpu_milli=8000, memory_mib=65536) for i in range(3)]
    arrays = ClusterArrays.from_nodes(nodes)
    rng = random.Random(0)
    placements = []
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
