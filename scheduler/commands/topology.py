"""``python -m scheduler topology``: evaluate the parallelizer, or place one request.

* ``evaluate --topologies DIR --json OUT.json [--plot OUT.png]``: every matrix in DIR (plus two
  synthetic 16-GPU nodes for the decision-time target), single requests vs. the exhaustive optimum and
  the baselines, and the sequential-arrival experiment (``scheduler.bench.topology.evaluate``).
* ``place --topology FILE --gpus N [--busy 0,3] [--running 4,5]``: the chosen set and its predicted
  cost, beside besteffort's and first fit's choices.
* ``show --topology FILE``: the parsed matrix and the effective bandwidth of every pair.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

from scheduler.bench.topology.baselines import besteffort, first_fit
from scheduler.commands import CommandError
from scheduler.datapaths import default_data_dir, results_dir
from scheduler.topology.cost import CommProfile, allreduce_time, pair_bandwidth, ring_bandwidth
from scheduler.topology.graph import Topology
from scheduler.topology.parser import TopologyParseError, read_topology_file
from scheduler.topology.placer import choose_set
from scheduler.topology.tables import MAX_TABLE_GPUS, tables_for


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("topology", help="topology-aware GPU-set placement: evaluate, place, show")
    sub = parser.add_subparsers(dest="topology_command", metavar="ACTION", required=True)

    ev = sub.add_parser("evaluate", help="benchmark against the exhaustive optimum and the baselines")
    ev.add_argument(
        "--topologies", type=Path, default=default_data_dir() / "topologies", help="folder of *.txt"
    )
    ev.add_argument("--json", type=Path, default=results_dir() / "topology_eval.json", help="output JSON")
    ev.add_argument("--plot", type=Path, default=None, help="output PNG")
    ev.add_argument("--states", type=int, default=20, help="random occupancy states per topology")
    ev.add_argument("--requests", type=int, default=300, help="requests in the sequential stream")
    ev.add_argument("--load", type=float, default=0.8, help="offered GPU load of the stream (0-1)")
    ev.add_argument("--seed", type=int, default=1)
    ev.add_argument("--streams", type=int, default=5, help="seeded request streams (seed, seed+1, ...)")
    ev.add_argument("--no-synthetic", action="store_true", help="skip the synthetic 16-GPU nodes")
    ev.set_defaults(func=_evaluate)

    pl = sub.add_parser("place", help="choose GPUs for one request on one node")
    _topology_args(pl)
    pl.add_argument("--gpus", type=int, required=True, help="GPUs requested")
    pl.add_argument("--busy", default="", help="comma-separated busy GPU indices, e.g. 0,3")
    pl.add_argument(
        "--running", action="append", default=[], help="GPUs of one running job (repeatable), e.g. 4,5"
    )
    pl.add_argument("--gradient-mb", type=float, default=100.0, help="all-reduce size per iteration")
    pl.add_argument("--compute-s", type=float, default=0.2, help="compute time per iteration")
    pl.set_defaults(func=_place)

    sh = sub.add_parser("show", help="print the parsed matrix and pair bandwidths")
    _topology_args(sh)
    sh.set_defaults(func=_show)


def _topology_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topology", type=Path, required=True, help="nvidia-smi topo -m output file")
    parser.add_argument(
        "--gpu-model", default=None, help="GPU model for link speeds (default: guessed from the file name)"
    )


def _load(args: argparse.Namespace) -> Topology:
    try:
        return read_topology_file(str(args.topology), gpu_model=args.gpu_model or args.topology.stem)
    except TopologyParseError as exc:
        raise CommandError(str(exc)) from None


def _indices(text: str, n: int, what: str) -> list[int]:
    out: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if not part.isdigit() or int(part) >= n:
            raise CommandError(f"{what}: '{part}' is not a GPU index of this {n}-GPU node")
        out.append(int(part))
    return out


def _gbps(value: float) -> str:
    return "no communication" if math.isinf(value) else f"{value:.1f} GB/s"


def _place(args: argparse.Namespace) -> int:
    topo = _load(args)
    n = topo.gpu_count
    running = [tuple(_indices(r, n, "--running")) for r in args.running]
    busy = set(_indices(args.busy, n, "--busy")) | {g for r in running for g in r}
    free = [g for g in range(n) if g not in busy]
    if args.gpus < 1:
        raise CommandError("--gpus must be at least 1")
    if args.gpus > len(free):
        raise CommandError(f"{args.gpus} GPU(s) requested but only {len(free)} of {n} are free")
    job = CommProfile(compute_s=args.compute_s, message_bytes=args.gradient_mb * 1e6)
    start = time.perf_counter()
    if n <= MAX_TABLE_GPUS:
        tables_for(topo)
    build_ms = (time.perf_counter() - start) * 1e3
    start = time.perf_counter()
    choice = choose_set(topo, free, args.gpus, running=running, job=job)
    elapsed_ms = (time.perf_counter() - start) * 1e3
    assert choice is not None  # enough GPUs are free
    links = sorted({topo.link(i, j) for i in choice.gpus for j in choice.gpus if i < j})
    print(f"topology: {args.topology.name} ({n} GPUs, {topo.generation.name}, nvswitch={topo.is_nvswitch})")
    print(f"free GPUs: {','.join(map(str, free))}")
    print(
        f"chosen: GPUs {','.join(map(str, choice.gpus))}  links {'/'.join(links) or '-'}  "
        f"ring {_gbps(choice.ring_gbps)}  all-reduce {args.gradient_mb:g} MB {choice.comm_s * 1e3:.2f} ms  "
        f"iteration {choice.iteration_s * 1e3:.2f} ms  (decided in {elapsed_ms:.2f} ms; tables built in {build_ms:.1f} ms)"
    )
    for name, pick in (
        ("besteffort", besteffort(topo, free, args.gpus)),
        ("first-fit", first_fit(topo, free, args.gpus)),
    ):
        if pick is None:
            print(f"{name}: not evaluated (too many partitions)")
            continue
        ring = ring_bandwidth(topo, pick, running=running) if n <= 9 else math.nan
        comm = allreduce_time(len(pick), ring, job.message_bytes) if not math.isnan(ring) else math.nan
        print(f"{name}: GPUs {','.join(map(str, pick))}  ring {_gbps(ring)}  all-reduce {comm * 1e3:.2f} ms")
    return 0


def _show(args: argparse.Namespace) -> int:
    topo = _load(args)
    n = topo.gpu_count
    b = pair_bandwidth(topo)
    print(f"{args.topology.name}: {n} GPUs, generation {topo.generation.name}, nvswitch={topo.is_nvswitch}")
    print("      " + "".join(f"{f'GPU{j}':>9}" for j in range(n)))
    for i in range(n):
        cells = "".join(f"{topo.link(i, j) + ('' if i == j else f' {b[i, j]:.0f}'):>9}" for j in range(n))
        print(f"GPU{i:<3}" + cells)
    if topo.nics:
        print("NICs: " + ", ".join(topo.nics))
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from scheduler.bench.topology.evaluate import evaluate, load_topologies, synthetic_16

    if not args.topologies.is_dir():
        raise CommandError(f"--topologies: {args.topologies} is not a folder (see ../shared/data/topologies)")
    if not 0 < args.load < 1:
        raise CommandError("--load must be between 0 and 1")
    try:
        topologies = load_topologies(args.topologies)
    except TopologyParseError as exc:
        raise CommandError(str(exc)) from None
    if not topologies:
        raise CommandError(f"--topologies: no *.txt matrices in {args.topologies}")
    if not args.no_synthetic:
        topologies += synthetic_16()
    started = time.time()
    if args.streams < 1 or args.requests < 1 or args.states < 0:
        raise CommandError("--streams and --requests must be at least 1, --states at least 0")
    result = evaluate(
        topologies,
        states=args.states,
        requests=args.requests,
        seed=args.seed,
        load=args.load,
        streams=args.streams,
    )
    result["config"] = {
        "topologies": str(args.topologies),
        "states": args.states,
        "requests": args.requests,
        "streams": args.streams,
        "load": args.load,
        "seed": args.seed,
        "comm_profile": vars(CommProfile()),
        "elapsed_s": round(time.time() - started, 1),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2, default=_json_default) + "\n")
    _print_summary(result)
    print(f"wrote {args.json}")
    if args.plot:
        _plot(result, args.plot)
        print(f"wrote {args.plot}")
    return 0


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, tuple):
        return list(value)
    return str(value)


def _print_summary(result: dict[str, Any]) -> None:
    print(
        f"{'topology':34} {'gpus':>4} {'single=opt':>10} {'ideal ours/be/ff/rnd':>22} {'med ms':>7} {'p99 ms':>7}"
    )
    for name, r in result["topologies"].items():
        seq = r["sequential"]
        ideal = "/".join(
            str(seq[p]["ideal_placements"]) for p in ("ours", "besteffort", "first_fit", "random")
        )
        t = r["single"]["decision_time"]
        print(
            f"{name:34} {r['gpus']:>4} {r['single']['ours_equals_optimum_pct']:>9.1f}% {ideal:>22} "
            f"{t['median_ms']:>7.3f} {t['p99_ms']:>7.3f}"
        )


def _plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = list(result["topologies"])
    policies = ("ours", "besteffort", "first_fit", "random")
    fig, axes = plt.subplots(2, 1, figsize=(12, 8), sharex=True)
    x = np.arange(len(names))
    width = 0.2
    for k, p in enumerate(policies):
        single = [
            result["topologies"][nm]["single"]["mean_bandwidth_ratio_to_optimum"][p] or 0 for nm in names
        ]
        seq = [
            result["topologies"][nm]["sequential"][p]["ideal_placements"]
            / max(1, result["topologies"][nm]["sequential"][p]["multi_gpu_placed"])
            for nm in names
        ]
        axes[0].bar(x + (k - 1.5) * width, single, width, label=p)
        axes[1].bar(x + (k - 1.5) * width, seq, width, label=p)
    axes[0].set_ylabel("mean ring bandwidth / optimum\n(single requests)")
    axes[1].set_ylabel("multi-GPU requests with an\nidle-node-optimal set (sequential)")
    axes[0].legend(ncol=4, fontsize=8)
    axes[1].set_xticks(x, names, rotation=60, ha="right", fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
