"""Fixtures for the runtime tests (cycle, bind, sync): a small simulated cluster on injected time.

Import the fixtures you use into the test module. Jobs are submitted through ``job_submit``, the same
service the REST API calls, so the tests start from exactly what a user's submission stores.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from accounts.models import Membership, Role, Team
from images.models import JobImage
from jobs import scheduling
from jobs.binding import job_bind, task_spec
from jobs.models import Job
from jobs.placements import task_placement
from jobs.services import job_submit
from jobs.specs import JobSpec
from jobs.states import JobStatus
from jobs.sync import sync_status
from quotas.services import quota_ensure
from scheduler.backends.simulated import SimulatedBackend


class FakeClock:
    def __init__(self, t: float = 1_700_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sim(tmp_path: Path, clock: FakeClock, settings: Any) -> SimulatedBackend:
    """One node with 2 T4s; time scale 1 (clock seconds are simulated seconds): pending 2 s, startup 10 s."""
    settings.SIM_STATE_PATH = str(tmp_path / "cluster.json")
    settings.SIM_CLUSTER = "small"
    # A private cache: the single-flight lock of one test never meets another's.
    settings.CACHES = {
        **settings.CACHES,  # other aliases (the throttle cache) stay
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": str(tmp_path)},
    }
    return SimulatedBackend(settings.SIM_STATE_PATH, cluster="small", time_scale=1.0, clock=clock)


@pytest.fixture
def image(db: Any) -> JobImage:
    return JobImage.objects.create(name="pytorch", tag="2.4", framework="pytorch")


def make_member(username: str, team: Team) -> Any:
    user = get_user_model().objects.create_user(username, f"{username}@example.org", "pw-12345678")
    Membership.objects.create(user=user, team=team, role=Role.MEMBER)
    return user


def make_team(slug: str) -> Team:
    team = Team.objects.create(name=slug.title(), slug=slug)
    quota_ensure(team=team)
    return team


@pytest.fixture
def team(db: Any) -> Team:
    return make_team("vision")


@pytest.fixture
def researcher(team: Team) -> Any:
    return make_member("ada", team)


def submit(user: Any, image: JobImage, team: Team | None = None, **spec: Any) -> Job:
    spec.setdefault("command", ["python", "train.py"])
    return job_submit(user=user, spec=JobSpec(**spec), image=image, team=team)


def statuses(job: Job) -> list[str]:
    """The job's story: every status it entered, in order."""
    return list(job.events.order_by("created_at", "id").values_list("to_status", flat=True))


def local_backend(settings: Any, tmp_path: Path, virtual_gpus: int) -> Iterator[Any]:
    """The platform configured for the local backend with ``virtual_gpus`` virtual GPUs.

    A generator for fixtures (``yield from``): afterwards no task may outlive its test.
    """
    from jobs.cluster import get_backend
    from scheduler.backends.local import LocalBackend

    settings.CLUSTER_BACKEND = "local"
    settings.LOCAL_WORK_DIR = str(tmp_path / "local")
    settings.LOCAL_NODE_NAME = "lab-server"
    settings.LOCAL_GPUS = "virtual"
    settings.LOCAL_VIRTUAL_GPUS = virtual_gpus
    settings.LOCAL_CONTAINERS = "never"
    settings.LOCAL_STOP_GRACE_SECONDS = 0.5
    # tmp_path is root's 0700 folder: no job user could reach it. Switching users is tested in
    # tests/scheduler/backends/test_local_backend_isolation.py.
    settings.LOCAL_JOB_USER = ""
    settings.CACHES = {
        **settings.CACHES,  # other aliases (the throttle cache) stay
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": str(tmp_path)},
    }
    backend = get_backend()
    assert isinstance(backend, LocalBackend)
    yield backend
    for job_dir in backend.jobs_dir.glob("[0-9]*"):
        backend.delete_job(job_dir.name)


def started(backend: Any, job: Job) -> Job:
    """Schedule and bind ``job``: it is STARTING on ``backend``."""
    scheduling.run_scheduling_cycle(backend=backend)
    assert job_bind(job_id=job.pk, backend=backend) == "bound"
    job.refresh_from_db()
    assert job.status == JobStatus.STARTING.value
    return job


def running_on_sim(sim: SimulatedBackend, clock: FakeClock, job: Job) -> Job:
    """Bind the admitted ``job``, let the simulated cluster start it, and sync: it is RUNNING."""
    assert job_bind(job_id=job.pk, backend=sim) == "bound"
    clock.advance(15)  # past the simulated pending and start-up
    sync_status(backend=sim)
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING.value
    return job


def reasons(job: Job, status: JobStatus) -> list[str]:
    """The reasons of the job's events that entered ``status``."""
    return list(job.events.filter(to_status=status.value).values_list("reason", flat=True))


def fail_replica_1(sim: SimulatedBackend, clock: Any, job: Job, env: dict[str, str]) -> None:
    """Rebind replica 1 of a running 2-task job as a task that fails at once with ``env``."""
    sim.delete_job(str(job.pk))
    for task in job.tasks.all():
        spec = task_spec(job, task)
        if task.index == 1:
            spec.env.update(env)
            spec.sim_duration_s = 0.0
        sim.bind(spec, task_placement(job, task))
    clock.advance(20)
