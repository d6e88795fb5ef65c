"""``python -m scheduler frag`` end to end on a small CSV fixture written by the test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.__main__ import main
from scheduler.commands import CommandError
from scheduler.commands.frag import METRICS, parse_seeds
from scheduler.datapaths import REPO_ROOT
from tests.scheduler.frag.frag_helpers import write_fixture


def test_the_frag_command_writes_per_policy_means_and_a_plot(tmp_path: Path) -> None:
    nodes, pods = write_fixture(tmp_path)
    out, png = tmp_path / "out.json", tmp_path / "out.png"
    code = main(
        [
            "frag",
            "--nodes",
            str(nodes),
            "--pods",
            str(pods),
            "--policy",
            "FGD",
            "--policy",
            "best_fit",
            "--policy",
            "default",
            "--seeds",
            "1-3",
            "--json",
            str(out),
            "--plot",
            str(png),
            "--quiet",
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    assert report["n_gpus"] == 8 * 6 + 2 * 14 + 4 * 2
    assert set(report["policies"]) == {"fgd", "best_fit", "default"}
    for block in report["policies"].values():
        assert block["n_seeds"] == 3 and len(block["runs"]) == 3
        for name in METRICS:
            m = block["metrics"][name]
            assert len(m["values"]) == 3
            if None in m["values"]:
                # A run that never reached that arrived % (coarse fixture): no made-up mean.
                assert m["mean"] is None
                continue
            assert m["mean"] == pytest.approx(sum(m["values"]) / 3, abs=1e-3)
        unalloc = block["metrics"]["unalloc_gpu_pct_at_arrived100"]["mean"]
        alloc = block["metrics"]["alloc_ratio_pct_at_arrived100"]["mean"]
        assert unalloc == pytest.approx(100 - alloc, abs=1e-2)
        assert 0 <= unalloc <= 100
        assert block["placements_per_second"]["mean"] > 0
        # Inflation: every run offers more pods than the trace has (its GPU request is below 130 %).
        assert all(r["pods_offered"] > 150 for r in block["runs"])
    assert png.stat().st_size > 1000


def test_the_same_seed_gives_the_same_numbers(tmp_path: Path) -> None:
    nodes, pods = write_fixture(tmp_path)
    results = []
    for name in ("a.json", "b.json"):
        main(
            [
                "frag",
                "--nodes",
                str(nodes),
                "--pods",
                str(pods),
                "--policy",
                "random",
                "--seeds",
                "7",
                "--json",
                str(tmp_path / name),
                "--quiet",
            ]
        )
        results.append(json.loads((tmp_path / name).read_text())["policies"]["random"]["metrics"])
    assert results[0] == results[1]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda n, p: ["--policy", "nope"], "unknown policy 'nope'"),
        (lambda n, p: ["--nodes", str(n.parent / "missing.csv")], "no such file"),
        (lambda n, p: (p.write_text("name,cpu_milli\nx,1\n"), [])[1], "missing column"),
        (lambda n, p: ["--seeds", "9-1"], "--seeds"),
    ],
)
def test_bad_input_is_one_line_and_a_nonzero_exit(tmp_path: Path, mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    nodes, pods = write_fixture(tmp_path)
    extra = mutate(nodes, pods)
    args = {"--nodes": str(nodes), "--pods": str(pods), "--policy": "fgd", "--json": str(tmp_path / "o.json")}
    for flag, value in zip(extra[::2], extra[1::2], strict=True):
        args[flag] = value
    argv = ["-m", "scheduler", "frag", "--quiet"] + [x for kv in args.items() for x in kv]
    proc = subprocess.run([sys.executable, *argv], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_seed_ranges_and_lists_parse() -> None:
    assert parse_seeds("42-45") == [42, 43, 44, 45]
    assert parse_seeds("1,3-4") == [1, 3, 4]
    with pytest.raises(CommandError):
        parse_seeds("x")
