"""``python -m scheduler results run|check``: re-run the published result set and compare it with the
committed files.

``run --data DIR --out DIR [--set sim|frag|all] [--only NAME ...] [--jobs 2]`` runs every result of the
set as its own ``python -m scheduler simulate`` (or ``frag``) process, at most ``--jobs`` at a time
(default 2), longest first, and writes the JSON (and the PNG where one is committed) under ``--out``
with the committed file names. The sim set is the 10 runs of docs/benchmarks/sim.md (seed 0, all 7
policies); the full Philly run is split into a baselines and an ours process and merged, as it was
made. The frag set is the FGD benchmark files of docs/benchmarks/frag.md (seeds 42-51).

The children run with ``OPENBLAS_CORETYPE`` pinned (default ``Haswell``, the kernel the committed set
was made with): the FGD fragmentation score is a BLAS matrix-vector product whose rounding depends on
the kernel OpenBLAS picks for the CPU, and near-ties between nodes then go the other way (the
``ours`` run on the Philly Oct slice gives 4.045 h with the Haswell kernel, 4.028 h with SkylakeX).
``run`` refuses to start without a trained interference model (``make models``) unless
``--allow-analytic``: the set was made with one.

``check --against docs/results --rerun DIR [--only NAME ...]`` compares every JSON of the re-run with
the committed file of the same name, field by field and exactly (``--rel-tol`` to loosen), ignoring
only wall-clock and speed fields and ``provenance``; input paths compare by their last three parts
(the data folder may sit elsewhere). It prints each differing field and exits 1 when anything
differs, 0 when all are identical.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.commands import CommandError
from scheduler.datapaths import default_data_dir, results_dir

ALL_POLICIES = ("k8s", "fifo", "sjf", "tiresias", "gandiva", "gpushare", "ours")
PHILLY = "traces/philly/philly_jobs_2017-09-04_to_2017-11-30.csv"
FRAG_NODES = "alibaba-gpu-2023/openb_node_list_gpu_node.csv"
FRAG_SEEDS = "42-51"
FRAG_BASELINES = ("random", "dot_product", "gpu_clustering", "gpu_packing", "best_fit", "fgd")
FRAG_WORKLOADS = (
    "default", "cpu050", "cpu100", "cpu200", "cpu250", "gpushare40", "gpushare80", "gpushare100",
    "gpuspec10", "gpuspec20", "gpuspec25", "gpuspec33", "multigpu20", "multigpu40", "multigpu50",
)  # fmt: skip
FRAG_UNSEEN = ("cpu0", "cpu037", "cpu072", "cpu235", "cpu300", "gpushare20", "gpuspec05")
DEFAULT_CORETYPE = "Haswell"

# Fields that measure the machine, not the decisions; and where the run came from.
IGNORED_KEYS = frozenset(
    {
        "provenance",
        "wall_s",
        "cpu_s",
        "jobs_per_s",
        "jobs_per_cpu_s",
        "wall_seconds",
        "schedule_seconds",
        "schedule_cpu_seconds",
        "placements_per_second",
        "placements_per_cpu_second",
    }
)
# Input file paths: the data folder may be given differently (relative, absolute, elsewhere).
PATH_KEYS = frozenset({"trace", "traces", "nodes", "pods"})


@dataclass(frozen=True)
class Unit:
    """One child process: its argument list (after ``python -m scheduler``) and the JSON it writes."""

    name: str
    argv: tuple[str, ...]
    json_name: str
    cost: float  # CPU-seconds of the committed run, to start the longest first


@dataclass
class Result:
    """One committed file: the units that make it, merged when there are several."""

    name: str  # file stem, e.g. sim_philly_oct
    kind: str  # sim or frag
    units: list[Unit] = field(default_factory=list)
    plot: bool = True


def _sim(
    name: str,
    traces: Sequence[str],
    cluster: str,
    cost: float,
    extra: Sequence[str] = (),
    split: bool = False,
) -> tuple[str, list[tuple[str, Sequence[str], float]]]:
    base = [a for t in traces for a in ("--trace", "{data}/" + t)] + ["--cluster", cluster, *extra]
    base += ["--data", "{data}", "--seed", "0", "--quiet"]
    if not split:
        return name, [("", base + _policies(ALL_POLICIES), cost)]
    rest = tuple(p for p in ALL_POLICIES if p != "ours")
    return name, [
        ("baselines", base + _policies(rest), cost * 0.7),
        ("ours", base + _policies(["ours"]), cost * 0.3),
    ]


def _policies(names: Sequence[str]) -> list[str]:
    return [a for n in names for a in ("--policy", n)]


def sim_set() -> list[Result]:
    """The 10 runs of docs/benchmarks/sim.md ("Commands"); costs are the committed runs' CPU-seconds."""
    pollux = [f"traces/pollux-workloads/workloads-2.0/workload-{i}.csv" for i in range(1, 9)]
    saturn = [f"traces/sia-workloads/saturn/workload-{i}.csv" for i in range(1, 11)]
    itp = "traces/itp-elasticflow/raw/cluster{:02d}.csv"
    runs = [
        _sim("sim_pollux_2x", pollux, "pollux-t4-64", 7),
        _sim("sim_sia_saturn", saturn, "pollux-t4-64", 4),
        _sim("sim_itp_cluster02", [itp.format(2)], "itp-a100-96", 17),
        _sim("sim_itp_cluster08", [itp.format(8)], "itp-a100-64", 63),
        _sim("sim_philly_oct", [PHILLY], "philly-256", 15, ["--start", "5657", "--limit", "5000"]),
        _sim("sim_philly", [PHILLY], "philly-512", 190, split=True),
        _sim("sim_itp_cluster06", [itp.format(6)], "itp-a100-96", 5),
        _sim("sim_itp_cluster09", [itp.format(9)], "itp-a100-32", 61),
        _sim("sim_philly_sep", [PHILLY], "philly-256", 20, ["--start", "0", "--limit", "5657"]),
        _sim("sim_philly_nov", [PHILLY], "philly-256", 11, ["--start", "55000", "--limit", "5000"]),
    ]
    out = []
    for name, parts in runs:
        units = [
            Unit(
                f"{name}:{part}" if part else name,
                ("simulate", *argv),
                f"{name}.{part}.json" if part else f"{name}.json",
                cost,
            )
            for part, argv, cost in parts
        ]
        out.append(Result(name, "sim", units))
    return out


