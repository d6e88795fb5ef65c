"""``python -m scheduler interference train|evaluate``: build and measure the interference model.

``train --data DIR --out MODEL [--datasets gavel,lucid] [--estimator NAME] [--exclude-family NAME ...]``
fits the model on the pairs under DIR (default: the datasets the platform may use commercially, i.e.
Gavel and the platform's own records) and writes a joblib artefact (default
``var/models/interference.joblib``, folder overridable by ``GPU_PLATFORM_MODEL_DIR``).
``--exclude-family`` drops every pair in which either job is of that model family, so a cluster can
start from a model that has never seen the families it is about to run (and learn them by retraining).

``pack-study --data DIR --json OUT.json`` compares ways of deciding pack / don't pack under nested
grouped cross-validation (``scheduler.bench.interference.pack_study``).

``online --data DIR [--reveal PAIRS.csv] --json OUT.json [--plot OUT.png]`` measures what learning
from the platform's own co-location measurements buys on unseen model-family pairs
(``scheduler.interference.online``).

``evaluate --model MODEL --data DIR [--test CSV ...] --json OUT.json [--plot OUT.png]`` runs grouped
cross-validation (folds = unordered model-family pairs) of the model's configuration and of the
baseline estimators on the datasets under DIR, applies MODEL itself to each ``--test`` CSV (same
format as the shared Gavel or Lucid pair files), measures the latency of one placement decision and
writes the per-dataset metrics (see ``scheduler.bench.interference.evaluate``).
"""

from __future__ import annotations

import argparse
import json
import platform as _platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from scheduler.bench.interference.evaluate import (
    cross_validate,
    metrics,
    panels_for,
    plot_predicted_vs_measured,
    time_decision,
)
from scheduler.commands import CommandError
from scheduler.datapaths import default_data_dir
from scheduler.interference.datasets import (
    KNOWN_DATASETS,
    PERMISSIVE_DATASETS,
    DatasetError,
    PairRecord,
    available_datasets,
    load_datasets,
    load_test_csv,
)
from scheduler.interference.models import DEFAULT_ESTIMATOR, ESTIMATORS, InterferenceModel
from scheduler.interference.store import ModelError, default_model_path, load_model, save_model


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("interference", help="train and evaluate the interference model")
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    train = sub.add_parser("train", help="fit the model on measured pairs and save it")
    train.add_argument("--data", type=Path, default=None, help="shared data folder (default ../shared/data)")
    train.add_argument("--out", type=Path, default=None, help=f"model file (default {default_model_path()})")
    train.add_argument(
        "--datasets",
        default=None,
        help=f"comma-separated, of {','.join(KNOWN_DATASETS)} (default: the permissive ones present: "
        f"{','.join(PERMISSIVE_DATASETS)}; Lucid is non-commercial, research only)",
    )
    train.add_argument("--estimator", choices=ESTIMATORS, default=DEFAULT_ESTIMATOR)
    train.add_argument("--threads", type=int, default=1, help="OpenMP/BLAS threads for fitting (default 1)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument(
        "--exclude-family",
        action="append",
        default=[],
        metavar="NAME",
        help="leave out every pair in which either job is of this model family (repeatable)",
    )
    train.set_defaults(func=run_train)

    ev = sub.add_parser("evaluate", help="grouped cross-validation, held-out test files, latency")
    ev.add_argument("--model", type=Path, default=None, help=f"model file (default {default_model_path()})")
    ev.add_argument("--data", type=Path, default=None, help="shared data folder (default ../shared/data)")
    ev.add_argument("--test", type=Path, action="append", default=[], help="held-out pair CSV (repeatable)")
    ev.add_argument("--json", type=Path, required=True, help="where to write the metrics")
    ev.add_argument("--plot", type=Path, default=None, help="predicted-vs-measured PNG")
    ev.add_argument("--folds", type=int, default=5)
    ev.add_argument(
        "--compare",
        default=",".join(ESTIMATORS),
        help="estimators to cross-validate beside the model's own (comma-separated; empty = none)",
    )
    ev.add_argument("--no-cv", action="store_true", help="skip cross-validation (test files only)")
    ev.add_argument("--threads", type=int, default=1, help="OpenMP/BLAS threads for fitting (default 1)")
    ev.set_defaults(func=run_evaluate)

    ps = sub.add_parser(
        "pack-study", help="nested grouped CV of pack-decision methods (thresholds chosen by inner CV)"
    )
    ps.add_argument("--data", type=Path, default=None, help="shared data folder (default ../shared/data)")
    ps.add_argument("--datasets", default=None, help="comma-separated (default: the permissive ones)")
    ps.add_argument("--json", type=Path, required=True, help="where to write the study")
    ps.add_argument("--folds", type=int, default=5)
    ps.add_argument("--threads", type=int, default=1, help="OpenMP/BLAS threads for fitting (default 1)")
    ps.set_defaults(func=run_pack_study)

    on = sub.add_parser(
        "online",
        help="measured benefit of learning from own co-locations (held-out family pairs revealed one by one)",
    )
    on.add_argument("--data", type=Path, default=None, help="shared data folder (default ../shared/data)")
    on.add_argument(
        "--reveal",
        type=Path,
        default=None,
        help="held-out pairs CSV (Gavel pair schema) to reveal, instead of random family-pair splits",
    )
    on.add_argument("--json", type=Path, required=True, help="where to write final, curve and splits")
    on.add_argument("--plot", type=Path, default=None, help="curve PNG (MAE and pack accuracy)")
    on.add_argument("--splits", type=int, default=5, help="random family-pair splits (default 5)")
    on.add_argument(
        "--fraction", type=float, default=0.2, help="share of family pairs held out (default 0.2)"
    )
    on.add_argument("--max-per-pair", type=int, default=20, help="measurements revealed per held-out pair")
    on.add_argument(
        "--retrain-every",
        type=int,
        default=0,
        help="refit the model every K measurements (default 0: never; the correction learns at once)",
    )
    on.add_argument("--own-weight", type=int, default=3, help="copies of each own measurement when refitting")
    on.add_argument(
        "--shrink",
        default="2,4,4",
        help="pseudo-counts of the correction's levels: family pair, + GPU, job next to family (default 2,4,4)",
    )
    on.add_argument("--no-correction", action="store_true", help="retraining only, no residual correction")
    on.add_argument("--estimator", choices=ESTIMATORS, default=DEFAULT_ESTIMATOR)
    on.add_argument("--seed", type=int, default=0)
    on.add_argument("--threads", type=int, default=1, help="OpenMP/BLAS threads for fitting (default 1)")
    on.set_defaults(func=run_online_benchmark)


