"""Start-up pieces of the runtime: demo data, system checks, backend choice and the cluster view."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command

from accounts.models import Membership, Role, Team
from images.models import JobImage
from jobs import checks, cluster, scheduling
from jobs.binding import job_bind
from quotas.models import Quota
from scheduler.backends.simulated import SimulatedBackend
from tests.jobs.runtime_fixtures import (  # noqa: F401  (fixtures)
    clock,
    image,
    researcher,
    sim,
    submit,
    team,
)


@pytest.fixture
def var_dir(tmp_path: Path, settings: Any) -> Path:
    settings.VAR_DIR = tmp_path / "var"
    settings.SIM_STATE_PATH = str(tmp_path / "var" / "cluster.json")
    settings.CLUSTER_BACKEND = "simulated"
    settings.SIM_CLUSTER = "demo"
    return settings.VAR_DIR


def seed() -> str:
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def test_seed_demo_creates_users_that_can_log_in_with_the_printed_passwords(db: Any, var_dir: Path) -> None:
    output = seed()
    creds = json.loads((var_dir / "demo-credentials.json").read_text())
    assert set(creds) == {"admin", "researcher", "viewer"}
    for name, password in creds.items():
        assert f"password: {password}" in output
        assert authenticate(username=name, password=password) is not None
    assert get_user_model().objects.get(username="admin").is_superuser
    team = Team.objects.get(slug="demo")
    roles = dict(Membership.objects.filter(team=team).values_list("user__username", "role"))
    assert roles == {"admin": Role.OWNER, "researcher": Role.MEMBER, "viewer": Role.VIEWER}
    assert Quota.objects.get(team=team).max_gpu_milli == 16000
    assert JobImage.objects.filter(is_active=True).count() >= 3
    assert (var_dir / "cluster.json").exists()


def test_seed_demo_is_idempotent_and_prints_the_same_passwords(db: Any, var_dir: Path) -> None:
    first = seed()
    counts = (get_user_model().objects.count(), Team.objects.count(), JobImage.objects.count())
    second = seed()
    assert (get_user_model().objects.count(), Team.objects.count(), JobImage.objects.count()) == counts
    assert [line for line in first.splitlines() if "password" in line] == [
        line for line in second.splitlines() if "password" in line
    ]


def test_seed_demo_keeps_the_simulated_cluster_state(db: Any, var_dir: Path) -> None:
    seed()
    backend = cluster.get_backend()
    assert isinstance(backend, SimulatedBackend)
    from scheduler.backends.base import TaskSpec
    from scheduler.model import Placement

    backend.bind(
        TaskSpec(job_id="7", task_id="job-7-0"), Placement(job_id="7", task_id="job-7-0", node="t4-1")
    )
    seed()
    assert [s.task_id for s in backend.task_statuses()] == ["job-7-0"]


def test_the_system_checks_reject_an_unknown_profile_and_backend(settings: Any) -> None:
    settings.SCHEDULER_PROFILE = "no-such-profile"
    assert [e.id for e in checks.check_scheduler_profile()] == ["jobs.E001"]
    settings.CLUSTER_BACKEND = "mainframe"
    assert [e.id for e in checks.check_cluster_backend()] == ["jobs.E002"]


def test_the_system_checks_pass_on_the_defaults(settings: Any) -> None:
    settings.SCHEDULER_PROFILE = "default"
    settings.CLUSTER_BACKEND = "simulated"
    settings.SIM_CLUSTER = "demo"
    assert checks.check_scheduler_profile() == [] and checks.check_cluster_backend() == []


def test_an_unknown_backend_name_is_refused_with_the_known_ones() -> None:
    with pytest.raises(cluster.BackendNotAvailable, match="simulated, kubernetes, local"):
        cluster.get_backend("mainframe")


def test_the_cluster_view_shows_each_gpu_allocation_with_its_job_and_team(
    sim, researcher, image, team
) -> None:
    job = submit(researcher, image, gpu_milli=250, gpu_memory_mib=2048)
    scheduling.run_scheduling_cycle(backend=sim)
    job_bind(job_id=job.pk, backend=sim)
    view = cluster.cluster_view(sim)
    json.dumps(view)  # JSON-able
    (node,) = view["nodes"]
    assert node["name"] == "t4-1" and node["virtual"] is True
    gpu0 = node["gpus"][0]
    assert gpu0["used_milli"] == 250 and gpu0["free_milli"] == 750 and gpu0["model"] == "T4"
    assert gpu0["allocations"] == [
        {
            "job_id": job.pk,
            "task_id": f"job-{job.pk}-0",
            "team": team.slug,
            "gpu_milli": 250,
            "gpu_memory_mib": 2048,
        }
    ]
    assert node["gpus"][1]["allocations"] == []
    # Nothing measures a simulated GPU: the view says "unknown", never a made-up number.
    assert gpu0["utilization_pct"] is None
    assert view["totals"] == {"gpus": 2, "gpu_milli": 2000, "used_gpu_milli": 250}