def frag_set() -> list[Result]:
    """The FGD benchmark files of docs/benchmarks/frag.md (the committed frag_*.json)."""

    def one(
        name: str,
        workload: str,
        policies: Sequence[str],
        cost: float,
        seeds: str = FRAG_SEEDS,
        plot: bool = False,
    ) -> Result:
        pods = f"{{data}}/alibaba-gpu-2023/openb_pod_list_{workload}.csv"
        argv = ("frag", "--nodes", "{data}/" + FRAG_NODES, "--pods", pods, *_policies(policies))
        argv += ("--seeds", seeds, "--quiet")
        return Result(name, "frag", [Unit(name, argv, f"{name}.json", cost)], plot=plot)

    out = [one(f"frag_baselines_{w}", w, FRAG_BASELINES, 110) for w in FRAG_WORKLOADS]
    out += [one(f"frag_default_{w}", w, ["default"], 60) for w in FRAG_WORKLOADS]
    out += [one(f"frag_unseen_{w}", w, ["fgd", "default"], 95) for w in FRAG_UNSEEN]
    comparison = ["k8s_default", "balance", "first_fit"]
    out.append(one("frag_comparison_default", "default", comparison, 61, seeds="42", plot=True))
    return out


def result_set(which: str) -> list[Result]:
    return {"sim": sim_set, "frag": frag_set, "all": lambda: sim_set() + frag_set()}[which]()


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "results",
        help="re-run the published result set; compare a re-run with the committed files",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    run_p = sub.add_parser("run", help="re-run the result set (at most --jobs processes at a time)")
    run_p.add_argument("--data", type=Path, default=None, help="shared data folder (default ../shared/data)")
    run_p.add_argument("--out", type=Path, default=None, help=f"output folder (default {results_dir()})")
    run_p.add_argument("--set", choices=("sim", "frag", "all"), default="sim", dest="which")
    run_p.add_argument("--only", action="append", default=[], metavar="NAME", help="e.g. sim_philly_oct")
    run_p.add_argument("--jobs", type=int, default=2, help="processes at a time (default 2)")
    run_p.add_argument(
        "--blas-coretype",
        default=DEFAULT_CORETYPE,
        help=f"OPENBLAS_CORETYPE for the runs (default {DEFAULT_CORETYPE}; empty: leave as it is)",
    )
    run_p.add_argument("--no-plots", action="store_true", help="JSON only")
    run_p.add_argument(
        "--allow-analytic", action="store_true", help="run even without a trained interference model"
    )
    run_p.set_defaults(func=run)
    check_p = sub.add_parser("check", help="compare a re-run with the committed files, field by field")
    check_p.add_argument(
        "--against", type=Path, default=None, help=f"committed files (default {results_dir()})"
    )
    check_p.add_argument("--rerun", type=Path, required=True, help="folder of the re-run")
    check_p.add_argument("--only", action="append", default=[], metavar="NAME", help="compare only these")
    check_p.add_argument(
        "--rel-tol", type=float, default=0.0, help="relative tolerance on numbers (default 0)"
    )
    check_p.add_argument(
        "--max-lines", type=int, default=40, help="differing fields printed per file (default 40)"
    )
    check_p.set_defaults(func=check)


