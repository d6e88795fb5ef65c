"""``python -m scheduler topology place|show|evaluate``: output and one-line errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from scheduler.__main__ import main
from tests.scheduler.topology.topo_helpers import TOPOLOGY_DIR, needs_data

pytestmark = pytest.mark.data


@needs_data
def test_place_prints_the_chosen_set_and_its_cost(capsys: pytest.CaptureFixture[str]) -> None:
    path = TOPOLOGY_DIR / "a100_pcie_8x_nv12_bridge_pairs.txt"
    assert main(["topology", "place", "--topology", str(path), "--gpus", "2", "--busy", "0,3"]) == 0
    out = capsys.readouterr().out
    assert "chosen: GPUs 4,5  links NV12  ring 240.0 GB/s" in out
    assert "first-fit: GPUs 1,2  ring 14.4 GB/s" in out


@needs_data
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--gpus", "9"], "9 GPU(s) requested but only 8 of 8 are free"),
        (["--gpus", "2", "--busy", "0,x"], "--busy: 'x' is not a GPU index"),
        (["--gpus", "0"], "--gpus must be at least 1"),
    ],
)
def test_place_rejects_bad_input_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = TOPOLOGY_DIR / "dgx1_v100.txt"
    assert main(["topology", "place", "--topology", str(path), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_a_file_that_is_not_a_matrix_names_the_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("\tGPU0\tGPU1\nGPU0\t X \tNV2\nGPU1\tNV2\t Y \n")
    assert main(["topology", "show", "--topology", str(bad)]) == 2
    assert capsys.readouterr().err.strip() == "error: bad.txt: line 3: unknown link code 'Y' in column GPU1"


@needs_data
def test_evaluate_writes_json_and_plot_for_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "matrices"
    folder.mkdir()
    for name in ("rtx_a6000x3_nv4_bridge_pair.txt", "ibm_ac922_v100x4_nv3pairs.txt"):
        shutil.copy(TOPOLOGY_DIR / name, folder / name)
    out, png = tmp_path / "eval.json", tmp_path / "eval.png"
    argv = ["topology", "evaluate", "--topologies", str(folder), "--json", str(out), "--plot", str(png)]
    assert main([*argv, "--states", "2", "--requests", "40", "--streams", "2", "--no-synthetic"]) == 0
    data = json.loads(out.read_text())
    assert set(data["topologies"]) == {"rtx_a6000x3_nv4_bridge_pair", "ibm_ac922_v100x4_nv3pairs"}
    ibm = data["topologies"]["ibm_ac922_v100x4_nv3pairs"]
    assert ibm["single"]["ours_equals_optimum_pct"] == 100.0
    assert ibm["sequential"]["ours"]["placed"] == 80  # 2 streams x 40 requests
    assert data["targets"]["single_ours_equals_optimum_everywhere"] is True
    assert png.stat().st_size > 1000


def test_evaluate_rejects_a_missing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["topology", "evaluate", "--topologies", str(tmp_path / "nope"), "--json", str(tmp_path / "o")])
        == 2
    )
    assert "is not a folder" in capsys.readouterr().err
