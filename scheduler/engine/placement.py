"""The placement engine behind ``schedule()`` (``scheduler.engine.schedule``) and the FGD benchmark.

One task at a time: filter all nodes, score the feasible ones, pick the best, let the GPU chooser pick
GPUs. Batch plugins run on the NumPy view (``CycleState.arrays``) for all rows at once; per-node plugins
run on ``Node`` objects. Cacheable batch plugins keep, per task shape, one value per row stamped with
the row's ``version``; a later task of the same shape recomputes only rows whose version moved (the
node that took the last placement), which is what makes 1,000+ placements per second possible on the
1,213-node trace cluster.

Scores: ``total_n = sum_p w_p * norm_p(s_p)_n / sum_p w_p`` over feasible rows; the highest total wins
and ties go to the lowest row, i.e. the caller's node order. A score plugin whose ``is_neutral(state,
task, rows)`` is True for this task is left out of both sums (it would add the same to every row).

GPU choice: the chooser of ``BuiltProfile.chooser_for(task, job)`` runs on the winning row. When a
filter exposes ``admitted_gpus_row`` and rejects some GPUs that fit on that row, those GPUs are shown
to the chooser as full for the duration of the call (``ClusterArrays.gpu_free`` and the ``Node``'s
``used_milli``, restored afterwards), so whatever chooser the profile names only picks admitted GPUs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from scheduler.engine.fit import fitting_gpu_mask
from scheduler.framework import (
    BatchFilterPlugin,
    BatchGpuChooserPlugin,
    BatchNormalizePlugin,
    BatchScorePlugin,
    BuiltProfile,
    CycleState,
    FilterPlugin,
    NormalizePlugin,
    ScorePlugin,
)
from scheduler.model import GPU_MILLI, JobRequest, Node, Placement, TaskRequest, reserve, unreserve

_ANON_JOB = JobRequest(job_id="", tasks=[])
# (plugin class, protocol) -> isinstance answer, shared by all engines (see ``PlacementEngine._is``).
_KINDS: dict[tuple[type, type], bool] = {}


def _neutral(plugin: Any, state: CycleState, task: TaskRequest, rows: np.ndarray) -> bool:
    """``plugin.is_neutral(...)`` when the plugin has the hook (``framework.NeutralAwarePlugin``)."""
    hook = getattr(plugin, "is_neutral", None)
    return bool(hook(state, task, rows)) if hook is not None else False


def shape_key(task: TaskRequest) -> tuple[Hashable, ...]:
    """Everything about a task that filters and cacheable scores may depend on (not its id)."""
    return (
        task.cpu_milli,
        task.memory_mib,
        task.gpus,
        task.gpu_milli,
        task.gpu_memory_mib,
        task.gpu_models,
    )


@dataclass
class _Entry:
    token: Hashable
    values: np.ndarray
    stamp: np.ndarray


class _WhyNot:
    """Per task shape: each row's first failing reason among the profile's leading ``prefix``
    cacheable filters ("" where they all pass), stamped with the row's version, and their counts."""

    def __init__(self, token: Hashable, prefix: int, n: int) -> None:
        self.token = token
        self.prefix = prefix
        self.reasons: list[str] = [""] * n
        self.passes = np.zeros(n, dtype=bool)
        self.stamp = np.full(n, -1, dtype=np.int64)
        self.counts: dict[str, int] = {}


@dataclass
class _Nowhere:
    """A task shape the leading cacheable filters refused on every row, and the cluster it was
    refused on (every row's version and those filters' tokens): the same shape fails the same way
    until one of them moves. ``summary`` is the why-not line past its task id (None: not explained)."""

    version: np.ndarray
    token: Hashable
    summary: str | None


@dataclass
class Outcome:
    """Result of ``PlacementEngine.place``: a placement (not yet committed) or a reason. ``score`` is
    the winner's total, 0 when ``explain`` is off and only one node was feasible (nothing is scored)."""

    placement: Placement | None
    row: int = -1
    score: float = 0.0
    reason: str = ""


