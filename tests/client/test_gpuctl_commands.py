"""The rest of gpuctl's commands and the Python client, against the live server."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuctl import Client, LogChunk, LogEnd, NotFoundError, RefusedError
from quotas.models import Quota
from tests.client.conftest import Platform

pytestmark = pytest.mark.django_db(transaction=True)


def spec_file(platform: Platform, image: Any, **fields: Any) -> str:
    path = platform.home / "job.yaml"
    path.write_text(yaml.safe_dump({"image": image.reference, "command": "python train.py", **fields}))
    return str(path)


def test_the_python_client_submits_follows_and_waits(
    platform: Platform, member: Any, image: Any, token_of: Any
) -> None:
    with Client(platform.url, token_of(member)) as client, platform.driving():
        job = client.submit({"image": image.reference, "command": ["train"], "gpus": 2, "replicas": 2})
        items = list(client.follow_logs(job.id))
        final = client.wait(job.id, poll=0.1)
        logs = client.logs(job.id)

    assert job.status == "QUEUED" and job.replicas == 2
    assert isinstance(items[-1], LogEnd) and items[-1].status == "SUCCEEDED"
    chunks = [i for i in items if isinstance(i, LogChunk)]
    for task in logs:
        assert "".join(c.text for c in chunks if c.index == task.index) == task.log
    assert final.status == "SUCCEEDED" and len(final.tasks) == 2
    assert all(len(t.gpu_indices) == 2 and t.node for t in final.tasks)


def test_the_python_client_raises_typed_errors_with_the_api_s_message(
    platform: Platform, member: Any, outsider: Any, image: Any, token_of: Any
) -> None:
    with Client(platform.url, token_of(member)) as client:
        job = client.submit({"image": image.reference, "command": ["train"], "gpu_milli": 250})
    with Client(platform.url, token_of(outsider)) as other, pytest.raises(NotFoundError):
        other.get(job.id)
    with Client(platform.url, "not-a-token") as anonymous, pytest.raises(RefusedError) as refused:
        anonymous.list()
    assert refused.value.status == 401


def test_list_filters_and_prints_json_and_yaml(
    platform: Platform, member: Any, image: Any, token_of: Any
) -> None:
    token = token_of(member)
    spec = spec_file(platform, image, gpu_milli=250)
    first = platform.gpuctl("submit", "-f", spec, "-q", token=token, drive=False).stdout.strip()
    second = platform.gpuctl("submit", "-f", spec, "--set", "name=two", "-q", token=token, drive=False)
    platform.gpuctl("cancel", first, token=token, drive=False)

    as_json = platform.gpuctl("list", "-o", "json", "--status", "queued", token=token, drive=False)
    as_yaml = platform.gpuctl("list", "-o", "yaml", token=token, drive=False)
    table = platform.gpuctl("list", token=token, drive=False)

    assert [j["id"] for j in json.loads(as_json.stdout)] == [int(second.stdout)]
    assert {j["status"] for j in yaml.safe_load(as_yaml.stdout)} == {"QUEUED", "STOPPED"}
    assert table.code == 0 and "two" in table.stdout and "STOPPED" in table.stdout


def test_cancel_stops_a_job_and_a_second_cancel_of_a_finished_one_is_refused(
    platform: Platform, member: Any, image: Any, token_of: Any
) -> None:
    token = token_of(member)
    spec = spec_file(platform, image, gpu_milli=250, sim_duration_seconds=3600)
    job_id = platform.gpuctl("submit", "-f", spec, "-q", token=token, drive=False).stdout.strip()
    platform.drive_until(int(job_id), {"RUNNING"})

    cancelled = platform.gpuctl("cancel", job_id, token=token)
    waited = platform.gpuctl("wait", job_id, "--poll", "0.2", token=token)

    assert cancelled.code == 0 and f"job {job_id} STOPPING" in cancelled.stdout
    assert waited.code == 17 and "STOPPED" in waited.stderr


def test_clone_with_set_submits_a_changed_copy_and_follow_exits_with_its_outcome(
    platform: Platform, member: Any, image: Any, token_of: Any
) -> None:
    from jobs.models import Job

    token = token_of(member)
    spec = spec_file(platform, image, gpus=1, env={"A": "1"})
    job_id = platform.gpuctl("submit", "-f", spec, "-q", token=token, drive=False).stdout.strip()

    cloned = platform.gpuctl(
        "clone", job_id, "--set", "replicas=2", "--set", "env.SIM_EXIT_CODE=137", "--follow", token=token
    )

    assert cloned.code == 11, cloned.stderr
    copy = Job.objects.exclude(pk=int(job_id)).get()
    assert (copy.replicas, copy.gpus, copy.env) == (2, 1, {"A": "1", "SIM_EXIT_CODE": "137"})
    assert "[job-" in cloned.stdout  # two replicas: lines carry their task's name


def test_describe_shows_placement_predicted_slowdown_queue_and_events(
    platform: Platform, member: Any, image: Any, token_of: Any, team: Any
) -> None:
    token = token_of(member)
    done = platform.gpuctl("submit", "-f", spec_file(platform, image, gpus=2), "-q", token=token, drive=False)
    platform.drive_until(int(done.stdout), {"SUCCEEDED"})
    # One job at a time for the team: the second waits in the queue with the quota's reason.
    Quota.objects.filter(team=team).update(max_concurrent_jobs=1)
    platform.gpuctl(
        "submit", "-f", spec_file(platform, image, gpus=1, sim_duration_seconds=3600), token=token
    )
    platform.drive()
    waiting = platform.gpuctl(
        "submit", "-f", spec_file(platform, image, gpus=1), "-q", token=token, drive=False
    )
    platform.drive()

    placed = platform.gpuctl("describe", done.stdout.strip(), token=token, drive=False)
    queued = platform.gpuctl("describe", waiting.stdout.strip(), token=token, drive=False)
    as_json = json.loads(platform.gpuctl("describe", done.stdout.strip(), "-o", "json", token=token).stdout)

    assert placed.code == 0 and "SUCCEEDED" in placed.stdout and "Tasks" in placed.stdout
    task = as_json["tasks"][0]
    assert task["node"] in placed.stdout and ",".join(map(str, task["gpu_indices"])) in placed.stdout
    assert [e["to_status"] for e in as_json["events"]][-1] == "SUCCEEDED"
    assert "Queue position:" in queued.stdout and "Reason:" in queued.stdout


def test_queue_quota_top_and_images_print_tables_and_json(
    platform: Platform, member: Any, image: Any, token_of: Any, team: Any
) -> None:
    token = token_of(member)
    Quota.objects.filter(team=team).update(max_concurrent_jobs=1)  # the second job waits for quota
    platform.gpuctl(
        "submit", "-f", spec_file(platform, image, gpu_milli=500, sim_duration_seconds=3600), token=token
    )
    platform.drive()
    platform.gpuctl("submit", "-f", spec_file(platform, image, gpus=1), token=token, drive=False)
    platform.drive()

    queue = platform.gpuctl("queue", "-o", "json", token=token, drive=False)
    quota = platform.gpuctl("quota", token=token, drive=False)
    top = platform.gpuctl("top", token=token, drive=False)
    images = platform.gpuctl("images", token=token, drive=False)

    assert [(j["gpus"], j["queue_position"]) for j in json.loads(queue.stdout)] == [(1, 1)]
    assert quota.code == 0 and "vision" in quota.stdout
    assert top.code == 0 and "vision/" in top.stdout and "GPUs allocated" in top.stdout
    assert images.code == 0 and image.reference in images.stdout


def test_an_unknown_job_exits_3_and_an_unreachable_server_exits_6(
    platform: Platform, member: Any, token_of: Any
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    token = token_of(member)

    missing = platform.gpuctl("describe", "999999", token=token, drive=False)
    unreachable = platform.gpuctl(
        "--url", f"http://127.0.0.1:{closed_port}", "list", token=token, drive=False
    )
    not_signed_in = platform.gpuctl("list", drive=False)

    assert missing.code == 3 and missing.stderr.count("\n") == 1
    assert unreachable.code == 6 and "cannot reach" in unreachable.stderr
    assert not_signed_in.code == 4 and "gpuctl login" in not_signed_in.stderr


def test_a_spec_the_api_refuses_exits_2_with_its_field_errors(
    platform: Platform, member: Any, image: Any, token_of: Any
) -> None:
    spec = spec_file(platform, image, gpus=1, gpu_mili=250)

    unknown = platform.gpuctl("submit", "-f", spec, token=token_of(member), drive=False)
    invalid = platform.gpuctl(
        "submit", "-f", spec, "--set", "gpu_mili=", "--set", "replicas=0", token=token_of(member), drive=False
    )

    assert (unknown.code, invalid.code) == (2, 2)
    assert unknown.stderr == "gpuctl: error: Invalid input: gpu_mili: Unknown field.\n"
    assert invalid.stderr == "gpuctl: error: Invalid input: replicas: Must be between 1 and 64.\n"
    assert invalid.stderr.count("\n") == 1


def test_profiles_keep_several_servers_and_env_overrides_them(
    platform: Platform, member: Any, token_of: Any
) -> None:
    from gpuctl import config

    path = Path(platform.env()["GPUCTL_CONFIG"])
    config.store_login(url="http://127.0.0.1:9", token="stale", username="max", profile="old", path=path)
    config.store_login(url=platform.url, token=token_of(member), username="max", profile="lab", path=path)
    env = platform.env()
    del env["GPUCTL_URL"]

    current = platform.gpuctl("list", drive=False, env=env)  # "lab", stored last
    old = platform.gpuctl("--profile", "old", "list", drive=False, env=env)
    overridden = platform.gpuctl(
        "--profile", "old", "list", drive=False, env={**env, "GPUCTL_URL": platform.url}
    )
    unknown = platform.gpuctl("--profile", "nope", "list", drive=False, env=env)
    listed = platform.gpuctl("profiles", drive=False, env=env)

    assert current.code == 0
    assert old.code == 6  # nothing listens on port 9
    assert overridden.code == 4  # the right server, but the "old" profile's token is not valid there
    assert unknown.code == 2 and "lab, old" in unknown.stderr
    assert listed.stdout.splitlines()[0].startswith("* lab")


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_a_script_for_the_shell(platform: Platform, shell: str) -> None:
    result = platform.gpuctl("completion", shell, drive=False)

    assert result.code == 0 and "_GPUCTL_COMPLETE" in result.stdout
    assert {"bash": "complete ", "zsh": "compdef", "fish": "complete "}[shell] in result.stdout


def test_usage_errors_are_one_line_and_exit_2(platform: Platform) -> None:
    for args in (
        ["submit"],
        ["wait", "abc"],
        ["list", "--output", "xml"],
        ["nope"],
        ["submit", "-f", "/no/such.yaml"],
    ):
        result = platform.gpuctl(*args, token="t", drive=False)
        assert result.code == 2, (args, result.stderr)
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("gpuctl: error: "), result.stderr
