"""Loaders for measured co-location data into one tidy table of job pairs.

Every source becomes a list of :class:`PairRecord`: job A's solo profile, job B's solo profile, the GPU
type, the sharing mechanism (where known), the normalised co-located throughput of A and of B and
whether the pair could run together at all. Profiles are plain dicts with the keys of
``scheduler.interference.features.PROFILE_KEYS`` -- the same dicts the scheduler gets in
``JobRequest.profile`` -- so a model trained here reads the platform's own profiling records too.

Normalised throughput ``y = colocated throughput / solo throughput`` (1.0 = no interference); the
slowdown is ``1 / y``. Values are kept as measured (``norm_a``/``norm_b``); consumers clip to (0, 1].

Sources and their licences (see ``../shared/data/interference/*/README.md``):

* ``gavel``  -- K80/P100/V100 pairs of 26 job types, MIT: may train the platform's default model;
* ``lucid``  -- RTX 3090 pairs with per-job utilisation profiles, S-Lab licence (non-commercial):
  evaluation and research only;
* ``platform`` -- the platform's own pair measurements, in Lucid's schema (see :func:`load_profiled_pairs`).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

# Datasets whose licence lets the platform train the model it ships and uses by default.
PERMISSIVE_DATASETS: tuple[str, ...] = ("gavel", "platform")
KNOWN_DATASETS: tuple[str, ...] = ("gavel", "lucid", "platform")

Profile = dict[str, float | str]


class DatasetError(ValueError):
    """A data file is missing or malformed; the message is one line for the user."""


@dataclass
class PairRecord:
    """One measured co-location of two jobs on one GPU (unordered; A and B are symmetric)."""

    dataset: str
    gpu_type: str
    profile_a: Profile
    profile_b: Profile
    feasible: bool
    # Measured normalised throughputs; NaN when the pair could not run together.
    norm_a: float = math.nan
    norm_b: float = math.nan
    mechanism: str = ""
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def group(self) -> str:
        """Unordered model-family pair: the unit of grouped cross-validation."""
        fa = str(self.profile_a.get("model_family", ""))
        fb = str(self.profile_b.get("model_family", ""))
        lo, hi = sorted((fa, fb))
        return f"{self.dataset}:{lo}|{hi}"


def _float(value: str | None) -> float:
    if value is None or value.strip() == "":
        return math.nan
    return float(value)


def _read_csv(path: Path, required: Iterable[str]) -> list[dict[str, str]]:
    if not path.is_file():
        raise DatasetError(f"data file not found: {path}")
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise DatasetError(f"{path}: missing column(s) {', '.join(missing)}")
        return list(reader)


GAVEL_PAIR_COLUMNS = (
    "gpu_type",
    "job_a",
    "family_a",
    "batch_size_a",
    "job_b",
    "family_b",
    "batch_size_b",
    "iso_tput_a",
    "iso_tput_b",
    "feasible",
    "norm_tput_a",
    "norm_tput_b",
)
LUCID_PAIR_COLUMNS = (
    "model1",
    "dataset1",
    "batchsize1",
    "amp1",
    "speed1",
    "model2",
    "dataset2",
    "batchsize2",
    "amp2",
    "speed2",
)
LUCID_SINGLE_COLUMNS = ("model", "dataset", "batchsize", "amp", "speed", "gpu_util", "gmem_util", "gmem")


def _gavel_profile(gpu: str, job: str, family: str, batch: str, iso: str) -> Profile:
    profile: Profile = {
        "job_key": f"gavel:{gpu}:{job}",
        "model_family": family,
        "solo_throughput": _float(iso),
    }
    if batch.strip():
        profile["batch_size"] = _float(batch)
    return profile


def load_gavel_pairs(path: Path) -> list[PairRecord]:
    """Gavel's tidy pair table (``gavel_pairs_single_gpu.csv`` schema).

    Gavel gives job identity, batch size and isolated steps/s only (no utilisation profile).
    Mechanism: Gavel's workers ran co-located jobs as plain CUDA processes (MPS off by default).
    """
    rows = _read_csv(path, GAVEL_PAIR_COLUMNS)
    out = []
    for r in rows:
        gpu = r["gpu_type"].strip().lower()
        feasible = r["feasible"].strip() == "1"
        out.append(
            PairRecord(
                dataset="gavel",
                gpu_type=gpu,
                mechanism="time_slicing",
                profile_a=_gavel_profile(gpu, r["job_a"], r["family_a"], r["batch_size_a"], r["iso_tput_a"]),
                profile_b=_gavel_profile(gpu, r["job_b"], r["family_b"], r["batch_size_b"], r["iso_tput_b"]),
                feasible=feasible,
                norm_a=_float(r["norm_tput_a"]) if feasible else math.nan,
                norm_b=_float(r["norm_tput_b"]) if feasible else math.nan,
            )
        )
    return out


def _lucid_key(model: str, dataset: str, batch: str, amp: str) -> tuple[str, str, int, int]:
    return (model.strip(), dataset.strip(), int(float(batch)), int(float(amp)))


def load_solo_profiles(path: Path, dataset: str) -> dict[tuple[str, str, int, int], Profile]:
    """Solo profiles in Lucid's ``single_data.csv`` schema, keyed by (model, dataset, batch, amp)."""
    rows = _read_csv(path, LUCID_SINGLE_COLUMNS)
    out: dict[tuple[str, str, int, int], Profile] = {}
    for r in rows:
        key = _lucid_key(r["model"], r["dataset"], r["batchsize"], r["amp"])
        out[key] = {
            "job_key": f"{dataset}:{key[0]}/{key[1]}/bs{key[2]}/amp{key[3]}",
            "model_family": key[0],
            "batch_size": float(key[2]),
            "amp": float(key[3]),
            "solo_throughput": _float(r["speed"]),
            "gpu_util": _float(r["gpu_util"]),
            "mem_util": _float(r["gmem_util"]),
            "gpu_memory_mib": _float(r["gmem"]),
        }
    return out


