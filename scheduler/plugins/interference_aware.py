"""InterferenceAware: keep co-located jobs within their slowdown tolerance; prefer productive packing.

Adapter over ``scheduler.interference`` (the math lives there). For a shared task, every GPU that can
take it (``resource_fit.fitting_gpus``) is a candidate; its residents plus the newcomer form a set
whose per-job slowdowns are predicted in one batch for all candidates of all nodes
(``interference.predict.predict_sets``):

* **filter**: a GPU is admissible when the pair(s) can run together (feasibility probability >=
  ``min_feasible``, summed memory footprints fit) and *every* job's slowdown -- the conservative
  (upper-quantile) one when ``conservative`` -- is <= its tolerance: ``JobRequest.slowdown_tolerance``
  for the newcomer, ``slowdown_tolerance`` in ``ClusterSnapshot.task_profiles[task]`` for a resident
  (default ``default_tolerance``). A node passes when one of its candidate GPUs is admissible. Whole-GPU
  tasks only get idle GPUs, so they always pass.
* **score**: predicted useful throughput of the best admissible GPU after placement,
  ``sum_i 1 / s_i`` in solo-job units (1.0 alone; > 1 when packing beats taking turns); min-max
  normalised to 0..100.
* **choose_gpus**: that best admissible GPU (lowest index on ties).
* **annotate**: writes ``Placement.predicted_slowdown`` and appends the prediction and its source to
  ``Placement.reason`` so users see why the job went there.

Profiles: the newcomer's ``JobRequest.profile``; residents' from ``ClusterSnapshot.task_profiles``
or, for tasks placed earlier in this cycle, from their job's profile. A task without a profile is
represented by its declared share (``gpu_share = gpu_milli / 1000``). Without a trained model file
(``interference.store.default_model_path()`` or ``model_path``) every pair uses the documented
analytic estimate (``interference.composition``), and the reason says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scheduler.framework import CycleState, Status, register
from scheduler.interference.datasets import Profile
from scheduler.interference.features import normalize_gpu_type
from scheduler.interference.models import InterferenceModel
from scheduler.interference.predict import SetPrediction, SetQuery, predict_sets
from scheduler.interference.store import cached_model
from scheduler.model import GPU_MILLI, Node, Placement, TaskRequest
from scheduler.plugins.resource_fit import fitting_gpus

_KEY = "interference_aware"


@dataclass
class GpuVerdict:
    gpu: int
    ok: bool
    newcomer_slowdown: float
    conservative_slowdown: float
    total_throughput: float
    tenants: int
    source: str
    why: str = ""


def _minmax(values: np.ndarray) -> np.ndarray:
    if values.size == 0:
        return values
    lo, hi = float(values.min()), float(values.max())
    if hi == lo:
        return np.full(values.size, 100.0)
    return 100.0 * (values - lo) / (hi - lo)


@register("interference_aware")
class InterferenceAware:
    name = "interference_aware"

    def __init__(
        self,
        model_path: str | None = None,
        use_model: bool = True,
        conservative: bool = True,
        min_feasible: float = 0.5,
        default_tolerance: float = 1.5,
        mechanism: str = "mps",
    ) -> None:
        self.model_path = Path(model_path) if model_path else None
        self.use_model = use_model
        self.conservative = conservative
        self.min_feasible = min_feasible
        self.default_tolerance = default_tolerance
        self.mechanism = mechanism

    # -- context ----------------------------------------------------------------------------------

    def _cycle(self, state: CycleState) -> dict[str, Any]:
        """Per-cycle data shared by this plugin's instances (filter, score and chooser)."""
        cycle: dict[str, Any] | None = state.data.get(_KEY)
        if cycle is None or cycle["snapshot"] is not state.snapshot:
            model: InterferenceModel | None = None
            note = "model disabled"
            if self.use_model:
                model, note = cached_model(self.model_path)
            cycle = {
                "snapshot": state.snapshot,
                "model": model,
                "note": note,
                "running": {p.task_id: p for p in state.snapshot.running},
                "profiles": {},  # task id -> (profile, tolerance) of jobs seen this cycle
                "verdicts": {},  # (task id, node name, tenants) -> list[GpuVerdict]
            }
            state.data[_KEY] = cycle
        job = state.job
        if job is not None:
            for t in job.tasks:
                prof: Profile = dict(job.profile)
                prof.setdefault("gpu_share", t.gpu_milli / GPU_MILLI if t.is_shared else 1.0)
                cycle["profiles"][t.task_id] = (prof, job.slowdown_tolerance)
        return cycle

    def _tenant(self, state: CycleState, cycle: dict[str, Any], task_id: str) -> tuple[Profile, float]:
        seen = cycle["profiles"].get(task_id)
        if seen is not None:
            return seen
        stored = dict(getattr(state.snapshot, "task_profiles", {}).get(task_id, {}))
        tolerance = float(stored.pop("slowdown_tolerance", self.default_tolerance))
        placement: Placement | None = cycle["running"].get(task_id)
        if placement is not None:
            share = placement.gpu_milli / GPU_MILLI if placement.gpu_milli else 1.0
            stored.setdefault("gpu_share", share)
        return stored, tolerance

    # -- the prediction ---------------------------------------------------------------------------

    def _verdicts(self, state: CycleState, task: TaskRequest, nodes: list[Node]) -> list[list[GpuVerdict]]:
        cycle = self._cycle(state)
        job = state.job
        tolerance = job.slowdown_tolerance if job is not None else self.default_tolerance
        newcomer, _ = cycle["profiles"].get(task.task_id, ({"gpu_share": task.gpu_milli / GPU_MILLI}, 0))
        out: list[list[GpuVerdict] | None] = []
        queries: list[SetQuery] = []
        slots: list[tuple[int, int, list[float]]] = []  # (node position, gpu, tolerances)
        keys: list[tuple[Any, ...]] = []
        for pos, node in enumerate(nodes):
            gpus = fitting_gpus(task, node) if task.total_gpu_milli else []
            key = (task.task_id, node.name, tuple(tuple(node.gpus[g].tenants) for g in gpus))
            keys.append(key)
            hit = cycle["verdicts"].get(key)
            if hit is not None:
                out.append(hit)
                continue
            out.append(None)
            for g in gpus:
                gpu = node.gpus[g]
                tenants = [self._tenant(state, cycle, t) for t in gpu.tenants if t != task.task_id]
                if not tenants or not task.is_shared:
                    continue
                profiles = [newcomer] + [p for p, _ in tenants]
                queries.append(
                    SetQuery(profiles, normalize_gpu_type(gpu.model), self.mechanism, float(gpu.memory_mib))
                )
                slots.append((pos, g, [tolerance] + [t for _, t in tenants]))
        preds = predict_sets(cycle["model"], queries) if queries else []
        by_slot = {(pos, g): (pred, tol) for (pos, g, tol), pred in zip(slots, preds, strict=True)}
        result: list[list[GpuVerdict]] = []
        for pos, node in enumerate(nodes):
            cached = out[pos]
            if cached is not None:
                result.append(cached)
                continue
            verdicts = []
            for g in fitting_gpus(task, node) if task.total_gpu_milli else []:
                entry = by_slot.get((pos, g))
                verdicts.append(
                    self._verdict(g, entry) if entry else GpuVerdict(g, True, 1.0, 1.0, 1.0, 0, "alone")
                )
            cycle["verdicts"][keys[pos]] = verdicts
            result.append(verdicts)
        return result

    def _verdict(self, gpu: int, entry: tuple[SetPrediction, list[float]]) -> GpuVerdict:
        pred, tolerances = entry
        check = pred.conservative if self.conservative else pred.slowdowns
        over = [i for i, (s, t) in enumerate(zip(check, tolerances, strict=True)) if s > t]
        why = ""
        if pred.p_feasible < self.min_feasible:
            why = f"jobs predicted unable to share a GPU (p={pred.p_feasible:.2f})"
        elif over:
            i = over[0]
            who = "this job" if i == 0 else "a running job"
            why = f"predicted slowdown of {who} {check[i]:.2f}x > tolerance {tolerances[i]:.2f}x"
        return GpuVerdict(
            gpu=gpu,
            ok=not why,
            newcomer_slowdown=float(pred.slowdowns[0]),
            conservative_slowdown=float(pred.conservative[0]),
            total_throughput=pred.total_throughput,
            tenants=len(tolerances) - 1,
            source=pred.source,
            why=why,
        )

    @staticmethod
    def _best(verdicts: list[GpuVerdict]) -> GpuVerdict | None:
        ok = [v for v in verdicts if v.ok]
        return max(ok, key=lambda v: (v.total_throughput, -v.gpu)) if ok else None

    def _nodes(self, state: CycleState, rows: np.ndarray) -> list[Node]:
        return [state.snapshot.nodes[int(r)] for r in rows]

    # -- filter -----------------------------------------------------------------------------------

    def filter(self, state: CycleState, task: TaskRequest, node: Node) -> Status:
        if not task.is_shared:
            return Status.success()
        verdicts = self._verdicts(state, task, [node])[0]
        if not verdicts or any(v.ok for v in verdicts):
            return Status.success()
        return Status.unschedulable(f"interference: {verdicts[0].why} on every fitting GPU")

    def filter_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        if not task.is_shared:
            return np.ones(len(rows), dtype=bool)
        per_node = self._verdicts(state, task, self._nodes(state, rows))
        return np.array([not v or any(x.ok for x in v) for v in per_node], dtype=bool)

    # -- score ------------------------------------------------------------------------------------

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        if not task.is_shared:
            return np.ones(len(rows))
        per_node = self._verdicts(state, task, self._nodes(state, rows))
        best = [self._best(v) for v in per_node]
        return np.array([b.total_throughput if b else 0.0 for b in best])

    def score(self, state: CycleState, task: TaskRequest, node: Node) -> float:
        if not task.is_shared:
            return 1.0
        best = self._best(self._verdicts(state, task, [node])[0])
        return best.total_throughput if best else 0.0

    def normalize_rows(self, scores: np.ndarray) -> np.ndarray:
        return _minmax(np.asarray(scores, dtype=float))

    def normalize(self, scores: list[float]) -> list[float]:
        return [float(s) for s in _minmax(np.asarray(scores, dtype=float))]

    # -- GPU choice -------------------------------------------------------------------------------

    def choose_gpus(self, state: CycleState, task: TaskRequest, node: Node) -> tuple[int, ...] | None:
        candidates = fitting_gpus(task, node)
        if not task.is_shared:
            needed = max(task.gpus, 1)
            return tuple(candidates[:needed]) if len(candidates) >= needed else None
        best = self._best(self._verdicts(state, task, [node])[0])
        return (best.gpu,) if best else None

    # -- explanation ------------------------------------------------------------------------------

    def annotate(self, state: CycleState, task: TaskRequest, placement: Placement) -> None:
        """Record the predicted slowdown of the placed task and where the prediction came from."""
        if not placement.gpu_indices:
            return
        if not task.is_shared:
            placement.predicted_slowdown = 1.0
            return
        cycle = self._cycle(state)
        node = state.snapshot.node(placement.node)
        verdicts = self._verdicts(state, task, [node])[0]
        v = next((x for x in verdicts if x.gpu == placement.gpu_indices[0]), None)
        if v is None:
            return
        placement.predicted_slowdown = round(v.newcomer_slowdown, 4)
        if v.tenants == 0:
            text = "interference: alone on GPU, predicted slowdown 1.00x"
        else:
            model: InterferenceModel | None = cycle["model"]
            if v.source == "model" and model is not None:
                origin = model.describe()
            elif model is not None and v.source == "analytic":
                origin = f"analytic estimate: the {model.describe()} has no features for these jobs"
            elif model is not None:
                origin = f"{model.describe()}; analytic estimate where the model lacks a profile"
            else:
                origin = f"analytic estimate from utilisation/declared shares ({cycle['note'] or 'no model'})"
            own, _ = cycle["profiles"].get(task.task_id, ({}, 0.0))
            # Tell the user whether their job was judged on a measured solo profile (same image and
            # command profiled before) or only on the GPU share it declared.
            measured = "gpu_util" in own or "mem_util" in own
            basis = "this job's measured solo profile" if measured else "this job's declared GPU share"
            text = (
                f"interference: predicted slowdown {v.newcomer_slowdown:.2f}x "
                f"(conservative {v.conservative_slowdown:.2f}x) next to {v.tenants} job(s), "
                f"GPU throughput {v.total_throughput:.2f} [{origin}; {basis}]"
            )
            if not v.ok:
                text += f"; warning: {v.why}"
        placement.reason = f"{placement.reason}; {text}" if placement.reason else text
