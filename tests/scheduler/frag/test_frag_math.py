"""Fragmentation measure, FGD's incremental update, binning, inflation and trace parsing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.bench.frag.experiment import inflate
from scheduler.bench.frag.metrics import bin_by_arrived, mean_sd
from scheduler.engine.arrays import ClusterArrays
from scheduler.frag.fragmentation import (
    TargetWorkload,
    _shared_per_shape_reference,
    fragment_after_whole,
    node_fragment,
    shared_fragment_after,
    sigmoid_score,
)
from scheduler.frag.trace import TraceError, load_nodes, load_pods
from scheduler.model import Gpu, Node, Placement, TaskRequest


def node(free: list[int], cpu_free: int = 8000, model: str = "T4") -> Node:
    return Node(
        name="n",
        cpu_milli=16000,
        memory_mib=64000,
        used_cpu_milli=16000 - cpu_free,
        gpus=[Gpu(index=i, model=model, memory_mib=16000, used_milli=1000 - f) for i, f in enumerate(free)],
    )


def test_a_node_fragment_counts_gpus_too_small_for_each_shape_weighted_by_frequency() -> None:
    wl = TargetWorkload.from_tasks(
        [TaskRequest("a", cpu_milli=1000, gpu_milli=500), TaskRequest("b", cpu_milli=1000)], coverage=1.0
    )
    arrays = ClusterArrays.from_nodes([node([1000, 300])])
    # shape 500: fits (1000 >= 500), fragment = the 300 GPU; CPU-only shape: all 1300 idle milli.
    assert node_fragment(wl, arrays, np.array([0]))[0] == pytest.approx(0.5 * 300 + 0.5 * 1300)


def test_a_shape_that_cannot_run_makes_all_idle_gpu_a_fragment() -> None:
    wl = TargetWorkload.from_tasks([TaskRequest("a", cpu_milli=9000, gpu_milli=200)], coverage=1.0)
    arrays = ClusterArrays.from_nodes([node([1000, 300], cpu_free=8000)])
    assert node_fragment(wl, arrays, np.array([0]))[0] == pytest.approx(1300)
    wrong_model = TargetWorkload.from_tasks(
        [TaskRequest("a", gpu_milli=200, gpu_models=("A100",))], coverage=1.0
    )
    assert node_fragment(wrong_model, arrays, np.array([0]))[0] == pytest.approx(1300)


def test_the_target_workload_keeps_the_most_frequent_shapes_up_to_the_coverage() -> None:
    tasks = [TaskRequest(f"w{i}", gpus=1) for i in range(90)] + [
        TaskRequest(f"s{i}", gpu_milli=i + 1) for i in range(10)
    ]
    wl = TargetWorkload.from_tasks(tasks, coverage=0.9)
    assert wl.shapes == [(0, 1000, 1, (), 0)]
    assert wl.probs.tolist() == [1.0]


@settings(max_examples=60, deadline=None)
@given(
    free=st.lists(st.integers(0, 1000), min_size=1, max_size=8),
    cpu_free=st.integers(0, 16000),
    milli=st.integers(1, 999),
    cpu=st.integers(0, 8000),
    shapes=st.lists(
        st.tuples(st.integers(0, 12000), st.integers(0, 1000), st.sampled_from([0, 1, 2])),
        min_size=1,
        max_size=6,
    ),
)
def test_the_incremental_fragment_equals_recomputing_the_changed_node(
    free: list[int], cpu_free: int, milli: int, cpu: int, shapes: list[tuple[int, int, int]]
) -> None:
    tasks = []
    for i, (c, m, k) in enumerate(shapes):
        if k == 0 or m == 0:
            tasks.append(TaskRequest(f"t{i}", cpu_milli=c))
        elif m == 1000 or k > 1:
            tasks.append(TaskRequest(f"t{i}", cpu_milli=c, gpus=k))
        else:
            tasks.append(TaskRequest(f"t{i}", cpu_milli=c, gpu_milli=m))
    wl = TargetWorkload.from_tasks(tasks, coverage=1.0)
    arrays = ClusterArrays.from_nodes([node(free, cpu_free)])
    rows = np.array([0])
    after = shared_fragment_after(wl, arrays, rows, milli, cpu, 0)[0]
    for i, f in enumerate(free):
        if f < milli:
            continue
        g = arrays.gpu_free[rows].copy()
        g[0, i] -= milli
        direct = node_fragment(wl, arrays, rows, gpu_free=g, cpu_free=arrays.cpu_free[rows] - cpu)[0]
        assert after[i] == pytest.approx(direct)


def random_cluster(seed: int, n: int = 300) -> tuple[ClusterArrays, TargetWorkload]:
    """Nodes of 2, 4 or 8 GPUs with random free milli-GPU and CPU, and a workload of 40 shapes."""
    rng = np.random.default_rng(seed)
    nodes = [
        node(
            [int(rng.choice([0, 1000, rng.integers(1000)])) for _ in range(int(rng.choice([2, 4, 8])))],
            cpu_free=int(rng.integers(0, 16000)),
            model=str(rng.choice(["T4", "V100"])),
        )
        for _ in range(n)
    ]
    for i, n_ in enumerate(nodes):
        n_.name = f"n{i}"
    tasks = []
    for i in range(40):
        kind = rng.integers(3)
        models = ("V100",) if rng.random() < 0.3 else ()
        if kind == 0:
            tasks.append(
                TaskRequest(
                    f"s{i}",
                    cpu_milli=int(rng.integers(0, 8000)),
                    gpu_milli=int(rng.integers(1, 1000)),
                    gpu_models=models,
                )
            )
        elif kind == 1:
            tasks.append(
                TaskRequest(
                    f"w{i}",
                    cpu_milli=int(rng.integers(0, 8000)),
                    gpus=int(rng.choice([1, 2, 8])),
                    gpu_models=models,
                )
            )
        else:
            tasks.append(TaskRequest(f"c{i}", cpu_milli=int(rng.integers(0, 8000))))
    # Uneven frequencies, so that the probabilities are not round binary fractions.
    weighted = [t for t in tasks for _ in range(int(rng.integers(1, 60)))]
    return ClusterArrays.from_nodes(nodes), TargetWorkload.from_tasks(weighted, coverage=1.0)


def reference_fragment(
    wl: TargetWorkload, arrays: ClusterArrays, rows: np.ndarray, g: np.ndarray, c: np.ndarray
) -> np.ndarray:
    """F_n(M) counted per shape from scratch (the definition, no memo)."""
    cpu, milli, num, _, access, probs = wl.arrays_for(arrays)
    big = g[:, None, :] >= milli[None, :, None]
    fits = (
        access[:, arrays.model_id[rows]].T & (big.sum(axis=2) >= num[None, :]) & (c[:, None] >= cpu[None, :])
    )
    per_shape = np.where(
        fits, np.where(big, 0, g[:, None, :]).sum(axis=2), g.sum(axis=1).astype(float)[:, None]
    )
    result: np.ndarray = per_shape @ probs
    return result


@pytest.mark.parametrize("seed", [1, 2])
def test_memoised_fragments_equal_counting_from_scratch_bit_for_bit_as_placements_change_rows(
    seed: int,
) -> None:
    arrays, wl = random_cluster(seed)
    rng = np.random.default_rng(seed)
    for step in range(30):
        rows = np.sort(rng.choice(arrays.n, int(rng.choice([1, 5, 40, 300])), replace=False))
        g, c = arrays.gpu_free[rows], arrays.cpu_free[rows]
        assert np.array_equal(node_fragment(wl, arrays, rows), reference_fragment(wl, arrays, rows, g, c))
        # A placement on one of them: its memo entry must not survive the change.
        row = int(rows[0])
        slot = int(np.argmax(arrays.gpu_free[row]))
        take = min(int(arrays.gpu_free[row, slot]), 100)
        arrays.apply(row, Placement("j", f"t{step}", arrays.names[row], (slot,), take, 0, 100, 0))


@pytest.mark.parametrize("seed", [3, 4])
def test_taking_whole_gpus_from_the_memo_equals_recomputing_the_node_bit_for_bit(seed: int) -> None:
    arrays, wl = random_cluster(seed)
    rows = np.arange(arrays.n)
    for k in (1, 2):
        idle = arrays.gpu_exists & (arrays.gpu_free == 1000)
        taken = idle & (np.cumsum(idle, axis=1) <= k)
        g = np.where(taken, 0, arrays.gpu_free)
        c = arrays.cpu_free - 700
        direct = reference_fragment(wl, arrays, rows, g, c)
        assert np.array_equal(fragment_after_whole(wl, arrays, rows, taken.sum(axis=1), 700, 0), direct)


@pytest.mark.parametrize("n_rows", [1, 3, 20, 31, 33, 100, 300])
def test_the_shared_fragment_after_rounds_exactly_as_the_per_shape_reference(n_rows: int) -> None:
    # The product with the shape probabilities rounds differently in different memory layouts, and
    # FGD's ties depend on the last bit: the level-wise version must lay out its terms as the
    # per-shape reference does, on both sides of NumPy's layout switch (~32k elements).
    arrays, wl = random_cluster(5)
    rows = np.arange(n_rows)
    cpu, milli, num, _, access, probs = wl.arrays_for(arrays)
    g = arrays.gpu_free[rows]
    big = g[:, None, :] >= milli[None, :, None]
    c = arrays.cpu_free[rows] - 900
    base_fit = access[:, arrays.model_id[rows]].T & (c[:, None] >= cpu[None, :])
    idle_after = (g.sum(axis=1) - 250).astype(float)
    ref = _shared_per_shape_reference(
        g, milli, big.sum(axis=2), np.where(big, 0, g[:, None, :]).sum(axis=2), 250, base_fit, num, idle_after
    )
    assert np.array_equal(shared_fragment_after(wl, arrays, rows, 250, 900, 0), ref @ probs)


def test_the_fgd_score_is_the_floored_sigmoid_of_the_fragment_change() -> None:
    assert sigmoid_score(np.array([0.0, 1e9, -1e9])).tolist() == [50.0, 100.0, 0.0]


def test_binning_averages_each_arrived_bin_and_borrows_neighbours_for_empty_ones() -> None:
    binned = bin_by_arrived(
        np.array([0.2, 0.4, 1.6, 2.4, 4.0]), np.array([1.0, 3.0, 10.0, 20.0, 40.0]), max_bin=5
    )
    assert binned[0] == pytest.approx(2.0)
    assert binned[2] == pytest.approx(15.0)  # 1.6 and 2.4 both round to 2
    assert binned[3] == pytest.approx((15.0 * 2 + 40.0) / 3)  # empty: bins 2 and 4
    assert binned[1] == pytest.approx((1.0 + 3.0 + 10.0 + 20.0) / 4)


def test_mean_sd_is_the_population_standard_deviation() -> None:
    assert mean_sd([1.0, 3.0]) == (2.0, 1.0)


def test_inflation_appends_copies_up_to_130_percent_of_capacity_after_the_shuffled_originals() -> None:
    pods = [TaskRequest(f"p{i}", gpus=1) for i in range(10)]
    grown = inflate(pods, np.random.default_rng(1), capacity_milli=20_000)
    assert sorted(p.task_id for p in grown[:10]) == sorted(p.task_id for p in pods)
    assert all("-copy" in p.task_id for p in grown[10:])
    assert sum(p.total_gpu_milli for p in grown) == 26_000
    shrunk = inflate(pods, np.random.default_rng(1), capacity_milli=5_000)
    assert sum(p.total_gpu_milli for p in shrunk) <= 6_500
    again = inflate(pods, np.random.default_rng(1), capacity_milli=20_000)
    assert [p.task_id for p in again] == [p.task_id for p in grown]


def test_trace_pods_map_to_shared_whole_and_cpu_only_requests(tmp_path: Path) -> None:
    f = tmp_path / "pods.csv"
    f.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
        "a,1000,10,1,460,\nb,2000,20,2,1000,V100M16|V100M32\nc,300,5,0,0,\n"
    )
    a, b, c = load_pods(f)
    assert (a.gpus, a.gpu_milli, a.is_shared) == (0, 460, True)
    assert (b.gpus, b.gpu_models) == (2, ("V100M16", "V100M32"))
    assert c.total_gpu_milli == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name,cpu_milli\nx,1\n", "missing column"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nx,abc,1,0,0\n", "not a number"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nx,1,1,0,2000\n", "must be 0..1000"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nx,1,1\n", "expected 5 fields"),
    ],
)
def test_malformed_pod_files_fail_with_one_line_naming_the_problem(
    tmp_path: Path, text: str, message: str
) -> None:
    f = tmp_path / "pods.csv"
    f.write_text(text)
    with pytest.raises(TraceError) as err:
        load_pods(f)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_missing_node_file_is_reported_by_name(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        load_nodes(tmp_path / "nope.csv")


def test_whole_gpu_profiles_are_credited_with_what_pods_asked_for_not_what_they_hold() -> None:
    from scheduler.bench.frag.experiment import run_policy

    nodes = [
        Node(
            name=f"n{i}",
            cpu_milli=64000,
            memory_mib=256000,
            gpus=[Gpu(index=g, model="T4", memory_mib=16000) for g in range(4)],
        )
        for i in range(25)
    ]
    pods = [TaskRequest(f"p{i:03d}", cpu_milli=1000, memory_mib=1000, gpu_milli=250) for i in range(400)]
    k8s = run_policy(nodes, pods, "k8s_default", seed=3)
    shared = run_policy(nodes, pods, "fgd", seed=3)
    # Every share holds a whole GPU under k8s_default: the cluster is full at 25 % of what FGD serves.
    assert k8s.metric("alloc_ratio_pct_at_arrived100") <= 25.0 + 1e-6
    assert shared.metric("alloc_ratio_pct_at_arrived100") == pytest.approx(100.0, abs=1.0)
    assert k8s.metric("unalloc_gpu_pct_at_arrived100") >= 74.0