# -- run ------------------------------------------------------------------------------------------


def _select(results: list[Result], only: Sequence[str]) -> list[Result]:
    if not only:
        return results
    known = {r.name for r in results}
    wanted = [n.removesuffix(".json") for n in only]
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise CommandError(f"unknown result {unknown[0]!r}; known: {', '.join(sorted(known))}")
    return [r for r in results if r.name in wanted]


def _cpu_has_avx2() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return False
    return " avx2" in flags and " fma" in flags


def child_env(coretype: str) -> dict[str, str]:
    """The environment of every run: ``OPENBLAS_CORETYPE`` pinned where the CPU can run that kernel."""
    env = dict(os.environ)
    if coretype:
        import platform as _platform

        if _platform.machine() in ("x86_64", "AMD64") and (coretype != "Haswell" or _cpu_has_avx2()):
            env["OPENBLAS_CORETYPE"] = coretype
        else:
            print(
                f"note: cannot pin OPENBLAS_CORETYPE={coretype} on this CPU; "
                "results may differ in near-ties from the committed set",
                file=sys.stderr,
            )
    return env


def run(args: argparse.Namespace) -> int:
    from scheduler.interference.store import cached_model

    data_dir: Path = args.data or default_data_dir()
    if not data_dir.is_dir():
        raise CommandError(f"data folder not found: {data_dir} (pass --data DIR)")
    if args.jobs < 1:
        raise CommandError("--jobs must be at least 1")
    out = args.out or results_dir()
    results = _select(result_set(args.which), args.only)
    model, note = cached_model()
    if model is None and not args.allow_analytic:
        raise CommandError(f"{note}; the result set was made with one: run `make models` first")
    out.mkdir(parents=True, exist_ok=True)
    env = child_env(args.blas_coretype)
    failed: list[str] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="results-") as tmp:
        stage = Path(tmp)
        # A result made by one process draws its own plot (the command knows which report to draw);
        # a split one is drawn after the merge.
        plotted = {u.name for r in results if r.plot and len(r.units) == 1 for u in r.units}
        if args.no_plots:
            plotted = set()
        units = sorted((u for r in results for u in r.units), key=lambda u: -u.cost)
        for unit, rc, seconds, log in _run_units(units, stage, data_dir, env, args.jobs, plotted):
            if rc == 0:
                print(f"done {unit.name} in {seconds:.0f} s", file=sys.stderr)
            else:
                failed.append(unit.name)
                tail = "\n".join(log.splitlines()[-5:])
                print(f"FAILED {unit.name} (exit {rc}):\n{tail}", file=sys.stderr)
        for r in results:
            if any(u.name in failed for u in r.units):
                continue
            _finish(r, stage, out, plots=not args.no_plots)
    print(
        f"{len(results) - len({f.split(':')[0] for f in failed})}/{len(results)} results written to {out} "
        f"in {time.perf_counter() - started:.0f} s",
        file=sys.stderr,
    )
    if failed:
        raise CommandError(f"{len(failed)} run(s) failed: {', '.join(failed)}")
    return 0


