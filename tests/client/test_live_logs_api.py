"""``GET /api/v1/jobs/{id}/logs/?follow=1&since=...``: live logs as server-sent events, on the
simulated backend (the stream reads ``backend.logs()`` again and again, as it does on every backend)."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from tests.client.conftest import Platform

pytestmark = pytest.mark.django_db(transaction=True)


def parse_events(body: str) -> list[tuple[str, str | None, Any]]:
    """(event, id, data) of each server-sent event; comments are returned as ("comment", None, text)."""
    events: list[tuple[str, str | None, Any]] = []
    for block in body.split("\n\n"):
        if not block.strip():
            continue
        event, event_id, data = "message", None, []
        for line in block.split("\n"):
            if line.startswith(":"):
                events.append(("comment", None, line[1:].strip()))
            elif line.startswith("event: "):
                event = line[7:]
            elif line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: "):
                data.append(line[6:])
        if data:
            events.append((event, event_id, json.loads("\n".join(data))))
    return events


def submit(api: Any, image: Any, **fields: Any) -> int:
    body = {"image": image.reference, "command": ["python", "train.py"], **fields}
    response = api.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 201, response.content
    return int(response.json()["id"])


def stream(api: Any, url: str, **headers: str) -> tuple[Any, str]:
    response = api.get(url, HTTP_ACCEPT="text/event-stream", **headers)
    if not getattr(response, "streaming", False):
        return response, response.content.decode()
    return response, b"".join(response.streaming_content).decode()


def test_follow_streams_each_task_s_output_in_order_and_ends_when_the_job_ends(
    platform: Platform, member: Any, image: Any, token_of: Any
) -> None:
    """Over real HTTP, while the job runs: every character once, then an end event."""
    token = token_of(member)
    headers = {"Authorization": f"Token {token}", "Accept": "text/event-stream"}
    create = httpx.post(
        f"{platform.url}/api/v1/jobs/",
        json={
            "image": image.reference,
            "command": ["train"],
            "gpus": 1,
            "replicas": 2,
            "sim_duration_seconds": 900,
        },
        headers={"Authorization": f"Token {token}"},
    )
    job_id = create.json()["id"]
    received: dict[int, str] = {0: "", 1: ""}
    arrivals: list[tuple[float, str]] = []
    url = f"{platform.url}/api/v1/jobs/{job_id}/logs/?follow=1"
    since = ""
    ended: dict[str, Any] = {}
    deadline = time.monotonic() + 60
    while not ended and time.monotonic() < deadline:
        # The live server serves each request in its own thread; drive the cluster between reads.
        with httpx.stream(
            "GET", url + (f"&since={since}" if since else ""), headers=headers, timeout=30
        ) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            buffer = ""
            for piece in r.iter_text():
                platform.drive()
                buffer += piece
                *blocks, buffer = buffer.split("\n\n")
                for event, _, data in parse_events("\n\n".join(blocks) + "\n\n"):
                    if event == "log":
                        assert data["offset"] == len(received[data["index"]])
                        received[data["index"]] += data["text"]
                        arrivals.append((time.monotonic(), event))
                    elif event in ("end", "timeout"):
                        since = data["offsets"]
                        if event == "end":
                            ended = data
    assert ended["status"] == "SUCCEEDED"
    final = httpx.get(
        f"{platform.url}/api/v1/jobs/{job_id}/logs/", headers={"Authorization": f"Token {token}"}
    )
    logs = {t["index"]: t["log"] for t in final.json()["tasks"]}
    assert received == logs
    assert all("training step 1500" in text for text in received.values())
    assert arrivals[-1][0] - arrivals[0][0] > 0.5  # output came in as the job ran


def test_since_cuts_what_a_task_already_sent(
    sim_cluster: Any, member: Any, image: Any, api_client_for: Any
) -> None:
    api = api_client_for(member)
    job_id = submit(api, image, gpu_milli=250)
    drive_to_end(job_id)
    full = api.get(f"/api/v1/jobs/{job_id}/logs/?task=0").json()["tasks"][0]["log"]

    cut = api.get(f"/api/v1/jobs/{job_id}/logs/?task=0&since=10").json()["tasks"][0]["log"]
    per_task = api.get(f"/api/v1/jobs/{job_id}/logs/?since=0:12").json()["tasks"][0]["log"]

    assert (cut, per_task) == (full[10:], full[12:])


def test_a_follow_of_an_ended_job_sends_the_rest_then_ends(
    sim_cluster: Any, member: Any, image: Any, api_client_for: Any
) -> None:
    api = api_client_for(member)
    job_id = submit(api, image, gpu_milli=250)
    failed_id = submit(api, image, gpu_milli=250, env={"SIM_EXIT_CODE": "137"})
    drive_to_end(job_id)
    drive_to_end(failed_id)
    full = api.get(f"/api/v1/jobs/{job_id}/logs/").json()["tasks"][0]["log"]

    response, body = stream(api, f"/api/v1/jobs/{job_id}/logs/?follow=1&since=0:5")
    events = [e for e in parse_events(body) if e[0] != "comment"]
    _, failed_body = stream(api, f"/api/v1/jobs/{failed_id}/logs/?follow=1")

    assert response["Cache-Control"] == "no-cache"
    assert [e[0] for e in events] == ["log", "end"]
    assert events[0][2]["text"] == full[5:] and events[0][1] == f"0:{len(full)}"
    assert events[1][2] == {"status": "SUCCEEDED", "failure_category": "", "offsets": f"0:{len(full)}"}
    end = parse_events(failed_body)[-1]
    assert end[0] == "end" and (end[2]["status"], end[2]["failure_category"]) == ("FAILED", "OOM")


def test_the_stream_resumes_from_last_event_id_as_an_eventsource_reconnects(
    sim_cluster: Any, member: Any, image: Any, api_client_for: Any
) -> None:
    api = api_client_for(member)
    job_id = submit(api, image, gpu_milli=250)
    drive_to_end(job_id)
    full = api.get(f"/api/v1/jobs/{job_id}/logs/").json()["tasks"][0]["log"]

    # The header comes with reconnects to the same URL: it is newer than the URL's since.
    _, body = stream(api, f"/api/v1/jobs/{job_id}/logs/?follow=1&since=0:5", HTTP_LAST_EVENT_ID="0:20")

    logs = [data for event, _, data in parse_events(body) if event == "log"]
    assert [(d["offset"], d["text"]) for d in logs] == [(20, full[20:])]


def test_a_follow_is_bounded_in_time_and_says_where_to_go_on(
    sim_cluster: Any, member: Any, image: Any, api_client_for: Any, settings: Any
) -> None:
    settings.LOGS_FOLLOW_MAX_SECONDS = 0.4
    settings.LOGS_FOLLOW_KEEPALIVE_SECONDS = 0.1
    api = api_client_for(member)
    job_id = submit(api, image, gpu_milli=250)  # never scheduled here: it stays QUEUED

    started = time.monotonic()
    _, body = stream(api, f"/api/v1/jobs/{job_id}/logs/?follow=1")

    events = parse_events(body)
    assert events[-1] == ("timeout", None, {"offsets": ""})
    assert ("comment", None, "keep-alive") in events
    assert time.monotonic() - started < 30  # bounded, not held until the job ends


@pytest.mark.parametrize(
    ("since", "field_text"),
    [
        ("abc", "not a whole number"),
        ("0:-1", "0 or more"),
        ("x:1", "not a task index"),
        ("1:2:3", "whole number"),
    ],
)
def test_a_bad_since_is_a_400_with_the_field_s_message_even_for_an_event_stream(
    sim_cluster: Any, member: Any, image: Any, api_client_for: Any, since: str, field_text: str
) -> None:
    api = api_client_for(member)
    job_id = submit(api, image, gpu_milli=250)

    response, body = stream(api, f"/api/v1/jobs/{job_id}/logs/?follow=1&since={since}")

    assert response.status_code == 400
    error = json.loads(body)
    assert set(error) == {"message", "code", "extra"}
    assert field_text in " ".join(error["extra"]["fields"]["since"])


def test_who_may_follow_a_job_s_logs(
    sim_cluster: Any, personas: dict[str, Any], image: Any, api_client_for: Any, settings: Any
) -> None:
    settings.LOGS_FOLLOW_MAX_SECONDS = 0.2
    job_id = submit(api_client_for(personas["member"]), image, gpu_milli=250)
    expected = {"owner": 200, "member": 200, "viewer": 200, "outsider": 404, "anonymous": 401}

    codes = {
        name: stream(api_client_for(user), f"/api/v1/jobs/{job_id}/logs/?follow=1")[0].status_code
        for name, user in personas.items()
    }

    assert codes == expected


def test_a_backend_error_during_a_follow_is_a_comment_and_the_stream_goes_on(
    sim_cluster: Any, member: Any, image: Any, api_client_for: Any, settings: Any
) -> None:
    from jobs import log_stream
    from jobs.models import Job
    from scheduler.backends.base import BackendError

    api = api_client_for(member)
    job = Job.objects.get(pk=submit(api, image, gpu_milli=250))
    answers: list[Any] = [
        BackendError("node agent unreachable"),
        [{"task": "t", "index": 0, "log": "hello\n"}],
    ]

    def read_logs(_job: Any, _index: int | None) -> Any:
        answer = answers.pop(0) if answers else [{"task": "t", "index": 0, "log": "hello\n"}]
        if isinstance(answer, Exception):
            raise answer
        Job.objects.filter(pk=job.pk).update(status="SUCCEEDED")
        return answer

    body = "".join(
        log_stream.follow_events(
            job=job, task_index=None, since={}, read_logs=read_logs, sleep=lambda s: None
        )
    )

    events = parse_events(body)
    assert ("comment", None, "backend unavailable: node agent unreachable") in events
    assert [e[0] for e in events if e[0] != "comment"] == ["log", "end"]


def test_output_that_became_shorter_is_sent_again_from_the_start() -> None:
    """A task's next run (after a requeue) starts a new log: the stream says so with reset."""
    from jobs import log_stream

    class FakeJob:
        pk = 0

    runs = iter(["first run, long output\n", "second\n"])

    def read_logs(_job: Any, _index: int | None) -> Any:
        return [{"task": "t", "index": 0, "log": next(runs)}]

    stream_ = log_stream.follow_events(
        job=FakeJob(),  # type: ignore[arg-type]
        task_index=None,
        since={},
        read_logs=read_logs,
        sleep=lambda s: None,
        status_of=lambda job: ("RUNNING", ""),
    )
    events = [parse_events(next(stream_)) for _ in range(3)]

    assert events[1][0][2]["reset"] is False and events[2][0][2] == {
        "task": "t", "index": 0, "offset": 0, "text": "second\n", "reset": True,
    }  # fmt: skip