@dataclass
class PlacementEngine:
    built: BuiltProfile
    state: CycleState
    nodes: Sequence[Node] | None = None
    # Build user-facing reasons for failures (costs a per-node pass; the benchmark turns it off).
    explain: bool = True
    # Run the plugins' ``annotate`` hooks on each placement (predicted slowdown, reason lines); a
    # batch caller that reads neither turns it off.
    annotate: bool = True
    _cache: dict[tuple[int, Hashable], _Entry] = field(default_factory=dict)
    # id(chooser) -> the annotate hooks of a placement made with that chooser (see ``_annotate``).
    _annotators: dict[int, list[Any]] = field(default_factory=dict, init=False, repr=False)
    # shape_key -> the why-not pass's reasons per row (see ``_why_not_summary``).
    _why_not_cache: dict[Hashable, _WhyNot] = field(default_factory=dict, init=False, repr=False)
    # shape_key -> the last refusal of that shape by the leading cacheable filters (see ``place``).
    _nowhere: dict[Hashable, _Nowhere] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._all_rows = np.arange(self.state.arrays.n)
        filters = self.built.filters
        prefix = 0
        while prefix < len(filters) and getattr(filters[prefix], "cacheable", False):
            prefix += 1
        # The leading cacheable filters: their verdicts depend on the task's shape and the rows'
        # versions only (and their tokens), so a refusal by them holds until one of those moves.
        self._prefix = prefix
        self._prefix_empty = False  # set by ``_feasible``: those filters left no row

    # -- public -----------------------------------------------------------------------------------

    def place(self, task: TaskRequest) -> Outcome:
        """Choose a node and GPUs for ``task``; nothing is reserved until ``commit``."""
        if self.built.profile.whole_gpus and task.is_shared:
            task = dataclasses.replace(task, gpus=1, gpu_milli=0, gpu_memory_mib=0)
        arrays = self.state.arrays
        key = shape_key(task)
        known = self._nowhere.get(key)
        if known is not None and self._still_nowhere(known):
            # Refused again, with the same reason: a full cluster is asked about thousands of waiting
            # jobs of a few shapes. The later filters still see the task (on no row), as in
            # ``_feasible``: a plugin may note who asked (interference_aware keeps the tolerances).
            self._feasible(task, key, start=self._prefix, mask=np.zeros(arrays.n, dtype=bool))
            if known.summary is None:
                return Outcome(None, reason="no node fits")
            return Outcome(None, reason=f"0/{arrays.n} nodes fit task {task.task_id}: {known.summary}")
        feasible = self._feasible(task, key)
        rows = np.flatnonzero(feasible)
        if rows.size == 0:
            summary, job_free = self._why_not_summary(task, key) if self.explain else (None, True)
            if self._prefix_empty and job_free:
                self._nowhere[key] = _Nowhere(arrays.version.copy(), self._prefix_token(), summary)
            if summary is None:
                return Outcome(None, reason="no node fits")
            return Outcome(None, reason=f"0/{arrays.n} nodes fit task {task.task_id}: {summary}")
        if rows.size == 1 and not self.explain:
            # One feasible node wins whatever it scores; only an explained placement quotes the score.
            totals = np.zeros(1)
        else:
            totals = self._totals(task, key, rows, feasible)
        chooser = self.built.chooser_for(task, self.state.job)
        best = int(np.argmax(totals))
        order: Sequence[int] = (best,)
        tried = 0
        while True:
            for i in order:
                row = int(rows[i])
                gpus = self._choose_admitted(chooser, task, row) if task.total_gpu_milli else ()
                if gpus is None:
                    continue
                job = self.state.job or _ANON_JOB
                placement = self._placement(task, job, row, gpus)
                if self.explain:
                    placement.reason = (
                        f"node {arrays.names[row]} scored {float(totals[i]):.1f}/100 "
                        f"by profile {self.built.profile.name}"
                    )
                if self.annotate:
                    self._annotate(task, placement)
                return Outcome(placement, row=row, score=float(totals[i]))
            if tried:
                break
            tried = 1
            # Rare: the best node's chooser refused (e.g. a topology constraint); walk the rest.
            order = [int(i) for i in np.argsort(-totals, kind="stable") if i != best]
        return Outcome(
            None, reason=f"no GPU set on the {rows.size} feasible node(s) fits task {task.task_id}"
        )

    def commit(self, row: int, placement: Placement) -> None:
        self.state.arrays.apply(row, placement, +1)
        if self.nodes is not None:
            reserve(self.nodes[row], placement)

    def release(self, row: int, placement: Placement) -> None:
        self.state.arrays.apply(row, placement, -1)
        if self.nodes is not None:
            unreserve(self.nodes[row], placement)

    # -- internals --------------------------------------------------------------------------------

    def _is(self, plugin: Any, protocol: type) -> bool:
        """``isinstance(plugin, protocol)``, memoised per plugin class: runtime Protocol checks cost
        microseconds each, the engine asks several per placement, and ``schedule()`` builds a new
        engine per call (plugins get their hooks from their class)."""
        key = (type(plugin), protocol)
        hit = _KINDS.get(key)
        if hit is None:
            hit = _KINDS[key] = isinstance(plugin, protocol)
        return hit

    def _placement(self, task: TaskRequest, job: JobRequest, row: int, gpus: tuple[int, ...]) -> Placement:
        arrays = self.state.arrays
        per_gpu_mem = task.gpu_memory_mib
        if task.gpus and not per_gpu_mem and gpus:
            # A whole GPU owns all of its memory.
            per_gpu_mem = int(arrays.gpu_mem_cap[row, gpus[0]])
        return Placement(
            job_id=job.job_id,
            task_id=task.task_id,
            node=arrays.names[row],
            gpu_indices=gpus,
            gpu_milli=(GPU_MILLI if task.gpus else task.gpu_milli) if gpus else 0,
            gpu_memory_mib=per_gpu_mem if gpus else 0,
            cpu_milli=task.cpu_milli,
            memory_mib=task.memory_mib,
        )

    def _annotate(self, task: TaskRequest, placement: Placement) -> None:
        """Plugins with ``annotate(state, task, placement)`` add their prediction to the placement
        (e.g. ``Placement.predicted_slowdown``); each plugin name once, filters then scores then chooser."""
        chooser = self.built.chooser_for(task, self.state.job)
        hooks = self._annotators.get(id(chooser))
        if hooks is None:  # the same for every placement with this chooser
            seen: set[str] = set()
            hooks = []
            for plugin in [*self.built.filters, *(p for p, _ in self.built.scores), chooser]:
                hook = getattr(plugin, "annotate", None)
                name = getattr(plugin, "name", "")
                if hook is None or name in seen:
                    continue
                seen.add(name)
                hooks.append(hook)
            self._annotators[id(chooser)] = hooks
        for hook in hooks:
            hook(self.state, task, placement)

    def _choose_admitted(self, chooser: Any, task: TaskRequest, row: int) -> tuple[int, ...] | None:
        """``_choose`` restricted to the GPUs every admission-aware filter admits on ``row``."""
        blocked: np.ndarray | None = None
        for plugin in self.built.filters:
            hook = getattr(plugin, "admitted_gpus_row", None)
            if hook is None:
                continue
            allowed = hook(self.state, task, row)
            if allowed is None:
                continue
            out = ~np.asarray(allowed, dtype=bool)
            blocked = out if blocked is None else blocked | out
        if blocked is None:
            return self._choose(chooser, task, row)
        arrays = self.state.arrays
        fits = fitting_gpu_mask(arrays, task, np.array([row]))[0]
        hidden = np.flatnonzero(fits & blocked[: fits.size])
        if hidden.size == 0:
            return self._choose(chooser, task, row)
        # Show the rejected GPUs as full while the chooser looks (arrays and Node alike), then restore.
        saved_free = arrays.gpu_free[row, hidden].copy()
        arrays.gpu_free[row, hidden] = 0
        # New versions before and after, so nothing memoised from the masked row outlives the call.
        arrays.version[row] += 1
        arrays.writes += 1
        node = self.nodes[row] if self.nodes is not None else None
        saved_used = [node.gpus[int(g)].used_milli for g in hidden] if node is not None else []
        if node is not None:
            for g in hidden:
                node.gpus[int(g)].used_milli = GPU_MILLI
        try:
            gpus = self._choose(chooser, task, row)
        finally:
            arrays.gpu_free[row, hidden] = saved_free
            arrays.version[row] += 1
            arrays.writes += 1
            if node is not None:
                for g, used in zip(hidden, saved_used, strict=True):
                    node.gpus[int(g)].used_milli = used
        if gpus is not None and set(gpus) & {int(g) for g in hidden}:
            return None  # a chooser that ignores capacity; never hand out a rejected GPU
        return gpus

    def _choose(self, chooser: Any, task: TaskRequest, row: int) -> tuple[int, ...] | None:
        if self._is(chooser, BatchGpuChooserPlugin):
            return chooser.choose_gpus_row(self.state, task, row)
        if self.nodes is None:
            raise ValueError(f"GPU chooser {chooser.name!r} needs Node objects")
        gpus = chooser.choose_gpus(self.state, task, self.nodes[row])
        return None if gpus is None else tuple(gpus)

    def _cached(
        self, slot: int, plugin: Any, method: str, task: TaskRequest, key: Hashable, need: np.ndarray
    ) -> np.ndarray:
        """Values of ``plugin.method`` for all rows, fresh at least on the rows where ``need``."""
        arrays = self.state.arrays
        token_fn = getattr(plugin, "cache_token", None)
        token = token_fn(self.state) if token_fn is not None else None
        entry = self._cache.get((slot, key))
        if entry is None or entry.token != token:
            entry = _Entry(token, np.zeros(arrays.n), np.full(arrays.n, -1, dtype=np.int64))
            self._cache[(slot, key)] = entry
            stale = np.flatnonzero(need)  # (versions are >= 0: nothing is fresh in a new entry)
        else:
            stale = np.flatnonzero((entry.stamp != arrays.version) & need)
        if stale.size:
            entry.values[stale] = getattr(plugin, method)(self.state, task, stale)
            entry.stamp[stale] = arrays.version[stale]
        return entry.values

    def _prefix_token(self) -> Hashable:
        return tuple(
            fn(self.state) if (fn := getattr(p, "cache_token", None)) is not None else None
            for p in self.built.filters[: self._prefix]
        )

    def _still_nowhere(self, known: _Nowhere) -> bool:
        version = self.state.arrays.version
        return (
            known.version.shape == version.shape
            and bool(np.array_equal(known.version, version))
            and known.token == self._prefix_token()
        )

    def _feasible(
        self, task: TaskRequest, key: Hashable, start: int = 0, mask: np.ndarray | None = None
    ) -> np.ndarray:
        """Rows every filter passes: the filters from ``start`` on, on the rows of ``mask`` (default:
        all of them, on the schedulable rows)."""
        arrays = self.state.arrays
        if mask is None:
            mask = arrays.schedulable.copy()
        self._prefix_empty = False
        for slot, plugin in enumerate(self.built.filters):
            if slot < start:
                continue
            if slot == self._prefix:
                self._prefix_empty = not mask.any()
            if self._is(plugin, BatchFilterPlugin):
                if getattr(plugin, "cacheable", False):
                    values = self._cached(-1 - slot, plugin, "filter_rows", task, key, mask)
                    mask &= values.astype(bool)
                else:
                    rows = np.flatnonzero(mask)
                    mask[rows] = cast(BatchFilterPlugin, plugin).filter_rows(self.state, task, rows)
            else:
                if self.nodes is None:
                    raise ValueError(f"filter {plugin.name!r} needs Node objects")
                one = cast(FilterPlugin, plugin)
                for row in np.flatnonzero(mask).tolist():
                    mask[row] = one.filter(self.state, task, self.nodes[row]).ok
        if self._prefix == len(self.built.filters):
            self._prefix_empty = not mask.any()
        return mask

    def _totals(self, task: TaskRequest, key: Hashable, rows: np.ndarray, need: np.ndarray) -> np.ndarray:
        """Weighted, normalised score of each of ``rows``; ``need`` is the same rows as a mask."""
        totals = np.zeros(rows.size)
        active = [
            (slot, plugin, weight)
            for slot, (plugin, weight) in enumerate(self.built.scores)
            # getattr, not isinstance on the Protocol: this runs for every placement.
            if not _neutral(plugin, self.state, task, rows)
        ]
        weight_sum = sum(w for _, _, w in active) or 1.0
        for slot, plugin, weight in active:
            if self._is(plugin, BatchScorePlugin):
                if getattr(plugin, "cacheable", False):
                    raw = self._cached(slot, plugin, "score_rows", task, key, need)[rows]
                else:
                    batch = cast(BatchScorePlugin, plugin)
                    raw = np.asarray(batch.score_rows(self.state, task, rows), dtype=float)
            else:
                if self.nodes is None:
                    raise ValueError(f"score plugin {plugin.name!r} needs Node objects")
                one = cast(ScorePlugin, plugin)
                raw = np.array([float(one.score(self.state, task, self.nodes[r])) for r in rows])
            if self._is(plugin, BatchNormalizePlugin):
                norm = cast(BatchNormalizePlugin, plugin).normalize_rows(raw)
            elif self._is(plugin, NormalizePlugin):
                scores = [float(x) for x in raw]
                norm = np.asarray(cast(NormalizePlugin, plugin).normalize(scores), dtype=float)
            else:
                norm = raw
            totals += weight * norm / weight_sum
        return totals

    def _why_not_summary(self, task: TaskRequest, key: Hashable) -> tuple[str, bool]:
        """The why-not line (how many nodes failed each filter, first failing filter per node) past
        its task id, and whether it holds for any job of this shape (no
        node got past the leading cacheable filters, so no per-job filter was asked).

        Costs what changed, not nodes x waiting jobs: the reasons of the profile's leading cacheable
        filters (and "not schedulable") are kept per task shape and row, with their counts, and
        recomputed only on rows whose ``version`` moved (the same promise ``cacheable`` makes for
        values). Only rows those filters pass go through the remaining filters, per node, as before."""
        arrays = self.state.arrays
        reasons: dict[str, int] = {}
        job_free = True
        if self.nodes is None:
            # Per-node filters need Node objects; without them every schedulable row just "does not fit".
            off = int(arrays.n - np.count_nonzero(arrays.schedulable))
            if off:
                reasons["node is not schedulable"] = off
            if arrays.n - off:
                reasons["does not fit"] = arrays.n - off
        else:
            memo = self._why_not_memo(task, key)
            reasons = {why: count for why, count in memo.counts.items() if count}
            rest = self.built.filters[memo.prefix :]
            passing = np.flatnonzero(memo.passes).tolist()
            job_free = not passing
            for row in passing:
                for plugin in rest:
                    status = cast(FilterPlugin, plugin).filter(self.state, task, self.nodes[row])
                    if not status.ok:
                        reasons[status.reason] = reasons.get(status.reason, 0) + 1
                        break
        summary = "; ".join(f"{count} node(s): {why}" for why, count in sorted(reasons.items()))
        return summary, job_free

    def _why_not_memo(self, task: TaskRequest, key: Hashable) -> _WhyNot:
        """The per-shape memo of ``_why_not_summary``, fresh on every row."""
        arrays = self.state.arrays
        filters = self.built.filters
        prefix = 0
        while prefix < len(filters) and getattr(filters[prefix], "cacheable", False):
            prefix += 1
        token = tuple(
            fn(self.state) if (fn := getattr(p, "cache_token", None)) is not None else None
            for p in filters[:prefix]
        )
        memo = self._why_not_cache.get(key)
        if memo is None or memo.token != token or memo.stamp.size != arrays.n:
            memo = _WhyNot(token, prefix, arrays.n)
            self._why_not_cache[key] = memo
        nodes = cast(Sequence[Node], self.nodes)
        for row in np.flatnonzero(memo.stamp != arrays.version).tolist():
            why = ""
            if not arrays.schedulable[row]:
                why = "node is not schedulable"
            else:
                for plugin in filters[:prefix]:
                    status = cast(FilterPlugin, plugin).filter(self.state, task, nodes[row])
                    if not status.ok:
                        why = status.reason
                        break
            old = memo.reasons[row]
            if old:
                memo.counts[old] -= 1
            if why:
                memo.counts[why] = memo.counts.get(why, 0) + 1
            memo.reasons[row] = why
            memo.passes[row] = not why
            memo.stamp[row] = arrays.version[row]
        return memo