def _data_dir(arg: Path | None) -> Path:
    path = arg or default_data_dir()
    if not path.is_dir():
        raise CommandError(f"data folder not found: {path} (pass --data DIR)")
    return path


def _datasets(arg: str | None, data_dir: Path) -> list[str]:
    present = available_datasets(data_dir)
    if arg is None:
        chosen = [d for d in PERMISSIVE_DATASETS if d in present]
        if not chosen:
            raise CommandError(
                f"no permissively licensed pair data under {data_dir} (expected interference/gavel)"
            )
        return chosen
    chosen = [d.strip() for d in arg.split(",") if d.strip()]
    for d in chosen:
        if d not in KNOWN_DATASETS:
            raise CommandError(f"unknown dataset {d!r}; known: {', '.join(KNOWN_DATASETS)}")
        if d not in present:
            raise CommandError(f"dataset {d!r} not found under {data_dir}")
    return chosen


def _records(data_dir: Path, datasets: list[str]) -> list[PairRecord]:
    try:
        return load_datasets(data_dir, datasets)
    except DatasetError as exc:
        raise CommandError(str(exc)) from None


def _limit_threads(n: int) -> Any:
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=max(1, n))


def _family(profile: dict[str, Any]) -> str:
    return str(profile.get("model_family", ""))


def exclude_families(records: list[PairRecord], families: list[str]) -> list[PairRecord]:
    """The records in which neither job is of one of ``families``; an unknown family is an error."""
    if not families:
        return records
    known = sorted({_family(r.profile_a) for r in records} | {_family(r.profile_b) for r in records})
    unknown = [f for f in families if f not in known]
    if unknown:
        raise CommandError(f"unknown model family {unknown[0]!r}; known: {', '.join(known)}")
    drop = set(families)
    kept = [r for r in records if _family(r.profile_a) not in drop and _family(r.profile_b) not in drop]
    if not kept:
        raise CommandError(f"no pairs left after excluding {', '.join(families)}")
    return kept


def run_train(args: argparse.Namespace) -> int:
    data_dir = _data_dir(args.data)
    datasets = _datasets(args.datasets, data_dir)
    out = args.out or default_model_path()
    all_records = _records(data_dir, datasets)
    records = exclude_families(all_records, args.exclude_family)
    if args.exclude_family:
        print(
            f"excluded families {', '.join(args.exclude_family)}: "
            f"{len(all_records) - len(records)} of {len(all_records)} pairs left out"
        )
    t0 = time.perf_counter()
    with _limit_threads(args.threads):
        try:
            model = InterferenceModel.fit(records, estimator=args.estimator, seed=args.seed)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
    model.meta["data_dir"] = str(data_dir)
    if args.exclude_family:
        model.meta["excluded_families"] = sorted(set(args.exclude_family))
    save_model(model, out)
    print(f"trained {model.describe()} in {time.perf_counter() - t0:.1f} s -> {out}")
    if model.research_only:
        print("note: trained on non-commercial data (Lucid): research and evaluation use only")
    return 0


