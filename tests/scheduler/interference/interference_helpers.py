"""Small synthetic co-location data with a known law, for the interference tests.

Law: each job has a solo SM utilisation ``u`` (percent) and memory-bandwidth utilisation ``m``; the
measured normalised throughput of job i next to j is ``min(1, 100 / (u_i + u_j)) * (1 - m_j / 400)``
plus a little noise. Seven model families, three batch sizes each, on one GPU type.
"""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import numpy as np

from scheduler.interference.datasets import PairRecord

FAMILIES = ("alpha", "beta", "gamma", "delta", "eps", "zeta", "eta")


def law(u_i: float, u_j: float, m_j: float) -> float:
    return min(1.0, 100.0 / (u_i + u_j)) * (1.0 - m_j / 400.0)


def synthetic_jobs(seed: int = 0) -> list[dict[str, float | str]]:
    rng = np.random.default_rng(seed)
    jobs: list[dict[str, float | str]] = []
    for f_i, family in enumerate(FAMILIES):
        base_u = 25.0 + 10.0 * f_i
        for batch in (32, 64, 128):
            u = float(min(99.0, base_u + batch / 8 + rng.uniform(-3, 3)))
            m = float(rng.uniform(5, 60))
            jobs.append(
                {
                    "job_key": f"syn:{family}/bs{batch}",
                    "model_family": family,
                    "batch_size": float(batch),
                    "amp": 0.0,
                    "gpu_util": u,
                    "mem_util": m,
                    "gpu_memory_mib": float(1000 + 20 * batch),
                    "solo_throughput": float(5000 / batch),
                }
            )
    return jobs


def synthetic_records(seed: int = 0, noise: float = 0.01) -> list[PairRecord]:
    rng = np.random.default_rng(seed + 1)
    jobs = synthetic_jobs(seed)
    out = []
    for a, b in itertools.combinations_with_replacement(range(len(jobs)), 2):
        ja, jb = jobs[a], jobs[b]
        ya = law(float(ja["gpu_util"]), float(jb["gpu_util"]), float(jb["mem_util"])) + rng.normal(0, noise)
        yb = law(float(jb["gpu_util"]), float(ja["gpu_util"]), float(ja["mem_util"])) + rng.normal(0, noise)
        out.append(
            PairRecord(
                dataset="lucid",
                gpu_type="rtx3090",
                mechanism="time_slicing",
                profile_a=dict(ja),
                profile_b=dict(jb),
                feasible=True,
                norm_a=float(ya),
                norm_b=float(yb),
            )
        )
    return out


def write_lucid_format(folder: Path, records: list[PairRecord]) -> None:
    """Write records in Lucid's ``colocate_info.csv`` + ``single_data.csv`` schema."""
    folder.mkdir(parents=True, exist_ok=True)
    solos: dict[str, dict[str, float | str]] = {}
    with (folder / "colocate_info.shared.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            [
                "row_id",
                "model1",
                "dataset1",
                "gpu_num1",
                "batchsize1",
                "amp1",
                "speed1",
                "model2",
                "dataset2",
                "gpu_num2",
                "batchsize2",
                "amp2",
                "speed2",
                "gpu_util",
                "gmem_util",
                "gmem",
            ]
        )
        for i, r in enumerate(records):
            pa, pb = r.profile_a, r.profile_b
            solos[str(pa["job_key"])] = pa
            solos[str(pb["job_key"])] = pb
            w.writerow(
                [
                    i,
                    pa["model_family"],
                    "Syn",
                    1,
                    int(float(pa["batch_size"])),
                    0,
                    f"{r.norm_a:.4f}",
                    pb["model_family"],
                    "Syn",
                    1,
                    int(float(pb["batch_size"])),
                    0,
                    f"{r.norm_b:.4f}",
                    0,
                    0,
                    0,
                ]
            )
    with (folder / "single_data.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            ["model", "dataset", "batchsize", "amp", "speed", "gpu_util", "gmem_util", "gmem", "label"]
        )
        for p in solos.values():
            w.writerow(
                [
                    p["model_family"],
                    "Syn",
                    int(float(p["batch_size"])),
                    0,
                    p["solo_throughput"],
                    p["gpu_util"],
                    p["mem_util"],
                    p["gpu_memory_mib"],
                    0,
                ]
            )


GAVEL_HEADER = [
    "gpu_type",
    "job_a",
    "family_a",
    "batch_size_a",
    "job_b",
    "family_b",
    "batch_size_b",
    "iso_tput_a",
    "iso_tput_b",
    "coloc_tput_a",
    "coloc_tput_b",
    "feasible",
    "norm_tput_a",
    "norm_tput_b",
    "slowdown_a",
    "slowdown_b",
    "capped_a",
    "capped_b",
]


def write_gavel_format(path: Path, records: list[PairRecord], infeasible_every: int = 0) -> None:
    """Write records in Gavel's tidy pair schema (every ``infeasible_every``-th pair recorded as 0.0)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(GAVEL_HEADER)
        for i, r in enumerate(records):
            pa, pb = r.profile_a, r.profile_b
            ia, ib = float(pa["solo_throughput"]), float(pb["solo_throughput"])
            off = infeasible_every and i % infeasible_every == 0
            na, nb = ("", "") if off else (f"{r.norm_a:.5f}", f"{r.norm_b:.5f}")
            ca, cb = (0.0, 0.0) if off else (ia * r.norm_a, ib * r.norm_b)
            w.writerow(
                [
                    "v100",
                    f"{pa['model_family']} (batch size {int(float(pa['batch_size']))})",
                    pa["model_family"],
                    int(float(pa["batch_size"])),
                    f"{pb['model_family']} (batch size {int(float(pb['batch_size']))})",
                    pb["model_family"],
                    int(float(pb["batch_size"])),
                    ia,
                    ib,
                    ca,
                    cb,
                    0 if off else 1,
                    na,
                    nb,
                    "",
                    "",
                    0,
                    0,
                ]
            )
