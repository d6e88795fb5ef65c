"""Ground-truth job performance model of the simulator (measured data, not a predictor).

Job types are Gavel's 26 single-GPU workloads (``../shared/data/interference/gavel``). Every trace job
gets one job type; its *work* is the trace duration in isolated-seconds, and it progresses at a
*rate* in (0, 1]: ``finish = start + work / rate`` while the rate is constant.

Co-location (jobs sharing one GPU), from the measured pairs of the cluster's GPU type::

    y(i | j)   = coloc_tput_i / iso_tput_i           measured normalised throughput of i beside j
    s_i        = 1 + sum_{j in tenants, j != i} (1 / y(i | j) - 1)     rate_i = 1 / s_i

More than two jobs: the excess slowdowns add up (the composition rule of ``scheduler.interference``:
exact for ideal time slicing, where k saturating jobs each get 1/k; it reduces to the measured pair
for two jobs). No public data measure three or more training jobs on one GPU.

A pair measured as 0.0 (could not run together, most likely out of memory) runs time-sliced with a
context-switch overhead: ``y = INFEASIBLE_PAIR_NORM`` (0.45) for both. A pair missing from the shared
data (the held-out family pairs) uses the geometric mean of ``y(i | k)`` over every partner ``k`` that
*is* measured for ``i`` on that GPU type: the job's average sensitivity.

Communication of multi-GPU jobs (documented cost model; the trace duration is the job's time on an
ideal placement, a worse one stretches it)::

    step(B)  = (1 - c_f) + c_f * B_ref / B       B = bandwidth of the bottleneck link of the GPU set
    rate     = min(1, 1 / step(B))                B_ref = 24 GB/s (PCIe Gen4 x16 in NCCL's model)

``c_f`` is the family's share of a step spent in gradient exchange at ``B_ref`` (0.1-0.4). A job's rate is relative to the best placement of its GPU count on that
hardware (``best_link``), on which the trace measured it: ``rate = rate(actual) / rate(best)``. ``B`` per
link class, GB/s: NV# 100, PIX 20, PXB 16, PHB 12, NODE 12, SYS 10, and 6 between nodes (effective
all-reduce bandwidth of a 50 Gbit/s NIC). Calibration: Pollux's measured placements on 4-T4 nodes show
one node of 4 GPUs 1.05-1.5x slower per step than 2 GPUs, and 2+2 GPUs on two nodes 1.5-3.6x slower
than 4 on one; this model gives 1.1-1.6x inside a PCIe node and 1.3-2.2x across nodes. The bottleneck
of a GPU set is the weakest link needed to connect it (minimax spanning tree), what a ring or tree
all-reduce over the best links must cross.

GPU memory footprints (Gavel measures none) are estimates ``base_f + per_sample_f * batch`` in GiB of
PyTorch fp32 training at the paper's input sizes; they decide who may share a GPU (see
``scheduler.policy.packing``).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

INFEASIBLE_PAIR_NORM = 0.45
REFERENCE_BANDWIDTH_GBS = 24.0
LINK_BANDWIDTH_GBS: dict[str, float] = {
    "NV": 100.0,
    "PIX": 20.0,
    "PXB": 16.0,
    "PHB": 12.0,
    "NODE": 12.0,
    "SYS": 10.0,
    "NET": 6.0,
}

# Share of a step spent in gradient exchange at B_ref (c_f), by model family.
COMM_FRACTION: dict[str, float] = {
    "ResNet-18": 0.30,
    "ResNet-50": 0.25,
    "Transformer": 0.40,
    "LM": 0.30,
    "Recommendation": 0.35,
    "A3C": 0.10,
    "CycleGAN": 0.30,
}

# GPU memory estimate (GiB): base + per_sample * batch size.
MEMORY_MODEL_GIB: dict[str, tuple[float, float]] = {
    "ResNet-18": (1.0, 0.012),
    "ResNet-50": (1.5, 0.10),
    "Transformer": (1.5, 0.03),
    "LM": (1.5, 0.05),
    "Recommendation": (1.0, 0.0006),
    "A3C": (1.0, 0.0),
    "CycleGAN": (4.5, 0.0),
}


@dataclass(frozen=True)
class JobType:
    """One Gavel workload: ``name`` as in Gavel's files, e.g. ``ResNet-50 (batch size 64)``."""

    name: str
    family: str
    batch_size: int

    @property
    def memory_mib(self) -> int:
        base, per_sample = MEMORY_MODEL_GIB.get(self.family, (2.0, 0.0))
        return int(round((base + per_sample * self.batch_size) * 1024))

    @property
    def comm_fraction(self) -> float:
        return COMM_FRACTION.get(self.family, 0.3)


def parse_job_type(name: str) -> JobType:
    family, _, rest = name.partition(" (batch size ")
    batch = int(rest.rstrip(")")) if rest else 0
    return JobType(name=name, family=family.strip(), batch_size=batch)