def _cv_block(
    records: list[PairRecord], estimator: str, folds: int, extras: bool
) -> tuple[dict[str, Any], Any]:
    t0 = time.perf_counter()
    y, yq, p = cross_validate(records, estimator, folds=folds, extras=extras)
    block: dict[str, Any] = {"metrics": metrics(records, y, yq, p), "seconds": time.perf_counter() - t0}
    return block, y


def run_evaluate(args: argparse.Namespace) -> int:
    data_dir = _data_dir(args.data)
    try:
        model = load_model(args.model or default_model_path())
    except ModelError as exc:
        raise CommandError(str(exc)) from None
    datasets = [d for d in model.datasets if d in available_datasets(data_dir)]
    report: dict[str, Any] = {
        "model": {
            "path": str(args.model or default_model_path()),
            "estimator": model.estimator,
            "datasets": list(model.datasets),
            "research_only": model.research_only,
            "pairs": model.n_pairs,
            "gpu_types": list(model.gpu_types),
            "quantile_alpha": model.quantile_alpha,
            "created": model.created,
        },
        "method": (
            "GroupKFold over unordered model-family pairs; y = normalised co-located throughput clipped "
            "to (0, 1]; pack iff feasible and y_A + y_B > 1"
        ),
        "machine": {
            "python": _platform.python_version(),
            "processor": _platform.processor() or _platform.machine(),
        },
    }
    panels: dict[str, Any] = {}
    with _limit_threads(args.threads):
        try:
            records = load_datasets(data_dir, datasets) if datasets else []
            tests = [(path, load_test_csv(path, data_dir)) for path in args.test]
        except DatasetError as exc:
            raise CommandError(str(exc)) from None
        if records and not args.no_cv:
            cv: dict[str, Any] = {"folds": args.folds, "datasets": datasets, "estimators": {}}
            block, y = _cv_block(records, model.estimator, args.folds, extras=True)
            cv["model"] = {"estimator": model.estimator, **block}
            panels.update(panels_for(records, y, " (grouped CV)"))
            names = [n.strip() for n in args.compare.split(",") if n.strip()]
            for name in names:
                if name not in ESTIMATORS:
                    raise CommandError(f"unknown estimator {name!r}; known: {', '.join(ESTIMATORS)}")
                # Comparison runs fit the regressors only; feasibility uses the training share.
                cv["estimators"][name], _ = _cv_block(records, name, args.folds, extras=False)
            report["cross_validation"] = cv
        report["test"] = {}
        for path, test_records in tests:
            y, yq, p = model.predict_records(test_records)
            report["test"][str(path)] = metrics(test_records, y, yq, p)
            panels.update(panels_for(test_records, y, f" ({path.name})"))
        profiles = [r.profile_a for r in (records or [r for _, t in tests for r in t])][:200]
        gpu = model.gpu_types[0] if model.gpu_types else "v100"
        if profiles:
            report["latency"] = {
                "with_model": time_decision(model, profiles, gpu),
                "analytic_only": time_decision(None, profiles, gpu),
            }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(_finite(report), indent=2, sort_keys=False) + "\n")
    if args.plot is not None and panels:
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        plot_predicted_vs_measured(panels, str(args.plot), f"interference model: {model.describe()}")
    _print_summary(report)
    print(f"wrote {args.json}" + (f" and {args.plot}" if args.plot is not None and panels else ""))
    return 0


def run_pack_study(args: argparse.Namespace) -> int:
    from scheduler.bench.interference.pack_study import nested_pack_study

    data_dir = _data_dir(args.data)
    datasets = _datasets(args.datasets, data_dir)
    records = _records(data_dir, datasets)
    t0 = time.perf_counter()
    with _limit_threads(args.threads):
        study = nested_pack_study(records, folds=args.folds)
    study["datasets"] = datasets
    study["seconds"] = time.perf_counter() - t0
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(_finite(study), indent=2) + "\n")
    base = study["always_pack"]
    print(f"always pack: {base['all_pairs']:.3f} (all pairs), {base['feasible_pairs']:.3f} (feasible pairs)")
    for name, acc in study["candidates"].items():
        print(f"{name:<20} {acc['all_pairs']:.3f} (all pairs), {acc['feasible_pairs']:.3f} (feasible pairs)")
    print(f"wrote {args.json}")
    return 0


