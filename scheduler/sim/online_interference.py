"""``ours`` with the online interference model: the simulator feeds it the co-locations it observes.

``OnlineSimulator`` is the :class:`~scheduler.sim.engine.Simulator` whose ``sim_interference`` plugin
predicts with an :class:`~scheduler.interference.online_model.OnlineModel` instead of a fixed model
file. After every scheduling cycle it looks at the GPUs shared by exactly two jobs; each new pair of
jobs on a GPU is one measured co-location, its normalised throughputs read from the ground truth
(``perf.norm``: Gavel's measured pair, what the platform's sweep would measure), and the model learns
from it (``OnlineModel.observe``). As on the platform, a long co-location counts once. At most
``max_per_pair`` measurements of one job-type pair are fed (the online benchmark's budget per pair,
``scheduler.interference.online``): later ones would only repeat what the correction knows.

When the model learnt something, every memoised verdict is stale: the prediction memo
(``predict.clear_prediction_cache``), the plugin's memo across cycles, and the engine's failure memo
and refused slot kinds (both derived from verdicts). The next cycle then offers every waiting job,
not only the new arrivals, since an older one may be admissible now.

``compare`` (and ``python -m scheduler.sim.online_interference``) runs the comparison of
docs/benchmarks.md §11: on one trace and cluster, ``ours`` with a fixed model against ``ours`` with
the online model, each from (a) the model trained on every Gavel family pair and (b) a model that
never saw a held-out fraction of the family pairs (the cluster meets new combinations).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from scheduler.interference.datasets import PairRecord, load_datasets
from scheduler.interference.features import normalize_gpu_type
from scheduler.interference.models import InterferenceModel
from scheduler.interference.online import OnlinePredictor, family_pair_split
from scheduler.interference.online_model import OnlineModel
from scheduler.interference.predict import clear_prediction_cache
from scheduler.model import GPU_MILLI
from scheduler.policy.registry import Policy, make_policy
from scheduler.sim.cluster import ClusterSpec, load_cluster_spec
from scheduler.sim.engine import SimConfig, SimResult, Simulator
from scheduler.sim.metrics import summarise
from scheduler.sim.perf import PerfModel, load_perf_model
from scheduler.sim.records import _Job
from scheduler.sim.trace import TraceJob, load_trace

DEFAULT_MAX_PER_PAIR = 20


def with_model(policy: Policy, model: Any) -> Policy:
    """``policy`` whose ``sim_interference`` plugin predicts with ``model`` (not the model file)."""
    profile = policy.profile
    if "sim_interference" not in profile.plugin_names():
        raise ValueError(f"policy {policy.name!r} has no sim_interference plugin to give a model to")
    args = {k: dict(v) for k, v in profile.args.items()}
    args.setdefault("sim_interference", {})["model"] = model
    return replace(policy, profile=replace(profile, args=args))


class OnlineSimulator(Simulator):
    """The simulator with an online model that learns from the co-locations it observes."""

    def __init__(
        self,
        jobs: list[TraceJob],
        spec: ClusterSpec,
        policy: Policy,
        perf: PerfModel,
        model: OnlineModel,
        config: SimConfig | None = None,
        max_per_pair: int = DEFAULT_MAX_PER_PAIR,
    ) -> None:
        super().__init__(jobs, spec, with_model(policy, model), perf, config)
        self.model = model
        self.max_per_pair = max_per_pair
        self._seen: set[tuple[int, int, int]] = set()  # (job, job, GPU) co-locations measured
        self._per_pair: Counter[tuple[int, int]] = Counter()  # job-type pair -> measurements fed
        self.observed = 0  # co-locations seen, fed or not
        # The model changed since the last cycle: every waiting job is offered again.
        self._learnt = False

    def _cycle(self, now: float, only: list[_Job] | None) -> None:
        # A co-location only begins with a placement, and placements happen in cycles (a drain's
        # moves too): looking after each cycle sees every one, however short.
        super()._cycle(now, None if self._learnt else only)
        self._learnt = self._observe()

    def _observe(self) -> bool:
        """Feed every new two-job co-location to the model; True when it learnt something."""
        learnt = False
        for gid in sorted(self.shared_gids):
            tenants = self.tenants[gid]
            if len(tenants) != 2:
                continue
            a, b = sorted(tenants)
            if (a, b, gid) in self._seen:
                continue
            self._seen.add((a, b, gid))
            self.observed += 1
            ja, jb = self.jobs[a], self.jobs[b]
            pair = (min(ja.type_idx, jb.type_idx), max(ja.type_idx, jb.type_idx))
            if self._per_pair[pair] >= self.max_per_pair:
                continue
            self._per_pair[pair] += 1
            self.model.observe(self._measurement(ja, jb, gid))
            learnt = True
        if learnt:
            self._forget_verdicts()
        return learnt

    def _measurement(self, ja: _Job, jb: _Job, gid: int) -> PairRecord:
        """The co-location as the platform records it: both solo profiles (with the share each
        holds, as the plugin sees it) and the ground truth's normalised throughputs."""
        model = self.nodes[int(self.gpu_node[gid])].gpus[0].model

        def profile(job: _Job) -> dict[str, float | str]:
            assert job.request is not None
            task = job.request.tasks[0]
            return {**job.request.profile, "gpu_share": task.gpu_milli / GPU_MILLI}

        return PairRecord(
            dataset="sim",
            gpu_type=normalize_gpu_type(model),
            profile_a=profile(ja),
            profile_b=profile(jb),
            feasible=True,  # they ran together; an infeasible Gavel pair runs time-sliced (perf)
            norm_a=self.perf.norm(ja.type_idx, jb.type_idx),
            norm_b=self.perf.norm(jb.type_idx, ja.type_idx),
        )

    def _forget_verdicts(self) -> None:
        clear_prediction_cache()
        self.memo.clear()
        self.refused.clear()
        self.failed_classes.clear()


