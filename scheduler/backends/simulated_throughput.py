"""What a task on the simulated backend reports as its throughput, from the simulator's ground truth.

The throughput contract (``scheduler.backends.throughput``) has real jobs report samples or steps per
second. A simulated task reports what its Gavel job type would: its measured isolated throughput
times its current progress rate (the ground truth of :mod:`scheduler.sim.perf`)::

    throughput = iso_tput(job type) * rate        rate = 1 alone, 1 / (1 + sum (1 / y(me | other) - 1))
                                                  while sharing a GPU

So alone it reports ``iso_tput`` (what a solo profile stores), and beside one co-tenant of type ``b``
it reports ``iso_tput * y(me | b)``: the co-location sweep's ratio of the two is then exactly Gavel's
measured normalised throughput of the pair, and the whole measurement loop runs with no GPU.

``platform_ground_truth`` is the ground truth the platform's simulated backend uses: the Gavel pairs
of one GPU type from the shared data folder, loaded once per process, or None when the folder has no
Gavel data (every rate is then 1 and no task reports a throughput). Pure library, no Django.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scheduler.sim.perf import PerfModel

# The GPU type whose Gavel pairs the platform's simulated cluster uses when none is named
# (the type with the most measured pairs in the shared data).
DEFAULT_GROUND_TRUTH_GPU = "v100"


def reported_throughput(perf: PerfModel | None, type_index: int | None, rate: float) -> float | None:
    """The throughput a RUNNING simulated task reports (module docstring); None without a ground
    truth, without a job type, or when the type has no measured isolated throughput."""
    if perf is None or type_index is None:
        return None
    solo = perf.iso_tput.get(perf.job_types[type_index].name, 0.0)
    if solo <= 0:
        return None
    return solo * rate


@functools.cache
def _load(gavel_dir: Path, gpu_type: str) -> PerfModel | None:
    from scheduler.sim.perf import load_perf_model

    try:
        return load_perf_model(gavel_dir, gpu_type)
    except FileNotFoundError:
        return None


def platform_ground_truth(
    data_dir: Path | None, gpu_type: str = DEFAULT_GROUND_TRUTH_GPU
) -> PerfModel | None:
    """The Gavel ground truth of ``gpu_type`` under ``data_dir`` (``interference/gavel``), cached;
    None when ``data_dir`` or ``gpu_type`` is empty or the files are absent. ValueError for a GPU
    type the data does not measure (a configuration error, said once at start-up)."""
    if data_dir is None or not gpu_type:
        return None
    return _load(Path(data_dir) / "interference" / "gavel", gpu_type)
