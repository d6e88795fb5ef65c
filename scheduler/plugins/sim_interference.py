"""``sim_interference`` (filter + score + GPU admission; ours): the platform's ``interference_aware``
with a memo across cycles (``InterferenceMemo``, injected through the profile's args), slot classes
from the caller (``SlotHints``), a pack rule and idle GPU first; see ``CachedInterference``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.engine.fit import fitting_gpus
from scheduler.framework import CycleState, Status
from scheduler.interference.features import normalize_gpu_type
from scheduler.interference.predict import SetQuery, predict_sets
from scheduler.model import GPU_MILLI, Node, TaskRequest
from scheduler.plugin_registry import register
from scheduler.plugins.interference_aware import GpuVerdict, InterferenceAware
from scheduler.plugins.sim_gandiva_gpus import tenant_type

_SetOutcome = tuple[bool, float, float, float, int, str, str]
NODE_MEMO_LIMIT = 200_000


@dataclass
class MemoTables:
    """The verdict tables of one plugin setting (see ``CachedInterference``)."""

    # Co-location set key -> outcome (admissible, slowdowns, throughput, residents, source, why).
    sets: dict[tuple[object, ...], _SetOutcome] = field(default_factory=dict)
    # Node signature (per-node path) -> verdicts per fitting GPU.
    nodes: dict[tuple[object, ...], list[GpuVerdict]] = field(default_factory=dict)
    # The caller's node key (``SlotHints.node_keys``) -> verdicts per fitting GPU.
    node_keys: dict[tuple[object, ...], list[GpuVerdict]] = field(default_factory=dict)
    # (newcomer, avoided types, slot class) -> (admissible, why not, predicted GPU throughput).
    classes: dict[tuple[object, ...], tuple[bool, str, float]] = field(default_factory=dict)


class InterferenceMemo:
    """Verdicts kept across cycles, injected by the caller (the profile's args ``memo``, see
    ``scheduler.policy.registry.with_memo``): the simulator makes one per run (every run starts
    cold and sees the model it is given), the platform keeps one in ``PolicyView.memo``. Only a
    cache: a verdict depends only on its key."""

    def __init__(self) -> None:
        self._tables: dict[tuple[object, ...], MemoTables] = {}

    def tables(self, settings: tuple[object, ...]) -> MemoTables:
        return self._tables.setdefault(settings, MemoTables())

    def clear(self) -> None:
        """Forget every verdict, in place: plugin instances hold these tables (a model that learns
        during a run, ``scheduler.sim.online_interference``, makes them stale)."""
        for tables in self._tables.values():
            for memo in (tables.sets, tables.nodes, tables.node_keys, tables.classes):
                memo.clear()


@dataclass
class SlotHints:
    """What the caller knows about the offered nodes (one entry per ``ClusterArrays`` row), so that
    the plugin reads verdicts per slot class instead of walking nodes (see ``Simulator._verdict_key``).

    - ``node_keys``: per row, what the verdicts on the node depend on besides the newcomer;
    - ``node_group``: per row, its hardware group;
    - ``node_free``: per row, its free milli-GPU as the call starts (a row whose free milli moves
      during the call no longer matches its key);
    - ``slot_class``: (rows, G) slot class of each GPU (-1: no residents or no room);
    - ``slot_ids``: the class table (class -> id), which the plugin extends for rows the call changes;
    - ``task_class``: task id -> its part of a slot class;
    - ``tenant_counts``: residents per GPU slot and the row versions they hold for, or None.
    """

    node_keys: list[tuple[object, ...] | None]
    node_group: list[int]
    node_free: np.ndarray
    slot_class: np.ndarray
    slot_ids: dict[tuple[object, ...], int]
    task_class: dict[str, Any]
    tenant_counts: tuple[np.ndarray, np.ndarray] | None = None


@dataclass(frozen=True, slots=True)
class _RowView:
    """One row's answers for one task (``CachedInterference._slot_view``): the filter's (some busy
    fitting GPU admits it; asked only of rows without an idle fitting GPU), the score's, and the GPU
    slots the admission lets it use."""

    admits: bool
    score: float
    allowed: np.ndarray
    busy: bool  # some fitting GPU has residents


def _hint(state: CycleState) -> SlotHints:
    hints: SlotHints = state.data["slot_hints"]
    return hints


def _hints(state: CycleState, name: str) -> Any:
    """Field ``name`` of the caller's ``SlotHints``, None when it gave none (the platform, tests)."""
    hints = state.data.get("slot_hints")
    return None if hints is None else getattr(hints, name)


