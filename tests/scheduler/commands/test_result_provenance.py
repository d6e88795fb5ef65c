"""Every result JSON of ``simulate`` and ``frag`` says what it was made from, and a run without a
trained interference model says so in one line."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from scheduler.__main__ import main
from scheduler.commands import model_fallback_notice
from scheduler.datapaths import REPO_ROOT, default_data_dir
from scheduler.interference import store
from scheduler.interference.store import cached_model, load_model, model_content_hash
from scheduler.provenance import code_state

DATA = default_data_dir()
needs_gavel = pytest.mark.skipif(
    not (DATA / "interference/gavel/gavel_pairs_single_gpu.csv").is_file(),
    reason=f"shared Gavel data not found under {DATA}",
)

SPEC = """name: tiny
gavel_gpu_type: v100
node_groups:
  - count: 2
    gpus: 4
    gpu_model: V100
    gpu_memory_mib: 16384
"""


def contended_inputs(tmp_path: Path) -> tuple[Path, Path]:
    """40 jobs arriving every 30 s for 10-60 min on 8 GPUs: ours has to pack, so it predicts."""
    lines = ["job_id,submission_time,duration,num_gpu"]
    for i in range(40):
        lines.append(f"j{i},{i * 30},{600 + (i * 137) % 3000},{[1, 1, 1, 2, 4][i % 5]}")
    trace = tmp_path / "trace.csv"
    trace.write_text("\n".join(lines) + "\n")
    spec = tmp_path / "tiny.yaml"
    spec.write_text(SPEC)
    return trace, spec


def train(out_dir: Path, seed: int = 0) -> Path:
    path = out_dir / store.DEFAULT_MODEL_FILE
    assert main(["interference", "train", "--data", str(DATA), "--out", str(path), "--seed", str(seed)]) == 0
    return path


def simulate(trace: Path, spec: Path, out: Path) -> dict[str, Any]:
    code = main([
        "simulate", "--trace", str(trace), "--cluster", str(spec), "--policy", "k8s", "--policy", "ours",
        "--data", str(DATA), "--json", str(out), "--quiet",
    ])  # fmt: skip
    assert code == 0
    return json.loads(out.read_text())  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (DATA / "interference/gavel/gavel_pairs_single_gpu.csv").is_file():
        pytest.skip(f"shared Gavel data not found under {DATA}")
    folder = tmp_path_factory.mktemp("model")
    train(folder)
    return folder


@needs_gavel
def test_simulate_records_the_commit_the_model_content_hash_and_the_data_files(
    tmp_path: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(store.MODEL_DIR_ENV, str(model_dir))
    trace, spec = contended_inputs(tmp_path)
    prov = simulate(trace, spec, tmp_path / "out.json")["provenance"]

    head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert prov["code"]["commit"] == head.stdout.strip()
        assert isinstance(prov["code"]["dirty"], bool)
    model_file = model_dir / store.DEFAULT_MODEL_FILE
    [model] = prov["interference_model"]
    assert model["path"] == str(model_file)
    assert model["content_sha256"] == model_content_hash(load_model(model_file))
    assert model["file_sha256"] == hashlib.sha256(model_file.read_bytes()).hexdigest()
    assert prov["interference_fallback"] is None
    data = {d["path"]: d for d in prov["data"]}
    assert data[str(trace)]["sha256"] == hashlib.sha256(trace.read_bytes()).hexdigest()
    assert data[str(trace)]["bytes"] == trace.stat().st_size
    assert str(spec) in data
    assert str(DATA / "interference/gavel/gavel_pairs_single_gpu.csv") in data
    assert prov["environment"]["numpy"] and "variables" in prov["environment"]


@needs_gavel
def test_training_twice_gives_the_same_content_hash_and_another_seed_does_not(
    tmp_path: Path, model_dir: Path
) -> None:
    first = load_model(model_dir / store.DEFAULT_MODEL_FILE)
    again = load_model(train(tmp_path / "again"))
    other = load_model(train(tmp_path / "seed1", seed=1))
    # The files differ in their training time; what the models compute does not.
    assert first.created and again.created
    assert model_content_hash(again) == model_content_hash(first)
    assert model_content_hash(other) != model_content_hash(first)


@needs_gavel
def test_simulate_without_a_model_says_so_once_and_records_the_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "no-models"
    empty.mkdir()
    monkeypatch.setenv(store.MODEL_DIR_ENV, str(empty))
    trace, spec = contended_inputs(tmp_path)
    prov = simulate(trace, spec, tmp_path / "out.json")["provenance"]

    lines = [line for line in capsys.readouterr().err.splitlines() if "interference" in line]
    assert len(lines) == 1
    assert "make models" in lines[0] and str(empty / store.DEFAULT_MODEL_FILE) in lines[0]
    assert prov["interference_model"] is None
    assert str(empty / store.DEFAULT_MODEL_FILE) in prov["interference_fallback"]


def test_the_fallback_notice_is_one_line_however_often_the_model_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none.joblib"
    with model_fallback_notice("simulate"):
        for _ in range(3):
            assert cached_model(missing) == (None, f"no trained model at {missing}")
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"warning: simulate: no trained model at {missing}; using the analytic interference "
        "estimate instead (run `make models` to train it)"
    ]
    cached_model(missing)  # outside the block nobody listens
    assert capsys.readouterr().err == ""


def test_an_unreadable_model_file_is_a_fallback_with_its_reason(tmp_path: Path) -> None:
    broken = tmp_path / "interference.joblib"
    broken.write_bytes(b"not a joblib file")
    with model_fallback_notice("frag"):
        model, note = cached_model(broken)
        assert model is None and str(broken) in note
        assert store.fallback_notes() == [note]
        assert store.loaded_models() == []


def test_frag_records_its_input_files(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"n{i},64000,262144,4,T4\n" for i in range(4))
    )
    pods = tmp_path / "pods.csv"
    header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
    rows = [header + "scheduled_time"]
    rows += [f"p{i},4000,8192,1,{[1000, 500, 250][i % 3]},,LS,Running,0,1,0" for i in range(30)]
    pods.write_text("\n".join(rows) + "\n")
    out = tmp_path / "frag.json"
    code = main(
        ["frag", "--nodes", str(nodes), "--pods", str(pods), "--policy", "fgd", "--seeds", "1"]
        + ["--json", str(out), "--quiet"]
    )
    assert code == 0
    prov = json.loads(out.read_text())["provenance"]
    assert [d["path"] for d in prov["data"]] == [str(nodes), str(pods)]
    assert prov["data"][1]["sha256"] == hashlib.sha256(pods.read_bytes()).hexdigest()


def test_the_dirty_flag_follows_changes_to_tracked_files(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "a.txt").write_text("one\n")
    git("add", "a.txt")
    git("-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "first")
    (tmp_path / "untracked.txt").write_text("not part of the code\n")
    clean = code_state(tmp_path)
    assert clean["dirty"] is False and len(clean["commit"]) == 40
    (tmp_path / "a.txt").write_text("two\n")
    assert code_state(tmp_path) == {"commit": clean["commit"], "dirty": True, "dirty_paths": ["a.txt"]}


def test_outside_a_git_checkout_the_commit_is_null(tmp_path: Path) -> None:
    assert code_state(tmp_path / "nowhere") == {"commit": None, "dirty": None, "dirty_paths": []}