def _run_units(
    units: list[Unit], stage: Path, data_dir: Path, env: dict[str, str], jobs: int, plotted: set[str]
) -> Iterator[tuple[Unit, int, float, str]]:
    """Runs the units, at most ``jobs`` at a time; yields (unit, exit code, seconds, log) as each ends."""
    pending = list(units)
    running: list[tuple[Unit, subprocess.Popen[bytes], float, Any]] = []
    while pending or running:
        while pending and len(running) < jobs:
            unit = pending.pop(0)
            argv = [a.replace("{data}", str(data_dir)) for a in unit.argv]
            argv += ["--json", str(stage / unit.json_name)]
            if unit.name in plotted:
                argv += ["--plot", str(stage / unit.json_name.replace(".json", ".png"))]
            # Closed when the child ends (below), not at the end of a block: it outlives this loop.
            log = tempfile.TemporaryFile(dir=stage)  # noqa: SIM115
            proc = subprocess.Popen(
                [sys.executable, "-m", "scheduler", *argv], stdout=log, stderr=subprocess.STDOUT, env=env
            )
            running.append((unit, proc, time.perf_counter(), log))
        time.sleep(0.2)
        for item in list(running):
            unit, proc, t0, log = item
            rc = proc.poll()
            if rc is None:
                continue
            running.remove(item)
            log.seek(0)
            text = log.read().decode(errors="replace")
            log.close()
            yield unit, rc, time.perf_counter() - t0, text


def _finish(result: Result, stage: Path, out: Path, plots: bool) -> None:
    """Moves (or merges) a result's staged JSON and plot into ``out``."""
    if len(result.units) == 1:
        staged = stage / result.units[0].json_name
        shutil.copyfile(staged, out / f"{result.name}.json")
        png = staged.with_suffix(".png")
        if png.is_file():
            shutil.copyfile(png, out / f"{result.name}.png")
        return
    from scheduler.sim.runner import merge_reports

    reports = [json.loads((stage / u.json_name).read_text()) for u in result.units]
    report = merge_reports(reports)
    report["provenance"] = _merge_provenance([r.get("provenance") or {} for r in reports])
    (out / f"{result.name}.json").write_text(json.dumps(report, indent=1, default=float) + "\n")
    if plots and result.plot:
        from scheduler.bench.simulate.plots import plot_report

        plot_report(report, out / f"{result.name}.png")