def load_profiled_pairs(
    pairs_csv: Path,
    solo_csv: Path,
    dataset: str = "lucid",
    gpu_type: str = "rtx3090",
    mechanism: str = "time_slicing",
) -> list[PairRecord]:
    """Pairs in Lucid's ``colocate_info.csv`` schema joined with solo profiles from ``single_data.csv``.

    Optional per-row columns ``gpu_type`` and ``mechanism`` override the defaults (the platform's own
    measurements use them). Lucid's profiler started both processes with plain CUDA context sharing.
    Every pair in this schema ran (no OOM rows), so ``feasible`` is True unless a speed is 0 or empty.
    """
    solos = load_solo_profiles(solo_csv, dataset)
    rows = _read_csv(pairs_csv, LUCID_PAIR_COLUMNS)
    out = []
    for i, r in enumerate(rows):
        ka = _lucid_key(r["model1"], r["dataset1"], r["batchsize1"], r["amp1"])
        kb = _lucid_key(r["model2"], r["dataset2"], r["batchsize2"], r["amp2"])
        for key in (ka, kb):
            if key not in solos:
                raise DatasetError(f"{pairs_csv}: row {i + 1}: no solo profile for {key} in {solo_csv}")
        sa, sb = _float(r["speed1"]), _float(r["speed2"])
        feasible = sa > 0 and sb > 0
        out.append(
            PairRecord(
                dataset=dataset,
                gpu_type=(r.get("gpu_type") or gpu_type).strip().lower(),
                mechanism=(r.get("mechanism") or mechanism).strip().lower(),
                profile_a=dict(solos[ka]),
                profile_b=dict(solos[kb]),
                feasible=feasible,
                norm_a=sa if feasible else math.nan,
                norm_b=sb if feasible else math.nan,
            )
        )
    return out


def dataset_files(data_dir: Path, dataset: str) -> dict[str, Path]:
    """Where each dataset's files live under the shared data folder (``DIR`` or ``DIR/interference``)."""
    base = data_dir / "interference" if (data_dir / "interference").is_dir() else data_dir
    if dataset == "gavel":
        return {"pairs": base / "gavel" / "gavel_pairs_single_gpu.csv"}
    if dataset == "lucid":
        return {
            "pairs": base / "lucid" / "colocate_info.shared.csv",
            "solo": base / "lucid" / "single_data.csv",
        }
    if dataset == "platform":
        return {
            "pairs": base / "platform" / "colocate_info.csv",
            "solo": base / "platform" / "single_data.csv",
        }
    raise DatasetError(f"unknown dataset {dataset!r}; known: {', '.join(KNOWN_DATASETS)}")


def available_datasets(data_dir: Path) -> list[str]:
    """Datasets whose files exist under ``data_dir``."""
    return [d for d in KNOWN_DATASETS if all(p.is_file() for p in dataset_files(data_dir, d).values())]


def load_dataset(data_dir: Path, dataset: str) -> list[PairRecord]:
    files = dataset_files(data_dir, dataset)
    if dataset == "gavel":
        return load_gavel_pairs(files["pairs"])
    return load_profiled_pairs(files["pairs"], files["solo"], dataset=dataset)


def load_datasets(data_dir: Path, datasets: Iterable[str]) -> list[PairRecord]:
    """All pair records of ``datasets`` under ``data_dir`` (one tidy table)."""
    records: list[PairRecord] = []
    for name in datasets:
        records.extend(load_dataset(data_dir, name))
    return records


def load_test_csv(path: Path, data_dir: Path | None) -> list[PairRecord]:
    """A held-out CSV in the same format as a shared file: Gavel's tidy pairs or Lucid's pairs.

    The format is recognised by its columns. Lucid-format pairs need solo profiles: taken from
    ``single_data.csv`` beside the CSV if present, else from the Lucid folder under ``data_dir``.
    """
    if not path.is_file():
        raise DatasetError(f"test file not found: {path}")
    with path.open(newline="") as fh:
        columns = set(next(csv.reader(fh), []))
    if set(GAVEL_PAIR_COLUMNS) <= columns:
        return load_gavel_pairs(path)
    if set(LUCID_PAIR_COLUMNS) <= columns:
        solo = path.parent / "single_data.csv"
        if not solo.is_file() and data_dir is not None:
            solo = dataset_files(data_dir, "lucid")["solo"]
        if not solo.is_file():
            raise DatasetError(f"{path}: Lucid-format pairs need single_data.csv beside it or under --data")
        return load_profiled_pairs(path, solo, dataset="lucid")
    raise DatasetError(f"{path}: columns match neither Gavel's pair table nor Lucid's colocate_info.csv")
