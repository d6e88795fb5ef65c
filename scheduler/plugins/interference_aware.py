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
represented by its declared share (``gpu_share = gpu_milli / 1000``); a resident known by id only
(no profile, no placement: e.g. the fragmentation benchmark's pods) by its part of the GPU's use,
``used_milli / tenants / 1000``.

Cheap paths (default-profile wiring): only GPUs that fit the task *and* have residents need a
prediction, so a node with an idle fitting GPU passes the filter without one, and a shared task whose
candidates are all idle, or a whole-GPU task, costs no prediction. When nobody in the cycle has a
measured profile (every job is its declared share) and all residents share one tolerance, every
prediction is the analytic rule on shares that sum to <= 1 on a GPU, which depends only on the number
``t`` of residents: ``s = 1 + t x (1.1 - 1)`` for everyone (``composition``); filter, score, GPU mask
and annotation then come from a per-``t`` table over NumPy arrays of resident counts, bit-identical
to the per-GPU path. In that case the score is *neutral* (``is_neutral``): ranking GPUs by resident
count carries no interference information and is the fragmentation scores' business. The trained
model is loaded on the first prediction that needs it. Without a trained model file
(``interference.store.default_model_path()`` or ``model_path``) every pair uses the documented
analytic estimate (``interference.composition``), and the reason says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scheduler.engine.fit import fitting_gpu_mask, fitting_gpus
from scheduler.framework import CycleState, Status, min_max_rows
from scheduler.interference.composition import analytic_pair_throughput, compose_slowdowns
from scheduler.interference.datasets import Profile
from scheduler.interference.features import normalize_gpu_type
from scheduler.interference.models import Y_FLOOR, InterferenceModel
from scheduler.interference.predict import SetPrediction, SetQuery, predict_sets
from scheduler.interference.store import cached_model
from scheduler.model import GPU_MILLI, Node, Placement, TaskRequest
from scheduler.plugin_registry import register

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
        model: Any = None,
    ) -> None:
        self.model_path = Path(model_path) if model_path else None
        # A model object instead of the file (the simulator's online model, which learns during a
        # run: scheduler.sim.online_interference); None: the file at ``model_path``.
        self.model = model
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
            stored = getattr(state.snapshot, "task_profiles", {})
            cycle = {
                "snapshot": state.snapshot,
                # Loaded by ``_model`` on the first prediction that needs it (loading costs ~1 s).
                "model": None,
                "note": "model disabled",
                "model_loaded": not self.use_model,
                "running": None,  # task id -> running placement, built by ``_running`` on first use
                "profiles": {},  # task id -> (profile, tolerance) of jobs seen this cycle
                "verdicts": {},  # (task id, node name, tenants) -> list[GpuVerdict]
                # For the cheap paths: does anyone have more than a declared share, and which
                # tolerances can residents have; resident counts per GPU slot, by row version.
                "informative": any(set(p) - {"slowdown_tolerance"} for p in stored.values()),
                "tolerances": None,  # built by ``_resident_tolerances`` on first use
                "job_tolerances": {},  # job id -> tolerance of the jobs seen this cycle
                # tolerance -> how many of those jobs have it: ``_shares_table`` reads the distinct
                # tolerances from here (a walk of ``job_tolerances`` per call grew with the queue).
                "tolerance_counts": {},
                "counts": None,
                "stamp": None,
                "tables": {},
            }
            state.data[_KEY] = cycle
        job = state.job
        if job is not None and job.job_id not in cycle["job_tolerances"]:
            tolerance = float(job.slowdown_tolerance)
            cycle["job_tolerances"][job.job_id] = tolerance
            counts: dict[float, int] = cycle["tolerance_counts"]
            counts[tolerance] = counts.get(tolerance, 0) + 1
            cycle["informative"] = cycle["informative"] or bool(job.profile)
        if job is not None:
            for t in job.tasks:
                prof: Profile = dict(job.profile)
                prof.setdefault("gpu_share", t.gpu_milli / GPU_MILLI if t.is_shared else 1.0)
                cycle["profiles"][t.task_id] = (prof, job.slowdown_tolerance)
        return cycle

    @staticmethod
    def _running(state: CycleState, cycle: dict[str, Any]) -> dict[str, Placement]:
        """Task id -> running placement of the cycle's snapshot (built once per cycle, when needed)."""
        running: dict[str, Placement] | None = cycle["running"]
        if running is None:
            running = cycle["running"] = {p.task_id: p for p in state.snapshot.running}
        return running

    def _resident_tolerances(self, state: CycleState, cycle: dict[str, Any]) -> set[float]:
        """The default tolerance and every stored one (built once per cycle, when needed)."""
        tolerances: set[float] | None = cycle["tolerances"]
        if tolerances is None:
            stored = getattr(state.snapshot, "task_profiles", {})
            tolerances = cycle["tolerances"] = {self.default_tolerance} | {
                float(p["slowdown_tolerance"]) for p in stored.values() if "slowdown_tolerance" in p
            }
        return tolerances

    def _model(self, cycle: dict[str, Any]) -> InterferenceModel | None:
        """The trained model (or None), loaded once per cycle on first use."""
        if not cycle["model_loaded"]:
            if self.model is not None:
                cycle["model"], cycle["note"] = self.model, ""
            else:
                cycle["model"], cycle["note"] = cached_model(self.model_path)
            cycle["model_loaded"] = True
        model: InterferenceModel | None = cycle["model"]
        return model

    def _tenant(
        self, state: CycleState, cycle: dict[str, Any], task_id: str, gpu: Any = None
    ) -> tuple[Profile, float]:
        seen = cycle["profiles"].get(task_id)
        if seen is not None:
            return seen
        stored = dict(getattr(state.snapshot, "task_profiles", {}).get(task_id, {}))
        tolerance = float(stored.pop("slowdown_tolerance", self.default_tolerance))
        placement: Placement | None = self._running(state, cycle).get(task_id)
        if placement is not None:
            share = placement.gpu_milli / GPU_MILLI if placement.gpu_milli else 1.0
            stored.setdefault("gpu_share", share)
        elif gpu is not None and gpu.tenants:
            # Known by id only: it holds, on average, its part of what the GPU has in use (added
            # with the default-profile wiring; before, it counted as saturating the whole GPU).
            stored.setdefault("gpu_share", gpu.used_milli / GPU_MILLI / len(gpu.tenants))
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
                tenants = [self._tenant(state, cycle, t, gpu) for t in gpu.tenants if t != task.task_id]
                if not tenants or not task.is_shared:
                    continue
                profiles = [newcomer] + [p for p, _ in tenants]
                queries.append(
                    SetQuery(profiles, normalize_gpu_type(gpu.model), self.mechanism, float(gpu.memory_mib))
                )
                slots.append((pos, g, [tolerance] + [t for _, t in tenants]))
        preds = predict_sets(self._model(cycle), queries) if queries else []
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
        # The epsilon keeps float noise (1.5000000000000004) from refusing a slowdown exactly at tolerance.
        over = [i for i, (s, t) in enumerate(zip(check, tolerances, strict=True)) if s > t + 1e-9]
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
        cycle = self._cycle(state)
        if self._admits_all(state, cycle, task, rows):
            return np.ones(len(rows), dtype=bool)
        cand, counts = self._candidates(state, cycle, task, rows)
        table = self._shares_table(state, cycle, task, int(counts.max(initial=0)))
        if table is not None:
            return ~cand.any(axis=1) | (cand & table[0][counts]).any(axis=1)
        # Only rows without an idle fitting GPU need a prediction (an idle one is always admissible).
        out = np.ones(len(rows), dtype=bool)
        need = np.flatnonzero(~(cand & (counts == 0)).any(axis=1) & cand.any(axis=1))
        if need.size:
            out[need] = self._admissible_rows(state, cycle, task, rows[need], cand[need])
        return out

    def _admissible_rows(
        self, state: CycleState, cycle: dict[str, Any], task: TaskRequest, rows: np.ndarray, cand: np.ndarray
    ) -> np.ndarray:
        """Whether each of ``rows`` (fitting GPU slots ``cand``, none of them idle) has a GPU the
        task may join. A hook: the simulator answers it from a memo per GPU class."""
        per_node = self._verdicts(state, task, self._nodes(state, rows))
        return np.array([not v or any(x.ok for x in v) for v in per_node], dtype=bool)

    # -- cheap paths (added with the default-profile wiring; see the module docstring) ------------

    def _counts(self, state: CycleState, cycle: dict[str, Any], rows: np.ndarray) -> np.ndarray:
        """Residents per GPU slot (all rows; fresh on ``rows``): recounted from the ``Node`` objects
        only for rows whose ``ClusterArrays.version`` moved since (the engine bumps it on commit)."""
        arrays = state.arrays
        if cycle["counts"] is None or cycle["counts"].shape != arrays.gpu_free.shape:
            cycle["counts"] = np.zeros(arrays.gpu_free.shape, dtype=np.int64)
            cycle["stamp"] = np.full(arrays.n, -1, dtype=np.int64)
            cycle["max_count"] = 0  # an upper bound of every count seen (never lowered)
        counts, stamp = cycle["counts"], cycle["stamp"]
        stale = rows[stamp[rows] != arrays.version[rows]]
        nodes = state.snapshot.nodes
        for r in stale.tolist():
            counts[r] = 0
            for gpu in nodes[r].gpus:
                counts[r, gpu.index] = len(gpu.tenants)
                cycle["max_count"] = max(cycle["max_count"], len(gpu.tenants))
            stamp[r] = arrays.version[r]
        counts_: np.ndarray = counts
        return counts_

    def _candidates(
        self, state: CycleState, cycle: dict[str, Any], task: TaskRequest, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(fitting GPU slots, resident count of each fitting slot (0 elsewhere)) for ``rows``."""
        counts = self._counts(state, cycle, rows)
        cand = fitting_gpu_mask(state.arrays, task, rows)
        return cand, np.where(cand, counts[rows], 0)

    def _admits_all(
        self, state: CycleState, cycle: dict[str, Any], task: TaskRequest, rows: np.ndarray
    ) -> bool:
        """Declared shares only and no GPU has more residents than the table admits: every fitting
        GPU is admissible, nothing to compute (the common case on the fragmentation benchmark)."""
        if self._shares_table(state, cycle, task, 0) is None:
            return False
        self._counts(state, cycle, rows)
        table = self._shares_table(state, cycle, task, cycle["max_count"])
        return table is not None and bool(table[0][: cycle["max_count"] + 1].all())

    def _shares_table(
        self, state: CycleState, cycle: dict[str, Any], task: TaskRequest, t_max: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Per resident count t = 0..t_max: (admissible, newcomer slowdown, GPU throughput), when
        every prediction is the analytic rule on declared shares (module docstring); else None."""
        if cycle["informative"] or not task.is_shared:
            return None
        job = state.job
        # Tolerances residents may have: stored ones, the default, and those of the jobs placed
        # earlier this cycle (the current job's own only if its other tasks can be residents).
        tolerances = set(self._resident_tolerances(state, cycle))
        seen: dict[float, int] = cycle["tolerance_counts"]
        # The current job's own entry counts only if its other tasks can be residents: leave it out
        # of its tolerance's count (the others with that tolerance still count).
        own_entry = None
        if job is not None and len(job.tasks) <= 1:
            own_entry = cycle["job_tolerances"].get(job.job_id)
        for tol, count in seen.items():
            if count - (tol == own_entry) > 0:
                tolerances.add(tol)
        if len(tolerances) != 1:
            return None
        if task.task_id in cycle["profiles"] and set(cycle["profiles"][task.task_id][0]) - {"gpu_share"}:
            return None
        own = job.slowdown_tolerance if job is not None else self.default_tolerance
        (resident,) = tolerances
        share = task.gpu_milli / GPU_MILLI
        key = (share, own, resident)
        table = cycle["tables"].get(key)
        if table is None or table[0].size <= t_max:
            size = max(t_max + 1, 8)
            ok = np.ones(size, dtype=bool)
            slow = np.ones(size)
            thr = np.ones(size)
            for t in range(1, size):
                # Residents split what is left (> 0): every pair's load stays <= 1, as on a real GPU.
                other: Profile = {"gpu_share": (1.0 - share) / t}
                y = analytic_pair_throughput({"gpu_share": share}, other)
                s = compose_slowdowns(np.full((t + 1, t + 1), 1.0 / max(Y_FLOOR, y)))
                slow[t] = float(s[0])
                thr[t] = float((1.0 / s).sum())
                ok[t] = self.min_feasible <= 1.0 and s[0] <= own and bool((s[1:] <= resident).all())
            table = (ok, slow, thr)
            cycle["tables"][key] = table
        return table

    def is_neutral(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> bool:
        """No opinion: whole GPUs, declared shares only, or no fitting GPU with residents."""
        if not task.is_shared:
            return True
        cycle = self._cycle(state)
        if self._shares_table(state, cycle, task, 0) is not None:
            return True
        cand, counts = self._candidates(state, cycle, task, rows)
        return not bool((counts > 0).any())

    def admitted_gpus_row(self, state: CycleState, task: TaskRequest, row: int) -> np.ndarray | None:
        """GPU slots of ``row`` where the task may go (None: whole GPUs, nothing to restrict)."""
        if not task.is_shared:
            return None
        cycle = self._cycle(state)
        if self._admits_all(state, cycle, task, np.array([row])):
            return None
        cand, counts = self._candidates(state, cycle, task, np.array([row]))
        table = self._shares_table(state, cycle, task, int(counts.max(initial=0)))
        if table is not None:
            return (cand & table[0][counts])[0]
        allowed = np.zeros(cand.shape[1], dtype=bool)
        for v in self._verdicts(state, task, [state.snapshot.nodes[row]])[0]:
            allowed[v.gpu] = v.ok
        return allowed

    # -- score ------------------------------------------------------------------------------------

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        if not task.is_shared:
            return np.ones(len(rows))
        cycle = self._cycle(state)
        cand, counts = self._candidates(state, cycle, task, rows)
        table = self._shares_table(state, cycle, task, int(counts.max(initial=0)))
        if table is not None:
            thr = np.where(cand & table[0][counts], table[2][counts], -np.inf).max(axis=1, initial=-np.inf)
            return np.where(np.isfinite(thr), thr, 0.0)
        # Rows whose fitting GPUs are all idle: alone, throughput 1.0, no prediction.
        out = np.where(cand.any(axis=1), 1.0, 0.0)
        need = np.flatnonzero((counts > 0).any(axis=1))
        if need.size:
            per_node = self._verdicts(state, task, self._nodes(state, rows[need]))
            best = [self._best(v) for v in per_node]
            out[need] = [b.total_throughput if b else 0.0 for b in best]
        return out

    def score(self, state: CycleState, task: TaskRequest, node: Node) -> float:
        if not task.is_shared:
            return 1.0
        best = self._best(self._verdicts(state, task, [node])[0])
        return best.total_throughput if best else 0.0

    def normalize_rows(self, scores: np.ndarray) -> np.ndarray:
        return min_max_rows(np.asarray(scores, dtype=float))

    def normalize(self, scores: list[float]) -> list[float]:
        return [float(s) for s in min_max_rows(np.asarray(scores, dtype=float))]

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
        rows = cycle.get("rows")
        if rows is None:
            rows = cycle["rows"] = {n.name: i for i, n in enumerate(state.snapshot.nodes)}
        node = state.snapshot.nodes[rows[placement.node]]
        residents = [x for x in node.gpus[placement.gpu_indices[0]].tenants if x != task.task_id]
        if not residents:  # alone on the GPU: nothing to predict (the other GPUs do not matter)
            placement.predicted_slowdown = 1.0
            text = "interference: alone on GPU, predicted slowdown 1.00x"
            placement.reason = f"{placement.reason}; {text}" if placement.reason else text
            return
        table = self._shares_table(state, cycle, task, len(residents))
        if table is not None:  # declared shares only: the per-count table (cheap path)
            t = len(residents)
            placement.predicted_slowdown = round(float(table[1][t]), 4)
            if t == 0:
                text = "interference: alone on GPU, predicted slowdown 1.00x"
            else:
                text = (
                    f"interference: predicted slowdown {table[1][t]:.2f}x "
                    f"(conservative {table[1][t]:.2f}x) next to {t} job(s), "
                    f"GPU throughput {table[2][t]:.2f} [analytic estimate from declared GPU shares: "
                    "no job here has a measured profile; this job's declared GPU share]"
                )
            placement.reason = f"{placement.reason}; {text}" if placement.reason else text
            return
        verdicts = self._verdicts(state, task, [node])[0]
        v = next((x for x in verdicts if x.gpu == placement.gpu_indices[0]), None)
        if v is None:
            return
        placement.predicted_slowdown = round(v.newcomer_slowdown, 4)
        if v.tenants == 0:
            text = "interference: alone on GPU, predicted slowdown 1.00x"
        else:
            model = self._model(cycle)
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
