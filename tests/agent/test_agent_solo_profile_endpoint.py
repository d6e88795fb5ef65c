"""The node agent's solo-run samples reach a ``SoloProfile`` over the platform's real HTTP endpoint.

The agent's own code samples (``profiling.sample_job``) a recorded NVML machine (the fake stands in
for the driver only) and posts with its client (``publish.post_solo_profile``, httpx) to the live
server; the row is read back from the database.
"""

from __future__ import annotations

import statistics
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from fake_nvml import FakeNvml

from accounts.services import token_create
from jobs.models import SoloProfile
from jobs.profiling_services import command_hash
from scheduler.agent import profiling
from scheduler.agent.publish import PublishError, post_solo_profile, solo_profile_body

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "node-secret-0123456789"
IMAGE = "registry.local/pytorch:2.4"
COMMAND = "python train.py --model resnet50 --batch-size 64"


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture
def node_token(settings: Any) -> str:
    settings.NODE_AGENT_TOKEN = TOKEN
    return TOKEN


def sampled_run(throughputs: list[float]) -> tuple[FakeNvml, list[profiling.Sample]]:
    """Twelve one-second samples of GPU 1 of the recorded DGX-1 with the job's reported rates."""
    nvml = FakeNvml.load("nvml_dgx1_v100.json")
    nvml.nvmlInit()
    clock, rates = Clock(), iter(throughputs)
    samples = profiling.sample_job(
        nvml, 1, duration_s=11.0, throughput=lambda: next(rates), clock=clock, sleep=clock.sleep
    )
    return nvml, samples


def test_the_agents_samples_of_a_solo_run_become_the_configurations_solo_profile(
    live_server: Any, node_token: str
) -> None:
    rates = [float(100 + i) for i in range(12)]
    nvml, samples = sampled_run(rates)
    device = nvml.recording["devices"][1]
    body = solo_profile_body(
        image=IMAGE,
        command=COMMAND,
        gpu_model=device["name"],
        samples=samples,
        warmup_s=2.0,
        extra={"batch_size": 64, "model_family": "ResNet-50"},
    )

    answer = post_solo_profile(live_server.url, node_token, body)

    row = SoloProfile.objects.get(image=IMAGE, command_hash=command_hash(COMMAND), gpu_model=device["name"])
    steady = rates[2:]  # t = 0 and 1 are the warm-up
    assert row.samples == len(steady) == answer["samples"]
    assert row.gpu_util == pytest.approx(device["util_gpu"])
    assert row.mem_util == pytest.approx(device["util_mem"])
    assert row.gpu_memory_mib == pytest.approx(device["memory_used"] / 1024**2)
    assert row.solo_throughput == pytest.approx(statistics.median(steady))
    assert (row.batch_size, row.model_family) == (64.0, "ResNet-50")

    # A second solo run of the same configuration merges, weighted by sample counts.
    _, more = sampled_run([200.0] * 12)
    post_solo_profile(
        live_server.url,
        node_token,
        solo_profile_body(image=IMAGE, command=COMMAND, gpu_model=device["name"], samples=more, warmup_s=2.0),
    )
    row.refresh_from_db()
    assert row.samples == 20
    assert row.solo_throughput == pytest.approx((10 * statistics.median(steady) + 10 * 200.0) / 20)


def test_posts_without_the_node_token_are_refused_and_store_nothing(
    live_server: Any, node_token: str
) -> None:
    _, samples = sampled_run([1.0] * 12)
    body = solo_profile_body(image=IMAGE, command=COMMAND, gpu_model="V100", samples=samples)
    user = get_user_model().objects.create_user("ada", "ada@example.org", "pw-12345678")
    _, user_token = token_create(user=user)

    for token in ("wrong-token", user_token):
        with pytest.raises(PublishError, match=r"\(401\)"):
            post_solo_profile(live_server.url, token, body)
    assert not SoloProfile.objects.exists()


def test_an_empty_node_token_setting_refuses_every_post(live_server: Any, settings: Any) -> None:
    settings.NODE_AGENT_TOKEN = ""
    _, samples = sampled_run([1.0] * 12)
    body = solo_profile_body(image=IMAGE, command=COMMAND, gpu_model="V100", samples=samples)

    for token in (TOKEN, "x"):
        with pytest.raises(PublishError, match=r"\(401\)"):
            post_solo_profile(live_server.url, token, body)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"samples": [{"t": 0, "gpu_util": 150, "mem_util": 1, "memory_mib": 1}]}, "samples"),
        ({"samples": []}, "samples"),
        ({"warmup_s": 1000.0}, "samples"),  # no sample is left after the warm-up
        ({"gpu_modle": "V100"}, "gpu_modle"),  # a typo is an unknown field, not ignored
        ({"image": ""}, "image"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    live_server: Any, node_token: str, change: dict[str, Any], field: str
) -> None:
    import httpx

    _, samples = sampled_run([1.0] * 12)
    body = {**solo_profile_body(image=IMAGE, command=COMMAND, gpu_model="V100", samples=samples), **change}

    response = httpx.post(
        f"{live_server.url}/api/v1/agent/solo-profiles/",
        json=body,
        headers={"Authorization": f"Bearer {TOKEN}"},
    )

    assert response.status_code == 400
    error = response.json()
    assert set(error) == {"message", "code", "extra"}
    assert field in error["extra"]["fields"]
    assert not SoloProfile.objects.exists()