# ---------------------------------------------------------------------------------- the comparison


def fit_model(records: Sequence[PairRecord], seed: int = 0) -> InterferenceModel:
    """The model ``python -m scheduler interference train`` fits (same estimator and seed)."""
    return InterferenceModel.fit(list(records), seed=seed)


def _run(
    jobs: list[TraceJob],
    spec: ClusterSpec,
    perf: PerfModel,
    config: SimConfig,
    model: InterferenceModel,
    base: list[PairRecord],
    online: bool,
    max_per_pair: int,
    retrain_every: int,
) -> dict[str, Any]:
    clear_prediction_cache()
    policy = make_policy("ours")
    cpu0 = time.process_time()
    learner = OnlineModel(
        OnlinePredictor(base=base, fit=fit_model, model=model, correct=online), retrain_every=retrain_every
    )
    sim: Simulator
    if online:
        sim = OnlineSimulator(jobs, spec, policy, perf, learner, config, max_per_pair=max_per_pair)
    else:
        sim = Simulator(jobs, spec, with_model(policy, model), perf, config)
    result: SimResult = sim.run()
    summary = summarise(result)
    summary["cpu_s"] = round(time.process_time() - cpu0, 3)
    if isinstance(sim, OnlineSimulator):
        summary["co_locations_observed"] = sim.observed
        summary["measurements_fed"] = learner.measurements
        summary["job_type_pairs_measured"] = len(sim._per_pair)
        summary["retrains"] = learner.predictor.retrains - 1
    return summary


def compare(
    trace_path: Path,
    cluster: str,
    data_dir: Path,
    *,
    start: int = 0,
    limit: int | None = None,
    seed: int = 0,
    held_out_fraction: float = 0.2,
    split_seed: int = 0,
    max_per_pair: int = DEFAULT_MAX_PER_PAIR,
    retrain_every: int = 0,
) -> dict[str, Any]:
    """Static against online ``ours`` from the full and the held-out model (module docstring)."""
    trace = load_trace(trace_path, seed=seed)
    spec = load_cluster_spec(cluster, data_dir)
    perf = load_perf_model(data_dir / "interference" / "gavel", spec.gavel_gpu_type)
    jobs = trace.jobs[start : start + limit] if limit else trace.jobs[start:]
    if start and jobs:
        origin = jobs[0].submit
        jobs = [replace(j, submit=j.submit - origin) for j in jobs]
    config = SimConfig(seed=seed)
    records = load_datasets(data_dir, ["gavel"])
    _, held_groups = family_pair_split(records, held_out_fraction, split_seed)
    held = set(held_groups)
    seen = [r for r in records if r.group not in held]
    models = {"all_pairs": (fit_model(records, seed), records), "held_out": (fit_model(seen, seed), seen)}
    runs: dict[str, Any] = {}
    for start_model, (model, base) in models.items():
        for online in (False, True):
            name = f"{'online' if online else 'static'}_{start_model}"
            runs[name] = _run(jobs, spec, perf, config, model, base, online, max_per_pair, retrain_every)
    jct = {name: r["avg_jct_s"] for name, r in runs.items()}
    return {
        "trace": str(trace_path),
        "jobs": len(jobs),
        "first_job": start,
        "cluster": {"name": spec.name, "total_gpus": spec.total_gpus, "gavel_gpu_type": spec.gavel_gpu_type},
        "config": {"seed": seed, "round_s": config.round_s, "slowdown_tolerance": config.slowdown_tolerance},
        "online": {
            "max_per_pair": max_per_pair,
            "retrain_every": retrain_every,
            "held_out_fraction": held_out_fraction,
            "split_seed": split_seed,
            "held_out_family_pairs": held_groups,
        },
        "runs": runs,
        "avg_jct_ratio_online_vs_static": {
            start_model: _ratio(jct[f"online_{start_model}"], jct[f"static_{start_model}"])
            for start_model in models
        },
    }


def _ratio(a: float, b: float) -> float:
    return a / b if b else math.nan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scheduler.sim.online_interference", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--held-out-fraction", type=float, default=0.2)
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--max-per-pair", type=int, default=DEFAULT_MAX_PER_PAIR)
    parser.add_argument(
        "--retrain-every", type=int, default=0, help="measurements between retrains (0: never)"
    )
    parser.add_argument("--json", type=Path, required=True, help="write the report here")
    args = parser.parse_args(argv)
    if not 0 < args.held_out_fraction < 1:
        print("error: --held-out-fraction must be between 0 and 1", file=sys.stderr)
        return 2
    try:
        report = compare(
            args.trace,
            args.cluster,
            args.data,
            start=args.start,
            limit=args.limit,
            seed=args.seed,
            held_out_fraction=args.held_out_fraction,
            split_seed=args.split_seed,
            max_per_pair=args.max_per_pair,
            retrain_every=args.retrain_every,
        )
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from scheduler import provenance

    gavel = args.data / "interference" / "gavel"
    report["provenance"] = provenance.collect(
        [args.trace, gavel / "gavel_isolated_throughputs.csv", gavel / "gavel_pairs_single_gpu.csv"]
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    for name, run in report["runs"].items():
        print(f"{name}: avg JCT {run['avg_jct_s'] / 3600:.3f} h, {run['cpu_s']:.1f} CPU-s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