def run_online_benchmark(args: argparse.Namespace) -> int:
    from scheduler.interference.online import OnlineConfig, default_fit, plot_online, run_online

    for name in ("splits", "max_per_pair", "own_weight"):
        if getattr(args, name) < 1:
            raise CommandError(f"--{name.replace('_', '-')} must be at least 1")
    if args.retrain_every < 0:
        raise CommandError("--retrain-every must be 0 (never) or more")
    if not 0 < args.fraction < 1:
        raise CommandError("--fraction must be between 0 and 1")
    try:
        shrink = tuple(float(v) for v in args.shrink.split(","))
    except ValueError:
        raise CommandError("--shrink must be three numbers, e.g. 2,4,4") from None
    if len(shrink) != 3 or min(shrink) <= 0:
        raise CommandError("--shrink must be three numbers > 0, e.g. 2,4,4")
    data_dir = _data_dir(args.data)
    try:
        records = load_datasets(data_dir, ["gavel"])
        reveal = load_test_csv(args.reveal, data_dir) if args.reveal is not None else None
    except DatasetError as exc:
        raise CommandError(str(exc)) from None
    if reveal is not None:
        if not reveal or any(r.dataset != "gavel" for r in reveal):
            raise CommandError(f"{args.reveal}: expected pairs in the Gavel pair schema")
        held = {r.group for r in reveal}
        # Pairs present in both would be scored after training on themselves.
        records = [r for r in records if r.group not in held]
    config = OnlineConfig(
        max_per_pair=args.max_per_pair,
        retrain_every=args.retrain_every,
        own_weight=args.own_weight,
        correct=not args.no_correction,
        shrink=shrink,
        seed=args.seed,
    )
    t0 = time.perf_counter()
    with _limit_threads(args.threads):
        try:
            report = run_online(
                records,
                config,
                splits=args.splits,
                fraction=args.fraction,
                reveal=reveal,
                fit=default_fit(args.seed, args.estimator),
                progress=lambda line: print(line, file=sys.stderr, flush=True),
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
    report = {
        "method": (
            "hold out whole model-family pairs; reveal their measurements one per pair per round in a "
            "random order; score MAE (y clipped to (0, 1]) and pack accuracy (pack iff feasible and "
            "y_A + y_B > 1) on the held-out rows not yet revealed (scheduler.interference.online)"
        ),
        "config": {
            **{k: v for k, v in config.__dict__.items() if k != "seed"},
            "seed": args.seed,
            "estimator": args.estimator,
            "splits": 1 if reveal is not None else args.splits,
            "fraction": args.fraction,
            "reveal": str(args.reveal) if args.reveal is not None else None,
            "data": str(data_dir),
        },
        "seconds": time.perf_counter() - t0,
        **report,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(_finite(report), indent=2) + "\n")
    if args.plot is not None:
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        plot_online(report["curve"], str(args.plot))
    f, s = report["final"], report["start"]
    print(
        f"after {f['measurements_per_pair']} measurements per unseen family pair: MAE {f['mae']:.4f} "
        f"(static model {f['static_mae']:.4f}; {s['mae']:.4f} before any), pack accuracy "
        f"{f['pack_accuracy']:.3f} (static {f['static_pack_accuracy']:.3f}, always-pack "
        f"{f['always_pack_accuracy']:.3f})"
    )
    print(f"wrote {args.json}" + (f" and {args.plot}" if args.plot is not None else ""))
    return 0


def _finite(value: Any) -> Any:
    """JSON has no NaN: write null instead."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def _print_summary(report: dict[str, Any]) -> None:
    rows: list[tuple[str, dict[str, Any]]] = []
    cv = report.get("cross_validation")
    if cv:
        rows += [(f"cv {cv['model']['estimator']} {ds}", m) for ds, m in cv["model"]["metrics"].items()]
        for name, block in cv["estimators"].items():
            rows += [(f"cv {name} (regressor only) {ds}", m) for ds, m in block["metrics"].items()]
    for path, per in report.get("test", {}).items():
        rows += [(f"test {Path(path).name} {ds}", m) for ds, m in per.items()]
    for label, m in rows:
        print(
            f"{label:<48} MAE {m['mae']:.4f}  R2 {m['r2']:.3f}  MAPE(s) {m['mape_slowdown']:.3f}  "
            f"pack {m['pack_accuracy']:.3f} (always {m['always_pack_accuracy']:.3f}; feasible pairs "
            f"{m['pack_accuracy_feasible_pairs']:.3f} vs {m['always_pack_accuracy_feasible_pairs']:.3f})"
        )
    lat = report.get("latency", {}).get("with_model")
    if lat:
        print(
            f"one decision, {lat['candidates']} candidate GPUs: {lat['median_ms_per_candidate']:.3f} ms per candidate"
        )
