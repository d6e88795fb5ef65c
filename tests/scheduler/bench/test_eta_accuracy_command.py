"""``python -m scheduler eta-accuracy`` on a tiny trace: one replay per remaining-time estimator, the
proposed one (order statistics) the headline, and ``--estimators`` to run a subset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scheduler.__main__ import main
from scheduler.bench.eta_accuracy import ESTIMATORS, HEADLINE

PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def run(tmp_path: Path, *extra: str) -> dict[str, Any]:
    # Twelve 2-GPU jobs of 600 s a minute apart on the 'small' cluster: most of them wait.
    rows = "".join(
        f"2017-10-01 00:{m:02d}:00,600.0,2,1200.0,{'vcA' if m % 2 else 'vcB'}\n" for m in range(12)
    )
    trace = tmp_path / "trace.csv"
    trace.write_text(PHILLY_HEADER + rows)
    out = tmp_path / "eta.json"
    args = ["eta-accuracy", "--trace", str(trace), "--cluster", "small", "--json", str(out), *extra]
    assert main(args) == 0
    return json.loads(out.read_text())


def test_every_estimator_is_replayed_and_the_proposed_one_is_the_headline(tmp_path: Path) -> None:
    report = run(tmp_path)
    assert list(report["estimators"]) == list(ESTIMATORS)
    assert report["headline"] == HEADLINE == "order_statistics"
    for found in report["estimators"].values():
        assert found["jobs"] > 0 and found["points"] + found["unknown_points"] == 10 * found["jobs"]
    best = report["estimators"][HEADLINE]["median_rel_error"]
    assert report["goal"]["met"] == (best is not None and best <= 0.25)


def test_a_subset_of_estimators_is_replayed_alone(tmp_path: Path) -> None:
    report = run(tmp_path, "--estimators", "median_runtime")
    assert list(report["estimators"]) == ["median_runtime"]
    assert report["headline"] == "median_runtime"