def _merge_provenance(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """One block for a result made by several processes: models, fallbacks and files of all of them."""
    first = dict(blocks[0])
    models: dict[str, Any] = {}
    data: dict[str, Any] = {}
    notes: list[str] = []
    for b in blocks:
        for m in b.get("interference_model") or []:
            models.setdefault(m["path"], m)
        for d in b.get("data") or []:
            data.setdefault(d["path"], d)
        note = b.get("interference_fallback")
        if note and note not in notes:
            notes.append(note)
    first["interference_model"] = list(models.values()) or None
    first["interference_fallback"] = "; ".join(notes) or None
    first["data"] = list(data.values())
    first["merged_from"] = len(blocks)
    return first


# -- check ----------------------------------------------------------------------------------------


def compare(committed: Any, rerun: Any, rel_tol: float = 0.0, path: str = "") -> Iterator[str]:
    """Differing fields, one line each: ``path: committed A, re-run B``; ignores ``IGNORED_KEYS``."""
    if isinstance(committed, dict) and isinstance(rerun, dict):
        for key in committed:
            if key in IGNORED_KEYS:
                continue
            sub = f"{path}.{key}" if path else str(key)
            if key not in rerun:
                yield f"{sub}: missing in the re-run"
            elif key in PATH_KEYS:
                if _path_tail(committed[key]) != _path_tail(rerun[key]):
                    yield f"{sub}: committed {_short(committed[key])}, re-run {_short(rerun[key])}"
            else:
                yield from compare(committed[key], rerun[key], rel_tol, sub)
        for key in rerun:
            if key not in committed and key not in IGNORED_KEYS:
                yield f"{path}.{key}: only in the re-run" if path else f"{key}: only in the re-run"
        return
    if isinstance(committed, list) and isinstance(rerun, list):
        if len(committed) != len(rerun):
            yield f"{path}: committed {len(committed)} items, re-run {len(rerun)}"
            return
        for i, (a, b) in enumerate(zip(committed, rerun, strict=True)):
            yield from compare(a, b, rel_tol, f"{path}[{i}]")
        return
    if _numbers_equal(committed, rerun, rel_tol):
        return
    yield f"{path}: committed {_short(committed)}, re-run {_short(rerun)}"


def _numbers_equal(a: Any, b: Any, rel_tol: float) -> bool:
    if (
        isinstance(a, bool)
        or isinstance(b, bool)
        or not isinstance(a, int | float)
        or not isinstance(b, int | float)
    ):
        return bool(a == b and type(a) is type(b)) or (a is None and b is None)
    if math.isnan(a) and math.isnan(b):
        return True
    return a == b or (rel_tol > 0 and math.isclose(a, b, rel_tol=rel_tol))


def _path_tail(value: Any) -> Any:
    if isinstance(value, list):
        return [_path_tail(v) for v in value]
    if isinstance(value, str):
        return Path(value).parts[-3:]
    return value


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _context(committed: dict[str, Any], rerun: dict[str, Any]) -> list[str]:
    """Provenance differences worth knowing when fields differ (not differences themselves)."""
    a, b = committed.get("provenance") or {}, rerun.get("provenance") or {}
    if not a or not b:
        return [f"the {'committed file' if not a else 're-run'} records no provenance"]
    lines = []

    def models(p: dict[str, Any]) -> Any:
        return sorted(m.get("content_sha256") for m in p.get("interference_model") or []) or None

    pairs = [
        ("code commit", a.get("code", {}).get("commit"), b.get("code", {}).get("commit")),
        ("interference model content", models(a), models(b)),
        ("BLAS", a.get("environment", {}).get("blas"), b.get("environment", {}).get("blas")),
        (
            "NumPy SIMD",
            a.get("environment", {}).get("numpy_simd"),
            b.get("environment", {}).get("numpy_simd"),
        ),
        ("numeric env", a.get("environment", {}).get("variables"), b.get("environment", {}).get("variables")),
    ]
    for label, x, y in pairs:
        if x != y:
            lines.append(f"{label}: committed {_short(x)}, re-run {_short(y)}")
    return lines


def check(args: argparse.Namespace) -> int:
    against: Path = args.against or results_dir()
    for folder in (against, args.rerun):
        if not folder.is_dir():
            raise CommandError(f"{folder}: no such directory")
    wanted = {n.removesuffix(".json") for n in args.only}
    files = sorted(p for p in args.rerun.glob("*.json") if not wanted or p.stem in wanted)
    if not files:
        raise CommandError(f"{args.rerun}: no result JSON to compare" + (" (--only)" if wanted else ""))
    differing = 0
    for path in files:
        committed_path = against / path.name
        if not committed_path.is_file():
            print(f"{path.name}: no committed file of this name in {against}")
            differing += 1
            continue
        try:
            committed = json.loads(committed_path.read_text())
            rerun = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise CommandError(f"cannot read {path.name}: {exc}") from None
        diffs = list(compare(committed, rerun, args.rel_tol))
        if not diffs:
            print(f"{path.name}: identical")
            continue
        differing += 1
        print(f"{path.name}: {len(diffs)} differing field(s)")
        for line in diffs[: max(args.max_lines, 0)]:
            print(f"  {line}")
        if len(diffs) > args.max_lines:
            print(f"  ... and {len(diffs) - args.max_lines} more")
        for line in _context(committed, rerun):
            print(f"  context: {line}")
    ignored = ", ".join(sorted(IGNORED_KEYS))
    print(
        f"{len(files) - differing}/{len(files)} identical (ignoring {ignored}; paths by their last 3 parts)"
    )
    return 1 if differing else 0
