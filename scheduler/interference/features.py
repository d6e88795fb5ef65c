"""Features of a job co-located with a partner on one GPU.

A *profile* is a job's solo measurement (``JobRequest.profile``; keys below, all optional):

============== =====================================================================
key            meaning
============== =====================================================================
gpu_util       mean GPU (SM) utilisation when alone, percent 0..100
mem_util       mean memory-controller (DRAM bandwidth) utilisation alone, percent
gpu_memory_mib GPU memory footprint alone, MiB
solo_throughput throughput alone (samples or steps per second, as the job reports it)
batch_size     training batch size
amp            1.0 with mixed precision, else 0.0
model_family   e.g. "ResNet-50"; used only to group cross-validation folds
job_key        stable identity of the job configuration (fingerprint look-up)
============== =====================================================================

For an *ordered* pair (self ``s``, other ``o``) on GPU ``g`` the vector holds, in order
(:data:`FEATURE_NAMES`): the solo features of s and of o; pair features ``util_sum = u_s + u_o``,
``util_prod = u_s * u_o / 100``, ``mem_util_sum``, ``mem_util_prod``, ``mem_frac_sum = (m_s + m_o) /
M_g`` and ``|u_s - u_o|``; GPU specs (memory GiB, bandwidth GB/s, FP32 TFLOPS) and the mechanism
(1 = MPS, 0 = time slicing, NaN unknown); then *fingerprints* (Gavel/Paragon style) learnt from the
training pairs: ``sens`` = mean normalised throughput of a job over its measured partners (how much it
suffers), ``agg`` = mean normalised throughput of its partners (how much it hurts), ``infeas`` = share
of its pairs that could not run, and ``sens_s * agg_o``. Unknown values are NaN.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduler.interference.datasets import PairRecord, Profile

PROFILE_KEYS: tuple[str, ...] = (
    "gpu_util",
    "mem_util",
    "gpu_memory_mib",
    "solo_throughput",
    "batch_size",
    "amp",
    "model_family",
    "job_key",
)

# name -> (memory GiB, memory bandwidth GB/s, dense FP32 TFLOPS), from vendor data sheets.
# K80: one GK210 die of the board (what a Gavel worker used).
GPU_SPECS: dict[str, tuple[float, float, float]] = {
    "k80": (12.0, 240.0, 4.4),
    "p100": (16.0, 732.0, 9.3),
    "v100": (16.0, 900.0, 15.7),
    "t4": (16.0, 320.0, 8.1),
    "rtx3090": (24.0, 936.0, 35.6),
    "a10": (24.0, 600.0, 31.2),
    "a100": (40.0, 1555.0, 19.5),
    "a100-80gb": (80.0, 2039.0, 19.5),
    "l40s": (48.0, 864.0, 91.6),
    "h100": (80.0, 3350.0, 67.0),
    "h200": (141.0, 4800.0, 67.0),
}

JOB_FEATURES: tuple[str, ...] = ("gpu_util", "mem_util", "mem_frac", "log_tput", "log_batch", "amp")
PAIR_FEATURES: tuple[str, ...] = (
    "util_sum",
    "util_prod",
    "mem_util_sum",
    "mem_util_prod",
    "mem_frac_sum",
    "util_absdiff",
)
GPU_FEATURES: tuple[str, ...] = ("gpu_mem_gib", "gpu_bw", "gpu_tflops", "mech_mps")
FINGERPRINT_FEATURES: tuple[str, ...] = (
    "sens_s",
    "agg_s",
    "infeas_s",
    "sens_o",
    "agg_o",
    "infeas_o",
    "sens_s_x_agg_o",
)
FEATURE_NAMES: tuple[str, ...] = (
    tuple(f"s_{n}" for n in JOB_FEATURES)
    + tuple(f"o_{n}" for n in JOB_FEATURES)
    + PAIR_FEATURES
    + GPU_FEATURES
    + FINGERPRINT_FEATURES
)
N_BASE = len(FEATURE_NAMES) - len(FINGERPRINT_FEATURES)


def normalize_gpu_type(name: str) -> str:
    """Map a GPU model string ("NVIDIA H200", "Tesla V100-SXM2-16GB", "v100") to a GPU_SPECS key."""
    s = name.lower().replace(" ", "").replace("geforce", "").replace("nvidia", "").replace("tesla", "")
    if "a100" in s and "80" in s:
        return "a100-80gb"
    for key in sorted(GPU_SPECS, key=len, reverse=True):
        if key in s:
            return key
    return s


def gpu_spec(gpu_type: str) -> tuple[float, float, float]:
    return GPU_SPECS.get(normalize_gpu_type(gpu_type), (math.nan, math.nan, math.nan))


def _num(profile: Profile, key: str) -> float:
    value = profile.get(key)
    if value is None or isinstance(value, str):
        return math.nan
    return float(value)


def job_vector(profile: Profile, gpu_mem_gib: float) -> list[float]:
    """Solo features of one job, in :data:`JOB_FEATURES` order."""
    mem = _num(profile, "gpu_memory_mib")
    tput = _num(profile, "solo_throughput")
    batch = _num(profile, "batch_size")
    return [
        _num(profile, "gpu_util"),
        _num(profile, "mem_util"),
        mem / (gpu_mem_gib * 1024.0) if gpu_mem_gib > 0 else math.nan,
        math.log(tput) if tput > 0 else math.nan,
        math.log2(batch) if batch > 0 else math.nan,
        _num(profile, "amp"),
    ]


def _mechanism_code(mechanism: str) -> float:
    m = mechanism.lower()
    if "mps" in m:
        return 1.0
    if m in ("time_slicing", "timeslicing", "time-slicing", "default"):
        return 0.0
    return math.nan


@dataclass
class Fingerprints:
    """Per-job interference fingerprints learnt from measured pairs.

    For job ``j`` with measured partners ``P(j)`` (feasible pairs) and ``T(j)`` (all pairs):
    ``sens(j) = (sum_{p in P} y_j|p + k * ybar) / (|P| + k)``, ``agg(j)`` likewise over the partners'
    ``y_p|j``, and ``infeas(j) = (#infeasible + k * rbar) / (|T| + k)``, shrunk towards the training
    means ``ybar``/``rbar`` with ``k = 1`` so a job seen with few partners is not over-trusted.
    """

    stats: dict[str, list[float]] = field(default_factory=dict)
    ybar: float = 0.8
    rbar: float = 0.0
    shrink: float = 1.0

    @staticmethod
    def _contributions(records: Iterable[PairRecord]) -> Iterable[tuple[str, float, float, bool]]:
        for r in records:
            ka, kb = str(r.profile_a.get("job_key", "")), str(r.profile_b.get("job_key", ""))
            ya, yb = clip_y(r.norm_a), clip_y(r.norm_b)
            yield ka, ya, yb, r.feasible
            yield kb, yb, ya, r.feasible

    @classmethod
    def fit(cls, records: Sequence[PairRecord]) -> Fingerprints:
        fp = cls()
        ys = [y for _, y, _, ok in cls._contributions(records) if ok]
        fp.ybar = float(np.mean(ys)) if ys else 0.8
        fp.rbar = float(np.mean([not r.feasible for r in records])) if records else 0.0
        fp.stats = _accumulate(cls._contributions(records))
        return fp

    def lookup(self, key: str, minus: list[float] | None = None) -> tuple[float, float, float]:
        """(sens, agg, infeas) of ``key``; ``minus`` removes some contributions (out-of-group use)."""
        s = self.stats.get(key)
        if s is None:
            return (math.nan, math.nan, math.nan)
        if minus is not None:
            s = [a - b for a, b in zip(s, minus, strict=True)]
        sum_y, n_y, sum_p, n_inf, n_all = s
        if n_all <= 0:
            return (math.nan, math.nan, math.nan)
        k = self.shrink
        return (
            (sum_y + k * self.ybar) / (n_y + k),
            (sum_p + k * self.ybar) / (n_y + k),
            (n_inf + k * self.rbar) / (n_all + k),
        )


def _accumulate(items: Iterable[tuple[str, float, float, bool]]) -> dict[str, list[float]]:
    stats: dict[str, list[float]] = {}
    for key, y_self, y_partner, ok in items:
        if not key:
            continue
        s = stats.setdefault(key, [0.0, 0.0, 0.0, 0.0, 0.0])
        if ok:
            s[0] += y_self
            s[1] += 1.0
            s[2] += y_partner
        else:
            s[3] += 1.0
        s[4] += 1.0
    return stats


def clip_y(y: float, floor: float = 0.01) -> float:
    """Normalised throughput clipped to [floor, 1]: readings > 1 are measurement noise, not speed-up."""
    if math.isnan(y):
        return y
    return min(1.0, max(floor, y))


def ordered_features(
    pairs: Sequence[tuple[Profile, Profile, str, str]],
    fingerprints: Fingerprints | None,
) -> np.ndarray:
    """Feature matrix (n, len(FEATURE_NAMES)) for ordered (self, other, gpu_type, mechanism) tuples.

    A placement decision repeats the same few profiles across many candidate GPUs, so job vectors,
    GPU specs and fingerprints are computed once per distinct object and the pair columns in NumPy.
    """
    n = len(pairs)
    x = np.full((n, len(FEATURE_NAMES)), np.nan)
    if n == 0:
        return x
    specs: dict[tuple[str, str], list[float]] = {}
    jobs: dict[tuple[int, str], list[float]] = {}
    g_rows: list[list[float]] = []
    s_rows: list[list[float]] = []
    o_rows: list[list[float]] = []
    for ps, po, gpu_type, mechanism in pairs:
        g = specs.get((gpu_type, mechanism))
        if g is None:
            g = [*gpu_spec(gpu_type), _mechanism_code(mechanism)]
            specs[(gpu_type, mechanism)] = g
        for prof, rows in ((ps, s_rows), (po, o_rows)):
            key = (id(prof), gpu_type)
            v = jobs.get(key)
            if v is None:
                v = job_vector(prof, g[0])
                jobs[key] = v
            rows.append(v)
        g_rows.append(g)
    js, jo, gs = np.array(s_rows), np.array(o_rows), np.array(g_rows)
    k = len(JOB_FEATURES)
    x[:, :k] = js
    x[:, k : 2 * k] = jo
    us, uo, ms, mo = js[:, 0], jo[:, 0], js[:, 1], jo[:, 1]
    pair = 2 * k
    x[:, pair] = us + uo
    x[:, pair + 1] = us * uo / 100.0
    x[:, pair + 2] = ms + mo
    x[:, pair + 3] = ms * mo / 100.0
    x[:, pair + 4] = js[:, 2] + jo[:, 2]
    x[:, pair + 5] = np.abs(us - uo)
    x[:, pair + len(PAIR_FEATURES) : N_BASE] = gs
    if fingerprints is not None:
        looked: dict[str, tuple[float, float, float]] = {}
        fs_rows: list[tuple[float, float, float]] = []
        fo_rows: list[tuple[float, float, float]] = []
        for ps, po, _, _ in pairs:
            for prof, f_rows in ((ps, fs_rows), (po, fo_rows)):
                key_s = str(prof.get("job_key", ""))
                f = looked.get(key_s)
                if f is None:
                    f = fingerprints.lookup(key_s)
                    looked[key_s] = f
                f_rows.append(f)
        fs, fo = np.array(fs_rows), np.array(fo_rows)
        x[:, N_BASE : N_BASE + 3] = fs
        x[:, N_BASE + 3 : N_BASE + 6] = fo
        x[:, N_BASE + 6] = fs[:, 0] * fo[:, 1]
    return x


@dataclass
class OrderedTable:
    """Ordered rows (A given B, and B given A) built from unordered pair records."""

    x: np.ndarray
    y: np.ndarray  # clipped normalised throughput of self; NaN when infeasible
    y_raw: np.ndarray  # as measured
    feasible: np.ndarray  # bool
    groups: np.ndarray  # str: dataset:familyA|familyB
    datasets: np.ndarray  # str
    pair_index: np.ndarray  # int: index of the unordered record (rows 2i and 2i+1)


def ordered_table(
    records: Sequence[PairRecord],
    fingerprints: Fingerprints | None = None,
    out_of_group: bool = False,
) -> OrderedTable:
    """Two ordered rows per record.

    With ``out_of_group`` the fingerprints of each row are computed from ``records`` *minus* every
    record of the row's own family-pair group: a training row then sees what a test row of an unseen
    pair sees, so the model learns how far to trust fingerprints. Otherwise ``fingerprints`` (fitted
    on the training set) are looked up as they are.
    """
    tuples: list[tuple[Profile, Profile, str, str]] = []
    for r in records:
        tuples.append((r.profile_a, r.profile_b, r.gpu_type, r.mechanism))
        tuples.append((r.profile_b, r.profile_a, r.gpu_type, r.mechanism))
    x = ordered_features(tuples, None if out_of_group else fingerprints)
    if out_of_group:
        _fill_out_of_group(x, records)
    y_raw = np.array([v for r in records for v in (r.norm_a, r.norm_b)], dtype=float)
    y = np.array([clip_y(v) for v in y_raw])
    feasible = np.array([r.feasible for r in records for _ in (0, 1)], dtype=bool)
    groups = np.array([r.group for r in records for _ in (0, 1)], dtype=object)
    datasets = np.array([r.dataset for r in records for _ in (0, 1)], dtype=object)
    pair_index = np.repeat(np.arange(len(records)), 2)
    return OrderedTable(x, y, y_raw, feasible, groups, datasets, pair_index)


def _fill_out_of_group(x: np.ndarray, records: Sequence[PairRecord]) -> None:
    full = Fingerprints.fit(records)
    by_group: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        by_group.setdefault(r.group, []).append(i)
    y_all = [v for r in records if r.feasible for v in (clip_y(r.norm_a), clip_y(r.norm_b))]
    n_infeasible = sum(not r.feasible for r in records)
    for idx in by_group.values():
        members = [records[i] for i in idx]
        inside = _accumulate(Fingerprints._contributions(members))
        # The shrinkage prior must not see the group either.
        y_in = [v for r in members if r.feasible for v in (clip_y(r.norm_a), clip_y(r.norm_b))]
        rest = len(records) - len(members)
        fp = Fingerprints(
            stats=full.stats,
            ybar=(sum(y_all) - sum(y_in)) / (len(y_all) - len(y_in)) if len(y_all) > len(y_in) else full.ybar,
            rbar=(n_infeasible - sum(not r.feasible for r in members)) / rest if rest else full.rbar,
            shrink=full.shrink,
        )
        for i in idx:
            r = records[i]
            ka, kb = str(r.profile_a.get("job_key", "")), str(r.profile_b.get("job_key", ""))
            fa = fp.lookup(ka, inside.get(ka))
            fb = fp.lookup(kb, inside.get(kb))
            x[2 * i, N_BASE:] = (*fa, *fb, fa[0] * fb[1])
            x[2 * i + 1, N_BASE:] = (*fb, *fa, fb[0] * fa[1])
