"""gpuctl, a real subprocess, against the live server over HTTP, on the simulated cluster."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.client.conftest import Platform

pytestmark = pytest.mark.django_db(transaction=True)


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def job_yaml(image: Any, **fields: Any) -> str:
    lines = [f"image: {image.reference}", "command: python train.py --epochs 3"]
    lines += [f"{key}: {json.dumps(value)}" for key, value in fields.items()]
    return "\n".join(lines) + "\n"


def test_submit_from_yaml_then_wait_exits_0_when_the_job_succeeds(
    platform: Platform, member: Any, image: Any, token_of: Any
) -> None:
    token = token_of(member)
    spec = write(platform.home / "job.yaml", job_yaml(image, name="resnet", gpus=1, replicas=2))

    submitted = platform.gpuctl("submit", "-f", spec, "-q", token=token, drive=False)
    assert submitted.code == 0, submitted.stderr
    job_id = int(submitted.stdout.strip())

    waited = platform.gpuctl("wait", str(job_id), "--poll", "0.2", token=token)
    assert waited.code == 0, waited.stderr
    assert f"job {job_id} SUCCEEDED" in waited.stderr
    from jobs.models import Job

    job = Job.objects.get(pk=job_id)
    assert (job.status, job.name, job.replicas, job.gpus) == ("SUCCEEDED", "resnet", 2, 1)


def test_wait_gives_the_failure_category_s_exit_code(
    platform: Platform, member: Any, image: Any, token_of: Any
) -> None:
    token = token_of(member)
    oom = write(platform.home / "oom.yaml", job_yaml(image, gpu_milli=250, env={"SIM_EXIT_CODE": "137"}))
    user = write(platform.home / "user.yaml", job_yaml(image, gpu_milli=250))

    oom_job = platform.gpuctl("submit", "-f", oom, "-q", token=token, drive=False).stdout.strip()
    user_job = platform.gpuctl(
        "submit", "-f", user, "--set", "command=false", "-q", token=token, drive=False
    ).stdout.strip()

    oom_wait = platform.gpuctl("wait", oom_job, "--poll", "0.2", token=token)
    user_wait = platform.gpuctl("wait", user_job, "--poll", "0.2", token=token)
    assert (oom_wait.code, user_wait.code) == (11, 10), (oom_wait.stderr, user_wait.stderr)
    assert "FAILED (OOM)" in oom_wait.stderr and "FAILED (USER)" in user_wait.stderr


def test_logs_follow_receives_output_while_the_job_runs_and_stops_when_it_ends(
    platform: Platform, member: Any, image: Any, token_of: Any
) -> None:
    from jobs.models import Job

    token = token_of(member)
    # 20 simulated minutes at 300x: about 4 s of real time, one "training step" line per minute.
    spec = write(platform.home / "job.yaml", job_yaml(image, gpu_milli=500, sim_duration_seconds=1200))
    job_id = int(platform.gpuctl("submit", "-f", spec, "-q", token=token, drive=False).stdout)

    followed = platform.gpuctl("logs", "-f", str(job_id), token=token)

    assert followed.code == 0, followed.stderr
    ended_at = next(t for t, j, s in platform.statuses if j == job_id and s == "SUCCEEDED")
    steps = [(t, line) for t, line in followed.lines if "training step" in line]
    assert len(steps) == 20
    # Lines came in while the job ran (as the simulated minutes passed), not all at the end...
    started = platform.statuses[0][0]
    assert steps[0][0] + started < ended_at
    assert steps[-1][0] - steps[0][0] > 1.0
    # ...and the stream (across the server's 1 s bound, so reconnected) lost and repeated nothing.
    assert followed.stdout.count("exited with code 0") == 1
    assert [int(line.rsplit(" ", 1)[1]) for _, line in steps] == list(range(100, 2001, 100))
    assert Job.objects.get(pk=job_id).status == "SUCCEEDED"


def test_a_viewer_s_submit_exits_4_with_the_api_s_message(
    platform: Platform, viewer: Any, image: Any, token_of: Any
) -> None:
    spec = write(platform.home / "job.yaml", job_yaml(image, gpu_milli=250))

    result = platform.gpuctl("submit", "-f", spec, token=token_of(viewer), drive=False)

    assert result.code == 4
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuctl: error: ")
    assert "viewer" in lines[0].lower() or "permission" in lines[0].lower() or "may not" in lines[0].lower()
    assert "Traceback" not in result.stderr


def test_bad_yaml_exits_2_and_names_the_wrong_line(platform: Platform, member: Any, token_of: Any) -> None:
    spec = write(
        platform.home / "bad.yaml", "name: resnet\ngpus: 1\ncommand: [python, train.py\nreplicas: 2\n"
    )

    result = platform.gpuctl("submit", "-f", spec, token=token_of(member), drive=False)

    assert result.code == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "bad.yaml" in result.stderr and "line 4" in result.stderr


def test_login_stores_the_token_in_a_file_only_its_owner_can_read(platform: Platform, member: Any) -> None:
    env = platform.env()
    del env["GPUCTL_URL"]

    result = platform.gpuctl(
        "login", platform.url, "-u", member.username, "--password-stdin",
        stdin=f"{member.username}-password-1\n", drive=False, env=env,
    )  # fmt: skip

    assert result.code == 0, result.stderr
    path = platform.home / "gpuctl" / "config.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    stored = json.loads(path.read_text())["profiles"]["default"]
    assert stored["url"] == platform.url and stored["username"] == member.username
    # The stored token works with nothing else configured.
    listed = platform.gpuctl("list", "-o", "json", drive=False, env=env)
    assert listed.code == 0 and json.loads(listed.stdout) == []
