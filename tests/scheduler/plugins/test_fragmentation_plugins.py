"""The look-ahead fragmentation plugins of the ``default`` profile (``scheduler.plugins`` over ``scheduler.frag.lookahead``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from scheduler.__main__ import main
from scheduler.engine.arrays import ClusterArrays
from scheduler.engine.placement import PlacementEngine
from scheduler.frag.fragmentation import TargetWorkload
from scheduler.frag.lookahead import cpu_pressure, gang_reserved_sizes, gap_option_values
from scheduler.framework import CycleState
from scheduler.model import ClusterSnapshot, Gpu, Node, TaskRequest
from scheduler.plugins.balance_yield import BalanceYield
from scheduler.plugins.fgd_fine import FgdFine
from scheduler.plugins.fgd_fine_gpus import FgdFineGpus
from scheduler.plugins.strand_guard import StrandGuard
from scheduler.profiles import PROFILES
from tests.scheduler.frag.frag_helpers import write_fixture


def gpu_node(
    name: str, used: list[int], cpu: int = 32000, used_cpu: int = 0, mem: int = 128000, used_mem: int = 0
) -> Node:
    return Node(
        name=name,
        cpu_milli=cpu,
        memory_mib=mem,
        used_cpu_milli=used_cpu,
        used_memory_mib=used_mem,
        gpus=[Gpu(index=i, model="T4", memory_mib=16000, used_milli=u) for i, u in enumerate(used)],
    )


def state_for(nodes: list[Node], tasks: list[TaskRequest]) -> CycleState:
    return CycleState(
        snapshot=ClusterSnapshot(nodes=nodes),
        data={"target_workload": TargetWorkload.from_tasks(tasks)},
        arrays=ClusterArrays.from_nodes(nodes),
        seeded_rng=np.random.default_rng(0),
    )


def test_the_default_profile_scores_fragmentation_with_the_look_ahead_plugins() -> None:
    profile = PROFILES["default"]()
    fragmentation = {
        k: v for k, v in profile.scores.items() if k in {"fgd_fine", "balance_yield", "strand_guard"}
    }
    assert fragmentation == {"fgd_fine": 1.0, "balance_yield": 0.5, "strand_guard": 1.0}
    assert profile.args["topology_aware"]["fallback"] == "fgd_fine_gpus"


def test_the_strand_guard_penalises_only_gpus_newly_left_without_cpu() -> None:
    # a: 4 idle GPUs and all CPU free; b: the same GPUs but CPU nearly gone.
    nodes = [gpu_node("a", [0, 0, 0, 0]), gpu_node("b", [0, 0, 0, 0], used_cpu=24000)]
    # Typical GPU task: 4 cores per GPU -> 4 GPUs need 16 cores.
    state = state_for(nodes, [TaskRequest("t", cpu_milli=4000, gpus=1)])
    guard = StrandGuard(slope=25.0, m_zero=None)
    rows = np.array([0, 1])
    # b already strands 4 - 8/4 = 2 GPUs; nothing is stranded on a.
    assert np.allclose(guard.stranded(state, rows), [0.0, 2.0])
    one_gpu = TaskRequest("x", cpu_milli=4000, memory_mib=8000, gpus=1)
    # A typical task strands nothing more anywhere: the score is flat, FGD's ties survive.
    assert np.allclose(guard.score_rows(state, one_gpu, rows), [100.0, 100.0])
    # A CPU-only task that eats 24 cores of a leaves 2 of its 4 idle GPUs without CPU.
    cpu_only = TaskRequest("c", cpu_milli=24000)
    assert np.allclose(guard.score_rows(state, cpu_only, np.array([0])), [100.0 - 25.0 * 2.0])


def test_the_strand_guard_ramps_in_with_the_multi_gpu_share() -> None:
    nodes = [gpu_node("a", [0, 0, 0, 0])]
    single = state_for(nodes, [TaskRequest("t", cpu_milli=4000, gpus=1)])
    tasks = [TaskRequest("t", cpu_milli=4000, gpus=1), TaskRequest("m", cpu_milli=4000, gpus=4)]
    multi = state_for(nodes, tasks)
    guard = StrandGuard()
    assert guard._slope(single) == 0.0
    assert guard._slope(multi) == 25.0  # 80 % of the GPU request is multi-GPU: full strength


def test_balance_yield_leaves_the_empty_nodes_gang_tasks_need_to_fgd() -> None:
    # a: an empty 8-GPU node; b: an 8-GPU node with 2 GPUs busy; 16 empty 2-GPU nodes.
    nodes = [
        gpu_node("a", [0] * 8, cpu=96000),
        gpu_node("b", [1000, 1000] + [0] * 6, cpu=96000, used_cpu=8000),
    ]
    nodes += [gpu_node(f"s{i}", [0, 0]) for i in range(16)]
    one = TaskRequest("one", cpu_milli=4000, memory_mib=8000, gpus=1)
    rows = np.array([0, 1])
    plugin = BalanceYield()
    # Only 1-GPU tasks: balance spreads, the empty node a is the more balanced choice.
    spread = plugin.normalize_rows(plugin.score_rows(state_for(nodes, [one] * 32), one, rows))
    assert spread[0] > spread[1]
    # 8-GPU tasks are 20 % of the GPU request: 0.2 * 46 idle GPUs / 8 = 1.15 nodes of demand, and
    # a is the only empty 8-GPU node, so it is reserved: balance no longer pulls the task onto it.
    gang = TaskRequest("gang", cpu_milli=32000, memory_mib=64000, gpus=8)
    state = state_for(nodes, [one] * 32 + [gang])
    assert gang_reserved_sizes(state) == (8,)
    kept = plugin.normalize_rows(plugin.score_rows(state, one, rows))
    assert kept[0] <= kept[1]
    # With the 2-GPU nodes gone from the pool, demand 0.2 * 14 / 8 < 1 empty node: no reservation.
    assert gang_reserved_sizes(state_for(nodes[:2], [one] * 32 + [gang])) == ()


def test_balance_yield_without_a_reservation_gives_the_plain_balance_score() -> None:
    nodes = [
        gpu_node("a", [0] * 8, cpu=96000),
        gpu_node("b", [1000, 1000] + [0] * 6, cpu=96000, used_cpu=8000),
    ]
    one = TaskRequest("one", cpu_milli=4000, memory_mib=8000, gpus=1)
    state = state_for(nodes, [one] * 32)
    rows = np.array([0, 1])
    raw = BalanceYield().score_rows(state, one, rows)
    assert (raw >= 0).all()
    assert np.allclose(BalanceYield().normalize_rows(raw), raw)
    assert np.isclose(BalanceYield().score(state, one, nodes[0]), raw[0])


def test_the_default_profile_no_longer_opens_the_last_empty_8_gpu_node_for_a_1_gpu_task() -> None:
    one = TaskRequest("one", cpu_milli=4000, memory_mib=8000, gpus=1)
    gang = TaskRequest("gang", cpu_milli=32000, memory_mib=64000, gpus=8)

    def place(reserve: bool) -> str:
        nodes = [
            gpu_node("a", [0] * 8, cpu=96000),
            gpu_node("b", [1000, 1000] + [0] * 6, cpu=96000, used_cpu=8000),
        ]
        nodes += [gpu_node(f"s{i}", [0, 0]) for i in range(16)]
        state = state_for(nodes, [one] * 32 + [gang])
        profile = PROFILES["default"]()
        profile = dataclasses.replace(
            profile, args={**profile.args, "balance_yield": {"reserve_for_gangs": reserve}}
        )
        outcome = PlacementEngine(profile.build(), state, nodes, explain=False).place(one)
        assert outcome.placement is not None
        return nodes[outcome.row].name

    # Without the reservation the balance term pulls the 1-GPU task onto the empty 8-GPU node a, the
    # only node an 8-GPU task of the workload could still use; with it, the task goes to b.
    assert place(reserve=False) == "a"
    assert place(reserve=True) == "b"


def test_fgd_fine_keeps_integer_scores_for_whole_gpus_and_refines_shared_ones() -> None:
    nodes = [gpu_node("a", [0, 0]), gpu_node("b", [500, 0])]
    tasks = [TaskRequest("s", cpu_milli=1000, gpu_milli=500), TaskRequest("w", cpu_milli=1000, gpus=1)]
    state = state_for(nodes, tasks)
    plugin = FgdFine()
    whole = plugin.score_rows(state, tasks[1], np.array([0, 1]))
    assert np.all(whole == np.floor(whole))
    # Without the gap look-ahead: completing the half-used GPU on b beats breaking an idle GPU on a.
    shared = FgdFine(lookahead=0.0).score_rows(state, tasks[0], np.array([0, 1]))
    assert shared[1] > shared[0]
    # With it (weight 4), in this extreme workload where half the tasks are 500-milli shares, the
    # 500 gap left on an idle GPU earns 4 * (opt(1000) - opt(500)) = 4 * 0.5 * (f(500) - f(0)) = +500
    # back, offsetting FGD's -250, so an idle GPU of either node ties with b's exact fit (+250; the
    # share uses the option its own size had on the gap): a known limit of weighting the look-ahead
    # above 1 (the shared sizes of the trace's workloads have probabilities of 0.30 at most).
    ahead = plugin.score_rows(state, tasks[0], np.array([0, 1]))
    assert np.isclose(ahead[0], ahead[1])


def test_the_candidate_keeps_every_invariant_on_a_small_run() -> None:
    nodes = [gpu_node(f"n{i}", [0] * (8 if i < 3 else 2), cpu=64000 if i < 3 else 16000) for i in range(8)]
    rng = np.random.default_rng(3)
    shapes = [
        TaskRequest("a", cpu_milli=4000, memory_mib=8000, gpu_milli=470),
        TaskRequest("b", cpu_milli=6000, memory_mib=8000, gpu_milli=810),
        TaskRequest("c", cpu_milli=8000, memory_mib=16000, gpus=1),
        TaskRequest("d", cpu_milli=16000, memory_mib=32000, gpus=4),
        TaskRequest("e", cpu_milli=2000, memory_mib=4000),
    ]
    tasks = [shapes[int(i)] for i in rng.integers(len(shapes), size=80)]
    state = state_for(nodes, tasks)
    engine = PlacementEngine(PROFILES["default"]().build(), state, nodes, explain=False)
    placed = 0
    for i, task in enumerate(tasks):
        request = TaskRequest(f"t{i}", task.cpu_milli, task.memory_mib, task.gpus, task.gpu_milli)
        outcome = engine.place(request)
        if outcome.placement is None:
            continue
        engine.commit(outcome.row, outcome.placement)
        placed += 1
        p = outcome.placement
        assert len(p.gpu_indices) == (task.gpus or (1 if task.gpu_milli else 0))
    arrays = state.arrays
    assert placed > 0
    assert (arrays.gpu_free >= 0).all() and (arrays.gpu_free <= 1000).all()
    assert (arrays.cpu_free >= 0).all() and (arrays.mem_free >= 0).all()


def test_the_frag_command_runs_the_default_profile_by_name(tmp_path: Path) -> None:
    nodes, pods = write_fixture(tmp_path)
    out = tmp_path / "out.json"
    code = main(
        [
            "frag",
            "--nodes",
            str(nodes),
            "--pods",
            str(pods),
            "--policy",
            "default",
            "--seeds",
            "1",
            "--json",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    block = report["policies"]["default"]
    assert block["metrics"]["unalloc_gpu_pct_at_arrived100"]["mean"] >= 0.0


def test_the_gap_look_ahead_keeps_a_gap_the_common_size_fills() -> None:
    # Workload: half 500-milli shares, half whole GPUs. Per GPU, f(g) = g * P(shape cannot use g):
    # f = g below 500, g / 2 from 500 to 999, 0 at 1000. opt(g) = sum_u q_u min(0, f(g - u) - f(g)):
    # opt(700) = 0.5 * (f(200) - f(700)) = 0.5 * (200 - 350) = -75; opt(400) = opt(1000) = 0.
    tasks = [TaskRequest("s", cpu_milli=1000, gpu_milli=500), TaskRequest("w", cpu_milli=1000, gpus=1)]
    # a: one GPU with 700 milli free; b: one idle GPU.
    state = state_for([gpu_node("a", [300]), gpu_node("b", [0])], tasks)
    opt = gap_option_values(state.data["target_workload"], state.arrays)
    assert np.isclose(opt[700], -75.0) and opt[400] == 0.0 and opt[1000] == 0.0
    share = TaskRequest("x", cpu_milli=1000, gpu_milli=300)
    rows = np.array([0, 1])
    # a: F = 0.5 * 0 + 0.5 * 700 = 350 before, 400 after (neither shape fits 400): Delta = -50.
    # b: F = 0 before, 0.5 * 0 + 0.5 * 700 = 350 after: Delta = -350. FGD fills a's gap and leaves
    # 400 milli no typical task fits.
    plain = FgdFine(lookahead=0.0).score_rows(state, share, rows)
    assert np.allclose(plain, 100.0 / (1.0 + np.exp([0.05, 0.35])))
    # The look-ahead adds 4 * (opt(700) - opt(400)) = -300 on a and 4 * (opt(1000) - opt(700)) = +300
    # on b: b (-50) beats a (-350), and a's 700 gap stays for a 500-milli share.
    ahead = FgdFine().score_rows(state, share, rows)
    assert np.allclose(ahead, 100.0 / (1.0 + np.exp([0.35, 0.05])))
    # Inside a node the chooser weighs the look-ahead 1: on one node with both GPUs (0 and 700 free)
    # it is -350 + 75 on the idle GPU vs -50 - 75 on the 700 gap, so it fills the gap.
    both = state_for([gpu_node("c", [0, 300])], tasks)
    assert FgdFineGpus().choose_gpus_row(both, share, 0) == (1,)
    assert FgdFineGpus(lookahead=4.0).choose_gpus_row(both, share, 0) == (0,)


def test_the_strand_guard_ramps_in_with_the_cpu_pressure_of_what_runs() -> None:
    # Only 1-GPU tasks (m = 0): the multi-GPU ramp alone leaves the guard off.
    tasks = [TaskRequest("t", cpu_milli=4000, gpus=1)]
    guard = StrandGuard()
    # 4 GPUs and 32 cores: 8 cores per GPU of capacity. Half the GPUs run, with 8 or 16 cores.
    light = state_for([gpu_node("a", [1000, 1000, 0, 0], used_cpu=8000)], tasks)
    heavy = state_for([gpu_node("a", [1000, 1000, 0, 0], used_cpu=16000)], tasks)
    assert cpu_pressure(light) == 0.5 and guard._slope(light) == 0.0
    # CPU used per GPU used equals the cluster's ratio: CPU runs out with the GPUs, full strength.
    assert cpu_pressure(heavy) == 1.0 and guard._slope(heavy) == 25.0
    midway = state_for([gpu_node("a", [1000, 1000, 0, 0], used_cpu=14400)], tasks)
    assert np.isclose(cpu_pressure(midway), 0.9) and np.isclose(guard._slope(midway), 25.0 * 0.25)


def test_the_gap_look_ahead_does_not_count_an_exact_fit_by_a_common_size_as_a_loss() -> None:
    # Workload: 600- and 400-milli shares, half each. f(g) = g below 400, g / 2 up to 599, 0 from 600.
    tasks = [TaskRequest("p", cpu_milli=1000, gpu_milli=600), TaskRequest("d", cpu_milli=1000, gpu_milli=400)]
    # a: an idle GPU; b: a GPU with 400 milli free.
    state = state_for([gpu_node("a", [0]), gpu_node("b", [600])], tasks)
    # opt(400) = 0.5 * (f(0) - f(400)) = -100: the gap's option for the next 400-milli share.
    assert np.isclose(gap_option_values(state.data["target_workload"], state.arrays)[400], -100.0)
    # a: Delta = 0 (a 600 gap fits both sizes), look-ahead 0. b: Delta = 200, and the share placed now
    # *is* the 400 the option was for: opt(400) - opt(0) - 0.5 * min(0, f(0) - f(400)) = 0. Counting
    # the option as lost would give 200 - 4 * 100 < 0 and break a's idle GPU instead.
    scores = FgdFine().score_rows(state, tasks[1], np.array([0, 1]))
    assert np.allclose(scores, 100.0 / (1.0 + np.exp([0.0, -0.2])))
