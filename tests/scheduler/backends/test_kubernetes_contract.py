"""Names and the GPU environment of the Kubernetes contract (pure functions)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.backends.kubernetes import contract as c
from scheduler.model import Placement

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=120), st.text(min_size=1, max_size=120))
def test_pod_names_are_valid_dns_labels_and_deterministic_for_any_ids(job_id: str, task_id: str) -> None:
    name = c.pod_name(job_id, task_id)

    assert DNS_LABEL.match(name) and len(name) <= 63
    assert name == c.pod_name(job_id, task_id)
    assert DNS_LABEL.match(c.service_name(job_id)) and c.service_name(job_id)[0].isalpha()


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200))
def test_label_values_are_always_valid(text: str) -> None:
    value = c.label_value(text)

    assert LABEL_VALUE.match(value) and len(value) <= 63


def test_distinct_ids_that_clean_up_alike_get_distinct_names() -> None:
    assert c.pod_name("Job_1", "0") != c.pod_name("job-1", "0")
    assert c.pod_name("job-1", "job-1-0") == "job-job-1-0"


def test_a_gpu_share_travels_as_mps_and_hami_environment() -> None:
    env = c.gpu_environment(
        Placement("j", "t", "n", (2,), gpu_milli=333, gpu_memory_mib=5000), {2: "GPU-abc"}
    )

    assert env["NVIDIA_VISIBLE_DEVICES"] == "GPU-abc"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == env["CUDA_DEVICE_SM_LIMIT"] == "34"
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=5000M"
    assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == "5000m"


def test_whole_gpus_get_only_their_devices_and_cpu_tasks_get_none() -> None:
    whole = c.gpu_environment(Placement("j", "t", "n", (0, 1), gpu_milli=1000, gpu_memory_mib=80000), {})
    none = c.gpu_environment(Placement("j", "t", "n", ()), {})

    assert whole["NVIDIA_VISIBLE_DEVICES"] == "0,1"
    assert not any(k.startswith(("CUDA_MPS", "CUDA_DEVICE")) for k in whole)
    assert none == {"NVIDIA_VISIBLE_DEVICES": "void"}


def test_the_pods_and_services_the_backend_creates_validate_against_the_kubernetes_schema() -> None:
    import kubernetes_validate

    from scheduler.backends.base import TaskSpec
    from scheduler.backends.kubernetes.pods import PodOptions, binding_body, pod_body, service_body

    options = PodOptions(
        namespace="gpu-jobs",
        scheduler_name="s",
        gpu_resource_name="nvidia.com/gpu",
        mps_pipe_directory="/tmp/nvidia-mps",
    )
    spec = TaskSpec(
        job_id="j",
        task_id="j-1",
        rank=1,
        world_size=2,
        image="img",
        command=["python"],
        args=["t.py"],
        max_runtime_s=60,
    )
    shared = Placement(
        "j", "j-1", "n", (0,), gpu_milli=500, gpu_memory_mib=4000, cpu_milli=1000, memory_mib=2048
    )
    whole = Placement(
        "j", "j-1", "n", (0, 1), gpu_milli=1000, gpu_memory_mib=80000, cpu_milli=1000, memory_mib=2048
    )
    version = kubernetes_validate.latest_version()

    for body in (
        pod_body(spec, shared, options, {}),
        pod_body(spec, whole, options, {0: "GPU-a"}),
        service_body("j", options),
        binding_body("p", "n"),
    ):
        kubernetes_validate.validate(body, version, strict=True)
    assert (
        pod_body(spec, whole, options, {})["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
        == "2"
    )