def test_parse_offsets_reads_one_offset_or_index_offset_pairs() -> None:
    from jobs.log_stream import format_offsets, parse_offsets

    assert parse_offsets("120") == {-1: 120}
    assert parse_offsets("0:120,1:40") == {0: 120, 1: 40}
    assert parse_offsets("") == {}
    assert format_offsets({1: 40, 0: 120, -1: 7}) == "0:120,1:40"


def drive_to_end(job_id: int) -> None:
    from jobs import binding, scheduling, sync
    from jobs.cluster import get_backend
    from jobs.models import Job

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        backend = get_backend()
        scheduling.run_scheduling_cycle(backend=backend)
        for pk in Job.objects.filter(status="ADMITTED").values_list("pk", flat=True):
            binding.job_bind(job_id=pk, backend=backend)
        sync.sync_status(backend=backend)
        if Job.objects.get(pk=job_id).status in ("SUCCEEDED", "FAILED", "STOPPED"):
            return
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not end")


def test_a_blank_since_means_from_the_start(
    sim_cluster: Any, member: Any, image: Any, api_client_for: Any
) -> None:
    api = api_client_for(member)
    job_id = submit(api, image, gpu_milli=250)
    drive_to_end(job_id)
    full = api.get(f"/api/v1/jobs/{job_id}/logs/").json()

    blank = api.get(f"/api/v1/jobs/{job_id}/logs/?since=&follow=false")

    assert blank.status_code == 200 and blank.json() == full


def test_a_busy_database_during_a_follow_does_not_end_the_stream() -> None:
    """SQLite answers "database table is locked" while a writer holds the table: the stream keeps
    the last status it read, sends the output, and ends once the job's end can be read."""
    from django.db import OperationalError

    from jobs import log_stream

    class FakeJob:
        pk = 0

    answers: list[Any] = [OperationalError("database table is locked"), ("RUNNING", ""), ("SUCCEEDED", "")]

    def status_of(_job: Any) -> tuple[str, str]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    stream_ = log_stream.follow_events(
        job=FakeJob(),  # type: ignore[arg-type]
        task_index=None,
        since={},
        read_logs=lambda _job, _index: [{"task": "t", "index": 0, "log": "hello\n"}],
        sleep=lambda s: None,
        status_of=status_of,
    )
    names = [event[0] for chunk in stream_ for event in parse_events(chunk)]

    assert names.count("log") == 1 and names[-1] == "end"
