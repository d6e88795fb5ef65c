"""``ours`` with the online model in the simulator: each co-location it observes is fed once with the
ground truth's values, and what the model learns changes what it packs.

A hand-made world (no shared data): two job types whose ground truth says they hurt each other badly
(y = 0.3 both ways), and a trained model that was told they barely do (y = 0.9): a model meeting a
pair it mispredicts, as a cluster meets new combinations.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from sim_helpers import cluster, two_type_perf

from scheduler.framework import Profile
from scheduler.interference.datasets import PairRecord
from scheduler.interference.models import InterferenceModel
from scheduler.interference.online import OnlinePredictor
from scheduler.interference.online_model import OnlineModel
from scheduler.interference.predict import SetQuery, clear_prediction_cache, predict_sets
from scheduler.policy.registry import Policy
from scheduler.sim.engine import SimConfig, Simulator
from scheduler.sim.online_interference import OnlineSimulator, main, with_model
from scheduler.sim.perf import PerfModel
from scheduler.sim.trace import TraceJob

TRUE_Y = 0.3  # what the two types measure next to each other (ground truth)
TOLD_Y = 0.9  # what the model was trained on for that pair


def perf() -> PerfModel:
    return two_type_perf(TRUE_Y, TRUE_Y)


def profile(truth: PerfModel, t: int) -> dict[str, float | str]:
    """The profile the simulator gives a job of type ``t`` (engine ``_request``)."""
    jt = truth.job_types[t]
    return {
        "model_family": jt.family,
        "job_type": jt.name,
        "batch_size": float(jt.batch_size),
        "gpu_memory_mib": float(jt.memory_mib),
        "solo_throughput": truth.iso_tput[jt.name],
        "job_key": f"gavel:v100:{jt.name}",
    }


def trained_model(truth: PerfModel) -> InterferenceModel:
    """Trained on pairs that say the mixed pair is benign and same-type pairs are not."""
    records = []
    for a, b in itertools.combinations_with_replacement(range(2), 2):
        y = TOLD_Y if a != b else 0.6
        for _ in range(3):
            records.append(
                PairRecord("gavel", "v100", profile(truth, a), profile(truth, b), True, norm_a=y, norm_b=y)
            )
    return InterferenceModel.fit(records, estimator="linear", seed=0, conservative=False)


def policy() -> Policy:
    interference = Profile(
        name="t-online",
        filters=("resource_fit", "sim_interference"),
        scores={"sim_interference": 1.0},
        gpu_chooser="sim_interference",
        args={"sim_interference": {"conservative": False}},
    )
    return Policy(name="t-ours", order="fifo", share="half", profile=interference)


def trace(pairs: int) -> list[TraceJob]:
    """A ResNet-18 and an LM job arriving together every 1,000 s, 100 s of work each: on one GPU
    the second of each pair either packs beside the first or waits 100 s for it."""
    jobs = []
    for k in range(pairs):
        jobs.append(TraceJob(f"r{k}", 1000.0 * k, 100.0, 1, family="ResNet-18"))
        jobs.append(TraceJob(f"l{k}", 1000.0 * k, 100.0, 1, family="LM"))
    return jobs


def learner(truth: PerfModel) -> OnlineModel:
    model = trained_model(truth)
    return OnlineModel(OnlinePredictor(base=[], fit=lambda r: model, model=model))


@pytest.fixture(autouse=True)
def cold_predictions() -> None:
    clear_prediction_cache()


def test_each_observed_co_location_is_fed_once_with_the_ground_truths_values() -> None:
    truth = perf()
    online = learner(truth)
    sim = OnlineSimulator(trace(6), cluster(gpus=1), policy(), truth, online, SimConfig(cycle_s=0.0))

    sim.run()

    fed = online.predictor.own
    assert len(fed) == sim.observed >= 1
    for record in fed:
        assert (record.norm_a, record.norm_b) == (TRUE_Y, TRUE_Y)
        assert {record.profile_a["model_family"], record.profile_b["model_family"]} == {"ResNet-18", "LM"}
        assert record.gpu_type == "v100" and record.profile_a["gpu_share"] == 0.5


def test_the_online_model_stops_packing_a_pair_it_measured_as_harmful_where_the_static_one_keeps_on() -> None:
    truth = perf()
    config = SimConfig(cycle_s=0.0)
    static = Simulator(trace(10), cluster(gpus=1), with_model(policy(), trained_model(truth)), truth, config)
    static_result = static.run()
    clear_prediction_cache()
    online = learner(truth)
    sim = OnlineSimulator(trace(10), cluster(gpus=1), policy(), truth, online, config)
    online_result = sim.run()

    # The static model packs every pair: both jobs of each run at 0.3 (beyond the 1.5x tolerance).
    assert static_result.violations == 2 * 10
    # The online model learnt from the first few and let later pairs take turns instead.
    assert 1 <= sim.observed < 10
    assert online_result.violations == 2 * sim.observed
    query = SetQuery(
        [{**profile(truth, 0), "gpu_share": 0.5}, {**profile(truth, 1), "gpu_share": 0.5}], "v100"
    )
    (learnt,) = predict_sets(online, [query])
    (told,) = predict_sets(trained_model(truth), [query])
    # Learnt: beyond the 1.5x tolerance, so the pair is refused; as told: within it.
    assert learnt.slowdowns.min() > 1.5 >= told.slowdowns.max()
    # Taking turns is faster here: 100 s + 100 s beats two jobs at 0.3 for 333 s.
    assert online_result.finish.mean() < static_result.finish.mean()


def test_at_most_max_per_pair_measurements_of_one_job_type_pair_are_fed() -> None:
    # A pair that is fine to pack (0.7 each: within tolerance, 1.4 GPUs of work): it keeps being met.
    truth = two_type_perf(0.7, 0.7)
    online = learner(truth)
    sim = OnlineSimulator(
        trace(6), cluster(gpus=1), policy(), truth, online, SimConfig(cycle_s=0.0), max_per_pair=2
    )

    sim.run()

    assert sim.observed == 6
    assert online.measurements == 2
    assert [(r.norm_a, r.norm_b) for r in online.predictor.own] == [(0.7, 0.7)] * 2


def test_the_comparison_command_refuses_bad_input_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["--cluster", "philly-256", "--data", str(tmp_path), "--json", str(tmp_path / "out.json")]

    assert main(["--trace", str(tmp_path / "t.csv"), *common, "--held-out-fraction", "1.5"]) == 2
    assert main(["--trace", str(tmp_path / "missing.csv"), *common]) == 2

    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("error: ") for line in lines)
    assert "trace file not found" in lines[1]
    assert not (tmp_path / "out.json").exists()
