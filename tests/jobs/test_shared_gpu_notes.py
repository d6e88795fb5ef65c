"""Tasks of one job on one shared GPU carry one predicted slowdown (jobs.shared_gpu_notes)."""

from __future__ import annotations

from jobs.shared_gpu_notes import agree_on_shared_gpus
from scheduler.model import Placement


def _p(task: int, node: str, gpus: tuple[int, ...], milli: int, slowdown: float, reason: str) -> Placement:
    return Placement(
        job_id="7", task_id=f"7-{task}", node=node, gpu_indices=gpus, gpu_milli=milli,
        predicted_slowdown=slowdown, reason=reason,
    )  # fmt: skip


def test_replicas_on_one_shared_gpu_take_the_prediction_made_with_all_of_them() -> None:
    first = _p(
        0,
        "dgx-1",
        (3,),
        400,
        1.0,
        "node dgx-1 scored 90/100; interference: alone on GPU, predicted slowdown 1.00x",
    )
    second = _p(
        1,
        "dgx-1",
        (3,),
        400,
        1.1,
        "node dgx-1 scored 88/100; interference: predicted slowdown 1.10x next to 1 job(s)",
    )

    agree_on_shared_gpus([first, second])

    assert first.predicted_slowdown == second.predicted_slowdown == 1.1
    assert first.reason == "node dgx-1 scored 90/100; interference: predicted slowdown 1.10x next to 1 job(s)"
    assert second.reason.endswith("next to 1 job(s)")


def test_tasks_on_other_gpus_or_whole_gpus_keep_their_own_prediction() -> None:
    apart = _p(0, "dgx-1", (2,), 400, 1.0, "interference: alone on GPU")
    other_node = _p(1, "dgx-2", (3,), 400, 1.05, "interference: next to 1 job(s)")
    whole = _p(2, "dgx-1", (3,), 1000, 1.0, "topology: GPU 3")
    shared = _p(3, "dgx-1", (3,), 400, 1.2, "interference: next to 2 job(s)")

    agree_on_shared_gpus([apart, other_node, whole, shared])

    assert [p.predicted_slowdown for p in (apart, other_node, whole, shared)] == [1.0, 1.05, 1.0, 1.2]
    assert whole.reason == "topology: GPU 3"
