"""``Client``: the platform's REST API (``/api/v1/``) as typed Python methods.

    from gpuctl import Client, LogChunk
    client = Client("http://127.0.0.1:8000", token="...")   # or Client.from_config()
    job = client.submit({"image": "pytorch:2.4", "gpus": 1, "replicas": 2, "command": "python train.py"})
    for item in client.follow_logs(job.id):                # LogChunk items, then one LogEnd
        if isinstance(item, LogChunk):
            print(item.text, end="")
    job = client.wait(job.id)
    assert job.status == "SUCCEEDED"

Every method either returns dataclasses (gpuctl.models) or raises a gpuctl.errors.GpuctlError whose
message is the API's own (with its field errors) and whose class says what went wrong.
"""

from __future__ import annotations

import builtins
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from gpuctl import config
from gpuctl.errors import GpuctlError, NetworkError, ServerError, UsageError, WaitTimeout, from_response
from gpuctl.models import (
    FINAL_STATUSES,
    SUBMIT_FIELDS,
    Image,
    Job,
    JobDetail,
    JobEvent,
    LogChunk,
    LogEnd,
    Quota,
    TaskLog,
    Token,
)

USER_AGENT = "gpuctl/0.1"
API = "/api/v1"


class Client:
    def __init__(
        self,
        url: str,
        token: str = "",
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Token {token}"
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, transport=transport)

    @classmethod
    def from_config(cls, profile: str | None = None, url: str | None = None, **kwargs: Any) -> Client:
        """A client for the stored profile, with GPUCTL_URL / GPUCTL_TOKEN applied."""
        chosen = config.resolve(profile=profile, url=url)
        return cls(chosen.url, chosen.token, **kwargs)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ transport

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise NetworkError(f"{self.url} did not answer in time") from None
        except httpx.HTTPError as exc:
            raise NetworkError(f"cannot reach {self.url}: {exc}") from None
        return self._decode(response)

    def _decode(self, response: httpx.Response) -> Any:
        try:
            body = response.json() if response.content else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        if response.is_success:
            if body is None and response.content:
                raise ServerError(
                    f"{self.url}{response.request.url.path} did not answer JSON: is this the platform's URL?"
                )
            return body
        return _raise(response.status_code, body)

    def _pages(self, path: str, params: dict[str, Any], limit: int | None) -> builtins.list[dict[str, Any]]:
        items: builtins.list[dict[str, Any]] = []
        page = 1
        while True:
            body = self._request("GET", path, params={**params, "page": page})
            if isinstance(body, list):  # an unpaginated list
                return body[:limit] if limit else body
            items.extend(body.get("results", []))
            if not body.get("next") or (limit and len(items) >= limit):
                return items[:limit] if limit else items
            page += 1

    # ------------------------------------------------------------------ auth

    def login(self, username: str, password: str, *, name: str = "gpuctl") -> Token:
        """Trade a username and password for a new API token (the raw token is in ``.token``)."""
        body = self._request(
            "POST", f"{API}/auth/token/", json={"username": username, "password": password, "name": name}
        )
        return Token.from_api(body)

    # ------------------------------------------------------------------ jobs

    def submit(self, spec: dict[str, Any]) -> JobDetail:
        """Submit the job ``spec`` (the body of POST /api/v1/jobs/, as in a job YAML file)."""
        return JobDetail.from_api(self._request("POST", f"{API}/jobs/", json=spec))

    def get(self, job_id: int) -> JobDetail:
        return JobDetail.from_api(self._request("GET", f"{API}/jobs/{int(job_id)}/"))

    def list(
        self,
        *,
        status: str | builtins.list[str] | None = None,
        team: str | int | None = None,
        user: str | None = None,
        ordering: str | None = None,
        limit: int | None = None,
    ) -> builtins.list[Job]:
        """Jobs of your teams, newest first. ``status`` may be several (``["QUEUED", "RUNNING"]``);
        ``team`` is an id or a slug."""
        params: dict[str, Any] = {}
        if status:
            params["status"] = ",".join(status) if isinstance(status, list) else status
        if team is not None:
            key = "team" if isinstance(team, int) or str(team).isdigit() else "team_slug"
            params[key] = team
        if user:
            params["user"] = user
        if ordering:
            params["ordering"] = ordering
        return [Job.from_api(item) for item in self._pages(f"{API}/jobs/", params, limit)]

    def events(self, job_id: int) -> builtins.list[JobEvent]:
        return [JobEvent.from_api(item) for item in self._request("GET", f"{API}/jobs/{int(job_id)}/events/")]

    def cancel(self, job_id: int) -> JobDetail:
        return JobDetail.from_api(self._request("POST", f"{API}/jobs/{int(job_id)}/cancel/"))

    def clone(self, job_id: int, overrides: dict[str, Any] | None = None) -> JobDetail:
        """Submit a copy of a job; with ``overrides``, a copy with those fields changed."""
        if not overrides:
            return JobDetail.from_api(self._request("POST", f"{API}/jobs/{int(job_id)}/clone/"))
        return self.submit({**self.spec_of(self.get(job_id)), **overrides})

    @staticmethod
    def spec_of(job: Job) -> dict[str, Any]:
        """The submit spec that would make ``job`` again (what ``clone`` copies)."""
        data = job.to_dict()
        if not data.get("gpu_milli"):
            data.pop("gpu_milli", None)  # a job's 0 means "no share"; the submit spec says null or 1-999
        return {key: data[key] for key in SUBMIT_FIELDS if key in data and data[key] is not None}

    def queue(self) -> builtins.list[Job]:
        """Queued jobs of your teams, in the scheduler's order (queue position)."""
        jobs = self.list(status="QUEUED")
        return sorted(jobs, key=lambda j: (j.queue_position is None, j.queue_position or 0, j.id))

    def wait(
        self,
        job_id: int,
        *,
        timeout: float | None = None,
        poll: float = 1.0,
        on_change: Callable[[JobDetail], None] | None = None,
    ) -> JobDetail:
        """Poll until the job has ended, and return it (whatever the outcome: look at ``status``).
        Raises WaitTimeout after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last = ""
        while True:
            job = self.get(job_id)
            if on_change is not None and job.status != last:
                on_change(job)
            last = job.status
            if job.status in FINAL_STATUSES:
                return job
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(f"job {job_id} is still {job.status} after {timeout:g} s")
            time.sleep(poll)

    # ------------------------------------------------------------------ logs

    def logs(
        self, job_id: int, *, task: int | None = None, since: int | None = None
    ) -> builtins.list[TaskLog]:
        """The output captured so far of each task (or of task ``task``), from offset ``since``."""
        params: dict[str, Any] = {}
        if task is not None:
            params["task"] = task
        if since:
            params["since"] = since
        body = self._request("GET", f"{API}/jobs/{int(job_id)}/logs/", params=params)
        return [TaskLog.from_api(item) for item in body.get("tasks", [])]

    def follow_logs(
        self, job_id: int, *, task: int | None = None, since: str | int | None = None
    ) -> Iterator[LogChunk | LogEnd]:
        """New output as it is produced, until the job ends (the last item is a LogEnd).

        The server bounds each streaming request; this reconnects from the offsets it reached, so a
        caller sees one unbroken stream."""
        offsets = str(since) if since not in (None, "", 0) else ""
        while True:
            params: dict[str, Any] = {"follow": 1}
            if task is not None:
                params["task"] = task
            if offsets:
                params["since"] = offsets
            ended: LogEnd | None = None
            timed_out = False
            for event, data in self._events(f"{API}/jobs/{int(job_id)}/logs/", params):
                if event == "log":
                    yield LogChunk(
                        task=data["task"],
                        index=int(data["index"]),
                        offset=int(data["offset"]),
                        text=data["text"],
                        reset=bool(data.get("reset")),
                    )
                elif event == "end":
                    ended = LogEnd(status=data["status"], failure_category=data.get("failure_category") or "")
                    offsets = data.get("offsets", offsets)
                elif event == "timeout":
                    timed_out = True
                    offsets = data.get("offsets", offsets)
                if event == "log":
                    offsets = _advance(offsets, int(data["index"]), int(data["offset"]) + len(data["text"]))
            if ended is not None:
                yield ended
                return
            if not timed_out:
                # The connection dropped without an end: go on from where we are, after a pause.
                time.sleep(1.0)

    def _events(self, path: str, params: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        """Server-sent events of ``path`` as (event, data) pairs."""
        headers = {"Accept": "text/event-stream"}
        try:
            with self._http.stream(
                "GET", path, params=params, headers=headers, timeout=httpx.Timeout(30.0, read=90.0)
            ) as response:
                if not response.is_success:
                    response.read()
                    self._decode(response)
                event, data = "message", builtins.list[str]()
                for line in response.iter_lines():
                    if not line:
                        if data:
                            yield event, json.loads("\n".join(data))
                        event, data = "message", []
                    elif line.startswith(":"):
                        continue  # keep-alive comment
                    elif line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("data:"):
                        data.append(line[5:].lstrip())
        except httpx.TimeoutException:
            raise NetworkError(f"{self.url} stopped sending the log stream") from None
        except httpx.HTTPError as exc:
            raise NetworkError(f"cannot reach {self.url}: {exc}") from None
        except json.JSONDecodeError:
            raise ServerError("the log stream sent something that is not JSON") from None

    # ------------------------------------------------------------------ the rest

    def quota(self) -> builtins.list[Quota]:
        return [Quota.from_api(item) for item in self._request("GET", f"{API}/quotas/")]

    def images(self) -> builtins.list[Image]:
        return [Image.from_api(item) for item in self._pages(f"{API}/images/", {}, None)]

    def cluster(self) -> dict[str, Any]:
        """Nodes, GPUs and their allocations (``GET /api/v1/cluster/``)."""
        body = self._request("GET", f"{API}/cluster/")
        return body if isinstance(body, dict) else {}

    def schema(self) -> dict[str, Any]:
        """The server's OpenAPI schema (JSON)."""
        return self._request("GET", "/api/schema/", params={"format": "json"})


def _raise(status: int, body: Any) -> Any:
    raise from_response(status, body)


def _advance(offsets: str, index: int, offset: int) -> str:
    parts: dict[int, int] = {}
    for part in filter(None, offsets.split(",")):
        key, sep, value = part.partition(":")
        if sep:
            parts[int(key)] = int(value)
    parts[index] = offset
    return ",".join(f"{k}:{v}" for k, v in sorted(parts.items()))


__all__ = ["Client", "GpuctlError", "UsageError"]