@dataclass
class PerfModel:
    """Measured isolated throughputs and pairwise normalised throughputs for one GPU type."""

    gpu_type: str
    job_types: list[JobType]
    iso_tput: dict[str, float]
    # (a, b) -> normalised throughput of a beside b; missing key = not measured.
    pair_norm: dict[tuple[str, str], float] = field(default_factory=dict)
    _fallback: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._index = {t.name: i for i, t in enumerate(self.job_types)}
        logs: dict[str, list[float]] = {}
        for (a, _b), y in self.pair_norm.items():
            logs.setdefault(a, []).append(math.log(y))
        self._fallback = {a: math.exp(sum(v) / len(v)) for a, v in logs.items()}
        n = len(self.job_types)
        # Dense matrix by job-type index for the hot path.
        self.norm_matrix: list[list[float]] = [[0.0] * n for _ in range(n)]
        for i, ta in enumerate(self.job_types):
            for j, tb in enumerate(self.job_types):
                self.norm_matrix[i][j] = self._lookup(ta.name, tb.name)

    def index(self, name: str) -> int:
        return self._index[name]

    def _lookup(self, a: str, b: str) -> float:
        y = self.pair_norm.get((a, b))
        if y is not None:
            return y
        return self._fallback.get(a, 0.5)

    def norm(self, a: int, b: int) -> float:
        """Normalised throughput of job type ``a`` while sharing a GPU with job type ``b``."""
        return self.norm_matrix[a][b]

    def shared_rate(self, me: int, others: Iterable[int]) -> float:
        """rate = 1 / (1 + sum over co-tenants of (1 / y(me | other) - 1)); 1.0 alone."""
        slowdown = 1.0
        row = self.norm_matrix[me]
        for o in others:
            slowdown += 1.0 / row[o] - 1.0
        return 1.0 / slowdown


def comm_rate(comm_fraction: float, bottleneck: str | None) -> float:
    """rate = min(1, 1 / ((1 - c) + c * B_ref / B)); 1.0 for a single GPU (``bottleneck`` None)."""
    if bottleneck is None:
        return 1.0
    bw = LINK_BANDWIDTH_GBS.get(bottleneck, LINK_BANDWIDTH_GBS["SYS"])
    return min(1.0, 1.0 / ((1.0 - comm_fraction) + comm_fraction * REFERENCE_BANDWIDTH_GBS / bw))


LINK_ORDER = ("NV", "PIX", "PXB", "PHB", "NODE", "SYS", "NET")


def bottleneck_link(links: dict[tuple[int, int], str], gpus: Sequence[int]) -> str | None:
    """Weakest link class needed to connect ``gpus`` (minimax spanning tree); None for one GPU.

    ``links[(a, b)]`` is the class of the pair (a < b); a missing pair counts as SYS.
    """
    if len(gpus) <= 1:
        return None
    members = list(gpus)
    for level, cls in enumerate(LINK_ORDER):
        allowed = set(LINK_ORDER[: level + 1])
        parent = {g: g for g in members}

        def find(x: int, parent: dict[int, int] = parent) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                key = (a, b) if a < b else (b, a)
                if links.get(key, "SYS") in allowed:
                    parent[find(a)] = find(b)
        if len({find(g) for g in members}) == 1:
            return cls
    return "NET"


def best_link(links: dict[tuple[int, int], str], num_gpus: int, node_gpus: int) -> str | None:
    """Bottleneck link of the best ``num_gpus``-GPU set inside one node (None for one GPU, NET if it
    cannot fit one node): the reference placement a trace duration was measured on."""
    if num_gpus <= 1:
        return None
    if num_gpus > node_gpus:
        return "NET"
    members = list(range(node_gpus))
    for level, cls in enumerate(LINK_ORDER[:-1]):
        allowed = set(LINK_ORDER[: level + 1])
        parent = {g: g for g in members}

        def find(x: int, parent: dict[int, int] = parent) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                if links.get((a, b), "SYS") in allowed:
                    parent[find(a)] = find(b)
        sizes: dict[int, int] = {}
        for g in members:
            root = find(g)
            sizes[root] = sizes.get(root, 0) + 1
        if max(sizes.values()) >= num_gpus:
            return cls
    return "SYS"


def load_perf_model(gavel_dir: Path, gpu_type: str) -> PerfModel:
    """Read Gavel's tidy CSVs for ``gpu_type`` (k80, p100 or v100)."""
    iso_path = gavel_dir / "gavel_isolated_throughputs.csv"
    pairs_path = gavel_dir / "gavel_pairs_single_gpu.csv"
    for path in (iso_path, pairs_path):
        if not path.is_file():
            raise FileNotFoundError(f"Gavel throughput file not found: {path}")
    iso: dict[str, float] = {}
    with iso_path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            if row["worker_type"] == gpu_type and row["scale_factor"] == "1":
                iso[row["job_type"]] = float(row["iso_tput_simulation"])
    if not iso:
        raise ValueError(f"no Gavel isolated throughputs for GPU type {gpu_type!r}")
    pairs: dict[tuple[str, str], float] = {}
    with pairs_path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            if row["gpu_type"] != gpu_type:
                continue
            a, b = row["job_a"], row["job_b"]
            if row["feasible"] == "1":
                ya = min(1.0, float(row["norm_tput_a"]))
                yb = min(1.0, float(row["norm_tput_b"]))
            else:
                ya = yb = INFEASIBLE_PAIR_NORM
            pairs[(a, b)] = ya
            pairs[(b, a)] = yb
    types = sorted((parse_job_type(n) for n in iso), key=lambda t: t.name)
    return PerfModel(gpu_type=gpu_type, job_types=types, iso_tput=iso, pair_norm=pairs)