@register("sim_interference")
class CachedInterference(InterferenceAware):
    """``interference_aware`` (the real plugin: same filter, score, GPU admission and annotation,
    same trained model through ``interference.predict.predict_sets``) with two things a long-running
    platform would add, used by the simulator's ``ours`` policy:

    - **memo across cycles**: the verdict of a co-location set depends only on the newcomer's job
      type, the residents' job types, the GPU type, the share and the tolerances, so it is predicted
      once per such key for the whole run (the real plugin memoises per cycle). Only GPUs that fit
      the task *and* have residents are ever predicted (idle GPUs are "alone", no model call).
    - **slot classes from the simulator** (``SlotHints`` in ``CycleState.data["slot_hints"]``, see
      ``Simulator._verdict_key``; absent elsewhere, where the per-node path runs): a GPU with
      residents is named by a class id (node group, residents' job types and request shapes), so
      ``filter_rows``, ``score_rows`` and ``filter`` read one memoised verdict per (newcomer,
      avoided types, class) over NumPy arrays instead of walking nodes and GPUs in Python. Rows the
      call changed (their free milli-GPU moved) are re-classed from their residents, once per row
      version. Same verdicts, same scores, same reasons as the per-node path.
    - **pack rule** (``min_total_throughput``): a co-location is admitted only when, besides every
      job's conservative predicted slowdown being within its tolerance, the predicted combined
      normalised throughput ``sum_i 1/s_i`` exceeds ``min_total_throughput`` (1.0: packing must beat
      taking turns, else the newcomer waits for a GPU of its own).
    - **introspection** (Gandiva-style, ``JobRequest.hints["avoid_types"]``): residents of a job type
      this job was unpacked from (its measured progress fell below tolerance) are not admitted again.
    - **idle GPU first, pack only under pressure** (``idle_first``): while some node could take the
      task on an idle GPU (CPU, memory and an idle GPU with the memory it asks), GPUs with residents
      are not admitted. Packing costs every job on the GPU its slowdown (a pair at the 1.5x tolerance
      runs each job at 0.67), so it only pays when the alternative is waiting; when no idle GPU fits
      anywhere the filter, score and admission are the real plugin's. Checked on
      ``CycleState.arrays`` as it stands after the cycle's earlier placements, so a call that fills
      the last idle GPU starts packing for the next task.

    The scheduler's view is the model's prediction, never the simulator's ground truth.
    """

    name = "sim_interference"

    def __init__(
        self,
        min_total_throughput: float = 1.0,
        idle_first: bool = True,
        memo: InterferenceMemo | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.min_total_throughput = min_total_throughput
        self.idle_first = idle_first
        # The caller's memo (shared by the filter, score and chooser instances of one profile and
        # kept across cycles), else one of this instance's own; one table set per settings.
        settings = (
            self.model_path, self.use_model, self.conservative, self.min_feasible, self.mechanism,
            min_total_throughput,
        )  # fmt: skip
        tables = (memo if memo is not None else InterferenceMemo()).tables(settings)
        self._memo = tables.sets
        self._node_memo = tables.nodes
        # Keyed by the caller's node key (job types and shapes of residents, not task ids).
        self._sim_memo = tables.node_keys
        # (newcomer, avoided types, slot class) -> (admissible, why not, predicted GPU throughput)
        # (see ``filter_rows``).
        self._class_memo = tables.classes

    @staticmethod
    def _ident(profile: dict[str, Any]) -> object:
        key = profile.get("job_key")
        return key if key is not None else tuple(sorted(profile.items()))

    def _verdicts(self, state: CycleState, task: TaskRequest, nodes: list[Node]) -> list[list[GpuVerdict]]:
        cycle = self._cycle(state)
        # Same task, same node state within a cycle (filter, score, admission and chooser ask in
        # turn): answered from the cycle's memo. A node's state is its row's ``ClusterArrays.version``
        # (the placement engine bumps it on every commit, release and admission mask).
        seen: dict[tuple[object, ...], list[GpuVerdict]] = cycle.setdefault("interference_verdicts", {})
        arrays = state.arrays
        if arrays is not None:
            rows_of = cycle.get("interference_rows")
            if rows_of is None:
                rows_of = cycle["interference_rows"] = {name: i for i, name in enumerate(arrays.names)}
            node_keys: list[tuple[object, ...]] = [
                (task.task_id, rows_of[node.name], int(arrays.version[rows_of[node.name]])) for node in nodes
            ]
        else:
            node_keys = [
                (task.task_id, node.name, tuple((g.used_milli, tuple(g.tenants)) for g in node.gpus))
                for node in nodes
            ]
        if all(k in seen for k in node_keys):
            return [seen[k] for k in node_keys]
        job = state.job
        tolerance = job.slowdown_tolerance if job is not None else self.default_tolerance
        newcomer, _ = cycle["profiles"].get(task.task_id, ({"gpu_share": task.gpu_milli / GPU_MILLI}, 0))
        me = (self._ident(newcomer), newcomer.get("gpu_share"), tolerance)
        avoid_raw = job.hints.get("avoid_types", "") if job is not None else ""
        # Across cycles: the verdicts on a node depend only on the newcomer (job key, share,
        # tolerance, avoided types, request) and on each GPU's use and residents (task ids, whose
        # profile and share do not change while they run), so an unchanged node is not recomputed.
        base: tuple[object, ...] = (me, avoid_raw, task.gpus, task.gpu_milli, task.gpu_memory_mib)
        result: list[list[GpuVerdict]] = [[] for _ in nodes]
        missing: list[tuple[int, tuple[object, ...] | None, tuple[object, ...] | None]] = []
        fast = self._sim_keys(state, nodes, node_keys, seen)
        for pos, node in enumerate(nodes):
            if node_keys[pos] in seen:
                result[pos] = seen[node_keys[pos]]
                continue
            if fast is not None:
                if fast[pos] is None:
                    # Changed by this call: its residents placed now recur in no later call.
                    missing.append((pos, None, None))
                    continue
                # The simulator's key of the node (unchanged since the call began): across calls.
                fkey: tuple[object, ...] = (base, task.gpu_models, fast[pos])
                got = self._sim_memo.get(fkey)
                if got is not None:
                    result[pos] = seen[node_keys[pos]] = got
                else:
                    missing.append((pos, None, fkey))
                continue
            sig: tuple[object, ...] = (
                base,
                tuple(
                    (g.model, g.memory_mib, g.used_milli, g.used_memory_mib, *g.tenants) for g in node.gpus
                ),
            )
            hit = self._node_memo.get(sig)
            if hit is not None:
                result[pos] = seen[node_keys[pos]] = hit
            else:
                missing.append((pos, sig, None))
        if not missing:
            return result
        per_node: list[tuple[int, list[int]]] = []
        asks: list[tuple[Node, int]] = []
        ask_pos: list[int] = []
        for pos, _sig, _fkey in missing:
            node = nodes[pos]
            gpus = fitting_gpus(task, node) if task.total_gpu_milli else []
            per_node.append((pos, gpus))
            if not task.is_shared:
                continue
            for g in gpus:
                if any(t != task.task_id for t in node.gpus[g].tenants):
                    asks.append((node, g))
                    ask_pos.append(pos)
        answers = self._slot_verdicts(state, cycle, task, asks)
        by_slot = {(pos, v.gpu): v for pos, v in zip(ask_pos, answers, strict=True)}
        if len(self._node_memo) > NODE_MEMO_LIMIT:
            self._node_memo.clear()  # bounded memory on long runs (only a cache)
        if len(self._sim_memo) > NODE_MEMO_LIMIT:
            self._sim_memo.clear()
        for (pos, gpus), (_, node_sig, fk) in zip(per_node, missing, strict=True):
            verdicts = [by_slot.get((pos, g)) or GpuVerdict(g, True, 1.0, 1.0, 1.0, 0, "alone") for g in gpus]
            result[pos] = seen[node_keys[pos]] = verdicts
            if fk is not None:
                self._sim_memo[fk] = verdicts
            elif node_sig is not None:
                self._node_memo[node_sig] = verdicts
        return result

    def _slot_verdicts(
        self, state: CycleState, cycle: dict[str, Any], task: TaskRequest, asks: list[tuple[Node, int]]
    ) -> list[GpuVerdict]:
        """Verdicts on GPUs that fit the shared ``task`` and have other residents, one per
        ``(node, gpu index)``: from the run's set memo, predicting the missing sets in one batch."""
        if not asks:
            return []
        job = state.job
        tolerance = job.slowdown_tolerance if job is not None else self.default_tolerance
        newcomer, _ = cycle["profiles"].get(task.task_id, ({"gpu_share": task.gpu_milli / GPU_MILLI}, 0))
        me = (self._ident(newcomer), newcomer.get("gpu_share"), tolerance)
        avoid_raw = job.hints.get("avoid_types", "") if job is not None else ""
        avoid = {int(x) for x in avoid_raw.split(",") if x}
        keys: list[tuple[object, ...]] = []
        avoided: list[bool] = []
        todo: dict[tuple[object, ...], tuple[SetQuery, list[float]]] = {}
        for node, g in asks:
            gpu = node.gpus[g]
            avoided.append(bool(avoid) and any(tenant_type(t) in avoid for t in gpu.tenants))
            tenants = [self._tenant(state, cycle, t, gpu) for t in gpu.tenants if t != task.task_id]
            others = tuple(sorted((repr(self._ident(p)), p.get("gpu_share"), tol) for p, tol in tenants))
            key: tuple[object, ...] = (me, others, gpu.model, gpu.memory_mib)
            keys.append(key)
            if key not in self._memo and key not in todo:
                profiles = [newcomer] + [p for p, _ in tenants]
                query = SetQuery(
                    profiles, normalize_gpu_type(gpu.model), self.mechanism, float(gpu.memory_mib)
                )
                todo[key] = (query, [tolerance] + [t for _, t in tenants])
        if todo:
            pending = list(todo)
            preds = predict_sets(self._model(cycle), [todo[k][0] for k in pending])
            for done_key, pred in zip(pending, preds, strict=True):
                v = self._verdict(0, (pred, todo[done_key][1]))
                ok, why = v.ok, v.why
                if ok and v.total_throughput <= self.min_total_throughput:
                    ok = False
                    why = f"predicted GPU throughput {v.total_throughput:.2f} <= {self.min_total_throughput:.2f}"
                self._memo[done_key] = (
                    ok, v.newcomer_slowdown, v.conservative_slowdown, v.total_throughput, v.tenants, v.source, why
                )  # fmt: skip
        out: list[GpuVerdict] = []
        for (_, g), key, avoid_here in zip(asks, keys, avoided, strict=True):
            ok, sl, sc, thr, n, src, why = self._memo[key]
            if avoid_here:
                ok, why = False, "unpacked from this job type before (measured progress too slow)"
            out.append(GpuVerdict(g, ok, sl, sc, thr, n, src, why))
        return out

    @staticmethod
    def _sim_keys(
        state: CycleState, nodes: list[Node], node_keys: list[tuple[object, ...]], seen: dict[Any, Any]
    ) -> list[tuple[object, ...] | None] | None:
        """Per node, the simulator's verdict key (``SlotHints.node_keys``, one per row,
        see ``Simulator._verdict_key``) when the row is still as the call received it (its free
        milli-GPU unchanged: placements only take, a rollback gives back what it took), else None.
        None when the simulator gave no keys (the platform, tests)."""
        keys = _hints(state, "node_keys")
        arrays = state.arrays
        if keys is None or arrays is None or len(keys) != arrays.n:
            return None
        cycle = state.data.setdefault("interference_fast", {})
        rows_of = cycle.get("rows")
        if rows_of is None:
            rows_of = cycle["rows"] = {name: i for i, name in enumerate(arrays.names)}
        todo = [pos for pos in range(len(nodes)) if node_keys[pos] not in seen]
        out: list[tuple[object, ...] | None] = [None] * len(nodes)
        if not todo:
            return out
        rows = np.array([rows_of[nodes[pos].name] for pos in todo], dtype=np.int64)
        free = np.where(arrays.gpu_exists[rows], arrays.gpu_free[rows], 0).sum(axis=1)
        same = free == _hint(state).node_free[rows]
        for pos, row, ok in zip(todo, rows.tolist(), same.tolist(), strict=True):
            if ok:
                out[pos] = keys[row]
        return out

    # -- idle GPU first, pack only under pressure ------------------------------------------------

    @staticmethod
    def _idle_mask(state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        """(len(rows), G): idle GPU slots (nothing in use) with the memory the task asks, on rows
        with the CPU and memory it asks."""
        a = state.arrays
        idle = (
            a.gpu_exists[rows]
            & (a.gpu_free[rows] == GPU_MILLI)
            & (a.gpu_mem_free[rows] >= task.gpu_memory_mib)
        )
        room = (a.cpu_free[rows] >= task.cpu_milli) & (a.mem_free[rows] >= task.memory_mib)
        if task.gpu_models:
            room &= a.model_mask(task.gpu_models)[rows]
        mask: np.ndarray = idle & room[:, None]
        return mask

    def _counts(self, state: CycleState, cycle: dict[str, Any], rows: np.ndarray) -> np.ndarray:
        """The real plugin's resident counts, started from the simulator's per-slot counts
        (``SlotHints.tenant_counts``: counts and the row versions they hold for) instead
        of walking every offered node; rows the call changed since are recounted as before."""
        given = _hints(state, "tenant_counts")
        arrays = state.arrays
        if given is not None and arrays is not None and cycle["counts"] is None:
            counts, versions = given
            if counts.shape[0] == arrays.n and counts.shape[1] <= arrays.gpu_free.shape[1]:
                full = np.zeros(arrays.gpu_free.shape, dtype=np.int64)
                full[:, : counts.shape[1]] = counts
                cycle["counts"] = full
                cycle["stamp"] = np.asarray(versions, dtype=np.int64).copy()
                cycle["max_count"] = 0
        out = super()._counts(state, cycle, rows)
        if given is not None and rows.size:
            # As the real plugin keeps it: the most residents seen on the rows asked about so far.
            cycle["max_count"] = max(cycle["max_count"], int(out[rows].max()))
        return out

    def _idle_somewhere(self, state: CycleState, task: TaskRequest) -> bool:
        """Some node could take this shared task on an idle GPU (no pressure to pack)."""
        if not (self.idle_first and task.is_shared) or state.arrays is None:
            return False
        # Asked by every filter call of a placement: memoised per (task, cluster state).
        memo: dict[tuple[str, int], bool] = state.data.setdefault("interference_idle_somewhere", {})
        key = (task.task_id, state.arrays.writes)
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = bool(self._idle_all(state, task).any())
        return hit

    def _idle_all(self, state: CycleState, task: TaskRequest) -> np.ndarray:
        """``_idle_mask`` of every row, memoised per (task, cluster state): the filter, the GPU
        admission and the per-node filter of one placement all read it (read only)."""
        memo: dict[tuple[Any, ...], tuple[int, np.ndarray]] = state.data.setdefault(
            "interference_idle_all", {}
        )
        stamp = state.arrays.writes  # every write bumps a row's version (and counts here)
        # Keyed by what ``_idle_mask`` reads of the task, not its id: the queue's tasks of one shape
        # share one mask per cluster state (one per task cost 0.3 ms each at 1,213 nodes).
        key = (task.cpu_milli, task.memory_mib, task.gpu_memory_mib, task.gpu_models)
        hit = memo.get(key)
        if hit is None or hit[0] != stamp:
            hit = memo[key] = (stamp, self._idle_mask(state, task, np.arange(state.arrays.n)))
        return hit[1]

    def filter(self, state: CycleState, task: TaskRequest, node: Node) -> Status:
        if self._idle_somewhere(state, task):
            row = state.arrays.names.index(node.name)
            if self._idle_all(state, task)[row].any():
                return Status.success()
            return Status.unschedulable("interference: an idle GPU elsewhere comes first (no packing needed)")
        fast = self._fast_filter(state, task, node)
        if fast is not None:
            return fast
        return super().filter(state, task, node)

    def _fast_filter(self, state: CycleState, task: TaskRequest, node: Node) -> Status | None:
        """The real plugin's ``filter`` (same verdict, same reason) from the slot-class memo (asked
        per node by the placement engine's explanation of a task that fits nowhere)."""
        classes = _hints(state, "slot_class")
        if classes is None or not task.is_shared or task.gpu_models or state.arrays is None:
            return None
        cycle = self._cycle(state)
        if self._shares_table(state, cycle, task, 0) is not None:
            return None
        fast = state.data.setdefault("interference_fast", {})
        rows_of = fast.get("rows")
        if rows_of is None:
            rows_of = fast["rows"] = {name: i for i, name in enumerate(state.arrays.names)}
        # Asked for every row in turn with the cluster unchanged: answered for all rows at once.
        key = (task.task_id, state.arrays.writes)
        every = fast.get("filter_all")
        if every is None or every[0] != key:
            got = self._filter_all(state, cycle, task)
            if got is None:
                return None
            every = fast["filter_all"] = (key, *got)
        _, ok, why = every
        row = rows_of[node.name]
        if ok[row]:
            return Status.success()
        return Status.unschedulable(f"interference: {why[row]} on every fitting GPU")

    def _filter_all(
        self, state: CycleState, cycle: dict[str, Any], task: TaskRequest
    ) -> tuple[np.ndarray, dict[int, str]] | None:
        """The real plugin's filter verdict on every row, and the reason on refused rows (the
        first fitting GPU's); None when some fitting GPU with residents has no slot class."""
        rows = np.arange(state.arrays.n)
        cand, counts = self._candidates(state, cycle, task, rows)
        ok_rows = np.ones(len(rows), dtype=bool)
        why: dict[int, str] = {}
        need = np.flatnonzero(~(cand & (counts == 0)).any(axis=1) & cand.any(axis=1))
        if not need.size:
            return ok_rows, why
        sub = rows[need]
        slots = cand[need]
        cls = np.where(slots, self._row_classes(state, sub), -1)
        if (cls[slots] < 0).any():
            return None
        uniq = np.unique(cls[slots])
        ok = self._class_ok(state, cycle, task, uniq, cls, sub)
        at = np.searchsorted(uniq, np.maximum(cls, uniq[0]))
        ok_rows[need] = (slots & ok[at]).any(axis=1)
        first = slots.argmax(axis=1)
        for pos in np.flatnonzero(~ok_rows[need]).tolist():
            why[int(need[pos])] = self._last_why[int(cls[pos, first[pos]])]
        return ok_rows, why

    def filter_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        if self._idle_somewhere(state, task):
            return np.asarray(self._idle_all(state, task)[rows].any(axis=1), dtype=bool)
        return super().filter_rows(state, task, rows)

    def _admissible_rows(
        self, state: CycleState, cycle: dict[str, Any], task: TaskRequest, rows: np.ndarray, cand: np.ndarray
    ) -> np.ndarray:
        # The verdicts of rows the call has not changed are read per slot class
        # (``SlotHints.slot_class``, see ``Simulator._verdict_key``) from a memo across
        # calls, without Python per node or GPU.
        if _hints(state, "slot_class") is None or task.gpu_models or state.arrays is None:
            return super()._admissible_rows(state, cycle, task, rows, cand)
        # Every fitting GPU of these rows has residents (the caller asks only such rows, having just
        # counted them): ``cand`` is the rows' busy slots.
        got = self._slot_view(state, cycle, task, rows, busy_given=cand)
        if got is None:  # a fitting GPU with residents but no class: not the sim's
            return super()._admissible_rows(state, cycle, task, rows, cand)
        return np.array([view.admits for view in got], dtype=bool)

    def _slot_view(
        self,
        state: CycleState,
        cycle: dict[str, Any],
        task: TaskRequest,
        rows: np.ndarray,
        busy_given: np.ndarray | None = None,
    ) -> list[_RowView] | None:
        """Per row of ``rows``: the filter's, the score's and the GPU admission's answer for this
        task (``_RowView``); None when a busy fitting slot has no slot class (the per-node path).

        The filter, the score and the GPU admission of one placement ask about the same task on the
        same rows in turn: each row's answers are kept for the call by (task, row, row version), so a
        row is classed and its classes' verdicts looked up once per placement, not three times. Rows
        not kept yet are computed together as before (a class new to the run first occurs in a row
        not kept, so the same GPU slot is asked to predict it). ``busy_given``: the rows' fitting
        slots, every one with residents, as the caller has just counted them on these row versions."""
        memo: dict[tuple[str, int, int], _RowView] = state.data.setdefault("interference_slot_view", {})
        tid = task.task_id
        keys = [(tid, r, v) for r, v in zip(rows.tolist(), state.arrays.version[rows].tolist(), strict=True)]
        missing = [i for i, k in enumerate(keys) if k not in memo]
        if missing:
            sub = rows if len(missing) == len(keys) else rows[missing]
            if busy_given is not None:
                cand = busy = busy_given if len(missing) == len(keys) else busy_given[missing]
                alone = np.zeros(busy.shape, dtype=bool)
            else:
                cand, counts = self._candidates(state, cycle, task, sub)
                busy = cand & (counts > 0)
                alone = cand & (counts == 0)
            # Only rows with a busy fitting slot are classed (as before: classing a row the call
            # changed interns its classes, and the order of first interning names them).
            cls = np.full(busy.shape, -1, dtype=np.int64)
            some = np.flatnonzero(busy.any(axis=1))
            if some.size:
                cls[some] = np.where(busy[some], self._row_classes(state, sub[some]), -1)
            present = cls[busy]
            if (present < 0).any():
                return None
            score = np.where(cand.any(axis=1), 1.0, 0.0)
            if present.size:
                # Sorted distinct classes, as ``np.unique`` gives them (cheaper on a handful).
                uniq = np.array(sorted(set(present.tolist())), dtype=np.int64)
                ok = self._class_ok(state, cycle, task, uniq, cls, sub)
                at = np.searchsorted(uniq, np.maximum(cls, uniq[0]))
                joins = busy & ok[at]
                # The real plugin's score: throughput of the best admissible fitting GPU (1.0
                # alone), 0.0 when none; on rows without a busy fitting GPU, 1.0 if any fits.
                per_slot = np.where(alone, 1.0, np.where(joins, self._last_thr[at], -np.inf))
                best = per_slot[some].max(axis=1)
                score[some] = np.where(np.isfinite(best), best, 0.0)
            else:
                joins = busy
            admits: list[bool] = joins.any(axis=1).tolist()
            allowed = alone | joins
            busy_rows: list[bool] = np.asarray(busy.any(axis=1)).tolist()
            for j, (i, score_j) in enumerate(zip(missing, score.tolist(), strict=True)):
                memo[keys[i]] = _RowView(admits[j], score_j, allowed[j], busy_rows[j])
        return [memo[k] for k in keys]

    def _row_classes(self, state: CycleState, sub: np.ndarray) -> np.ndarray:
        """(len(sub), G) slot classes of rows ``sub`` as they are now: the simulator's
        (``SlotHints.slot_class``) for a row the call has not changed (its free
        milli-GPU unchanged: placements only take, a rollback gives back what it took), else
        interned the simulator's way from the node's residents, once per row version."""
        data = state.data
        arrays = state.arrays
        out: np.ndarray = _hint(state).slot_class[sub]
        free = np.where(arrays.gpu_exists[sub], arrays.gpu_free[sub], 0).sum(axis=1)
        changed = np.flatnonzero(free != _hint(state).node_free[sub])
        if not changed.size:
            return out
        out = out.copy()
        fast = data.setdefault("interference_fast", {})
        memo: dict[tuple[int, int], np.ndarray] = fast.setdefault("classes", {})
        ids: dict[tuple[object, ...], int] = _hint(state).slot_ids
        of_task = _hint(state).task_class
        for pos in changed.tolist():
            row = int(sub[pos])
            key = (row, int(arrays.version[row]))
            vec = memo.get(key)
            if vec is None:
                vec = np.full(out.shape[1], -1, dtype=np.int64)
                group = _hint(state).node_group[row]
                for gpu in state.snapshot.nodes[row].gpus:
                    if 0 < gpu.used_milli < GPU_MILLI:
                        cls = (group, tuple(sorted(of_task[t] for t in gpu.tenants)))
                        c = ids.get(cls)
                        if c is None:
                            c = ids[cls] = len(ids)
                        vec[gpu.index] = c
                memo[key] = vec
            out[pos] = vec
        return out

    def _class_ok(
        self,
        state: CycleState,
        cycle: dict[str, Any],
        task: TaskRequest,
        uniq: np.ndarray,
        cls: np.ndarray,
        sub: np.ndarray,
    ) -> np.ndarray:
        """Admissible or not, per slot class in ``uniq`` (sorted), for this newcomer: from the memo
        across calls, else predicted on the first GPU of that class (``cls`` over rows ``sub``)."""
        job = state.job
        tolerance = job.slowdown_tolerance if job is not None else self.default_tolerance
        newcomer, _ = cycle["profiles"].get(task.task_id, ({"gpu_share": task.gpu_milli / GPU_MILLI}, 0))
        me = (self._ident(newcomer), newcomer.get("gpu_share"), tolerance)
        base = (me, job.hints.get("avoid_types", "") if job is not None else "")
        memo = self._class_memo
        ok = np.zeros(uniq.size, dtype=bool)
        thr = np.zeros(uniq.size)
        self._last_why: dict[int, str] = {}
        asks: list[tuple[Node, int]] = []
        ask_at: list[tuple[int, tuple[object, ...]]] = []
        for i, c in enumerate(uniq.tolist()):
            key: tuple[object, ...] = (base, c)
            hit = memo.get(key)
            if hit is not None:
                ok[i], self._last_why[c], thr[i] = hit
                continue
            r, g = np.argwhere(cls == c)[0]
            asks.append((state.snapshot.nodes[int(sub[r])], int(g)))
            ask_at.append((i, key))
        if asks:
            if len(memo) > NODE_MEMO_LIMIT:
                memo.clear()
            for (i, key), v in zip(ask_at, self._slot_verdicts(state, cycle, task, asks), strict=True):
                memo[key] = (v.ok, v.why, v.total_throughput)
                ok[i], thr[i] = v.ok, v.total_throughput
                self._last_why[int(uniq[i])] = v.why
        self._last_thr = thr
        return ok

    def admitted_gpus_row(self, state: CycleState, task: TaskRequest, row: int) -> np.ndarray | None:
        if task.is_shared:
            # Every path of the real plugin starts by entering the job's tasks in the call's
            # profiles; so must the idle-GPU one, or a later job of the same call would see this
            # task, once placed, as a resident of unknown type (the annotation used to do it).
            self._cycle(state)
        if self._idle_somewhere(state, task):
            mask: np.ndarray = self._idle_all(state, task)[row].copy()
            return mask
        fast = self._fast_admitted(state, task, row)
        if fast is not None:
            return fast
        return super().admitted_gpus_row(state, task, row)

    def _fast_admitted(self, state: CycleState, task: TaskRequest, row: int) -> np.ndarray | None:
        """The real plugin's admission on ``row`` (idle fitting GPUs alone, busy ones by their
        verdict) from the slot-class memo the filter just filled for the same classes, instead of
        re-deriving each busy GPU's co-location set; None where the per-node path must answer."""
        if (
            _hints(state, "slot_class") is None
            or not task.is_shared
            or task.gpu_models
            or state.arrays is None
        ):
            return None
        cycle = self._cycle(state)
        # None here means None for any resident count (it does not depend on it), and then the
        # real plugin's ``_admits_all`` is False too.
        if self._shares_table(state, cycle, task, 0) is not None:
            return None
        got = self._slot_view(state, cycle, task, np.array([row]))
        if got is None:  # a busy fitting GPU without a class: the per-node path
            return None
        return got[0].allowed.copy()

    def is_neutral(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> bool:
        # While an idle GPU fits, every admissible placement runs alone: nothing to rank.
        if self._idle_somewhere(state, task):
            return True
        if (
            _hints(state, "slot_class") is None
            or not task.is_shared
            or task.gpu_models
            or state.arrays is None
        ):
            return super().is_neutral(state, task, rows)
        cycle = self._cycle(state)
        if self._shares_table(state, cycle, task, 0) is not None:
            return True
        # The real plugin's answer (no fitting GPU with residents) from the rows' views, which the
        # score asks for next on the same rows when it is False (so computing them here asks no
        # verdict the score would not).
        got = self._slot_view(state, cycle, task, rows)
        if got is None:
            return super().is_neutral(state, task, rows)
        return not any(view.busy for view in got)

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        if self._idle_somewhere(state, task):
            return np.ones(len(rows))
        classes = _hints(state, "slot_class")
        if classes is None or not task.is_shared or task.gpu_models or state.arrays is None:
            return super().score_rows(state, task, rows)
        cycle = self._cycle(state)
        # (Whether the shares table applies does not depend on the resident count.)
        if self._shares_table(state, cycle, task, 0) is not None:
            return super().score_rows(state, task, rows)
        got = self._slot_view(state, cycle, task, rows)
        if got is None:
            return super().score_rows(state, task, rows)
        # The real plugin's score, on unchanged rows from the slot-class memo (see ``_slot_view``).
        out = np.array([view.score for view in got])
        return out

    def score(self, state: CycleState, task: TaskRequest, node: Node) -> float:
        if self._idle_somewhere(state, task):
            return 1.0
        return super().score(state, task, node)
