"""The container path of the local backend against a stand-in Docker SDK (no engine runs here):
what the runner asks the engine for, how it records the end, and when bind picks a container."""

from __future__ import annotations

import signal
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from local_backend_helpers import make_backend, placement, spec

from scheduler.backends.base import TaskPhase
from scheduler.backends.local import LocalBackend, containers
from scheduler.backends.local import runner as files


class ImageNotFound(Exception):
    pass


class APIError(Exception):
    pass


class DockerException(Exception):
    pass


class FakeContainer:
    def __init__(self, final_state: dict[str, Any], polls: int = 2) -> None:
        self.id = "c0ffee"
        self.final_state = final_state
        self.polls = polls
        self.attrs: dict[str, Any] = {"State": {"Status": "running"}}
        self.stopped_with: int | None = None
        self.removed = False

    def reload(self) -> None:
        self.polls -= 1
        if self.polls <= 0:
            self.attrs = {"State": self.final_state}

    def logs(self, stream: bool, follow: bool) -> Iterator[bytes]:
        yield b"hello from the container\n"

    def stop(self, timeout: int) -> None:
        self.stopped_with = timeout
        self.attrs = {"State": self.final_state}

    def remove(self, force: bool) -> None:
        self.removed = True


class FakeEngine:
    def __init__(self, container: FakeContainer, images: set[str], pullable: bool = True) -> None:
        self.container = container
        self.known = images
        self.pullable = pullable
        self.run_kwargs: dict[str, Any] = {}
        self.images = types.SimpleNamespace(get=self._get, pull=self._pull)
        self.containers = types.SimpleNamespace(run=self._run)

    def _get(self, image: str) -> object:
        if image not in self.known:
            raise ImageNotFound(f"No such image: {image}")
        return object()

    def _pull(self, image: str) -> None:
        if not self.pullable:
            raise ImageNotFound(f"pull access denied for {image}\nmore detail")
        self.known.add(image)

    def _run(self, image: str, **kwargs: Any) -> FakeContainer:
        self.run_kwargs = {"image": image, **kwargs}
        return self.container


@pytest.fixture
def fake_docker(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Install a stand-in ``docker`` package; ``holder["engine"]`` is what DockerClient returns."""
    holder: dict[str, Any] = {}
    docker = types.ModuleType("docker")
    errors = types.ModuleType("docker.errors")
    errors.ImageNotFound = ImageNotFound  # type: ignore[attr-defined]
    errors.APIError = APIError  # type: ignore[attr-defined]
    errors.DockerException = DockerException  # type: ignore[attr-defined]
    dtypes = types.ModuleType("docker.types")
    dtypes.DeviceRequest = lambda **kw: ("DeviceRequest", kw)  # type: ignore[attr-defined]
    docker.errors = errors  # type: ignore[attr-defined]
    docker.types = dtypes  # type: ignore[attr-defined]
    docker.DockerClient = lambda **kw: holder["engine"]  # type: ignore[attr-defined]
    docker.from_env = lambda **kw: holder["engine"]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "docker", docker)
    monkeypatch.setitem(sys.modules, "docker.errors", errors)
    monkeypatch.setitem(sys.modules, "docker.types", dtypes)
    # The runner installs its own signal handlers; give pytest its own back afterwards.
    saved = {
        sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
    }
    yield holder
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def _container_task(backend: LocalBackend, job: str, **extra: Any) -> Path:
    """A task folder as bind writes it for a container, without starting a runner process."""
    task_dir = backend.task_dir(job, f"job-{job}-0")
    task_dir.mkdir(parents=True)
    task = {
        "job_id": job,
        "task_id": f"job-{job}-0",
        "rank": 0,
        "argv": ["python", "train.py"],
        "env": {"CUDA_VISIBLE_DEVICES": "0", "NVIDIA_VISIBLE_DEVICES": "1"},
        "mode": "container",
        "container": {
            "image": "gpu-platform/pytorch:2.3",
            "name": f"gpu-platform-{job}-job-{job}-0",
            "docker_host": "unix:///var/run/docker.sock",
            "gpu_indices": [1],
            "labels": {"gpu-platform.io/job-id": job},
        },
        "placement": placement(job, gpus=(1,)).to_dict(),
        "max_runtime_s": None,
        "grace_s": 3,
        "created_at": time.time(),
        **extra,
    }
    files.write_json(task_dir / files.TASK_FILE, task)
    return task_dir


def _only_status(backend: LocalBackend, job: str) -> Any:
    [status] = backend.task_statuses(job)
    return status


def test_the_runner_starts_a_container_with_the_assigned_gpus_and_copies_its_output(
    tmp_path: Path, fake_docker: dict[str, Any]
) -> None:
    backend = make_backend(tmp_path)
    container = FakeContainer({"Status": "exited", "ExitCode": 0, "OOMKilled": False})
    engine = fake_docker["engine"] = FakeEngine(container, images={"gpu-platform/pytorch:2.3"})
    task_dir = _container_task(backend, "50")

    files.Runner(task_dir).run()

    kwargs = engine.run_kwargs
    assert kwargs["image"] == "gpu-platform/pytorch:2.3" and kwargs["command"] == ["python", "train.py"]
    assert kwargs["device_requests"] == [("DeviceRequest", {"device_ids": ["1"], "capabilities": [["gpu"]]})]
    assert kwargs["environment"]["CUDA_VISIBLE_DEVICES"] == "0" and kwargs["detach"] is True
    assert kwargs["volumes"] == {str(task_dir / "work"): {"bind": "/workspace", "mode": "rw"}}
    assert container.removed
    assert _only_status(backend, "50").phase is TaskPhase.SUCCEEDED
    assert backend.logs("50", "job-50-0") == "hello from the container\n"


def test_a_container_killed_for_memory_fails_as_oom(tmp_path: Path, fake_docker: dict[str, Any]) -> None:
    backend = make_backend(tmp_path)
    container = FakeContainer({"Status": "exited", "ExitCode": 137, "OOMKilled": True})
    fake_docker["engine"] = FakeEngine(container, images={"gpu-platform/pytorch:2.3"})

    files.Runner(_container_task(backend, "51")).run()

    st = _only_status(backend, "51")
    assert (st.phase, st.exit_code, st.failure_category) == (TaskPhase.FAILED, 137, "OOM")


def test_a_container_over_its_max_runtime_is_stopped_with_the_grace_period(
    tmp_path: Path, fake_docker: dict[str, Any]
) -> None:
    backend = make_backend(tmp_path)
    container = FakeContainer({"Status": "exited", "ExitCode": 143, "OOMKilled": False}, polls=10**6)
    fake_docker["engine"] = FakeEngine(container, images={"gpu-platform/pytorch:2.3"})

    files.Runner(_container_task(backend, "52", max_runtime_s=0.01)).run()

    assert container.stopped_with == 3
    st = _only_status(backend, "52")
    assert (st.phase, st.failure_category) == (TaskPhase.FAILED, "TIMEOUT")


def test_an_image_that_cannot_be_pulled_fails_with_category_image(
    tmp_path: Path, fake_docker: dict[str, Any]
) -> None:
    backend = make_backend(tmp_path)
    fake_docker["engine"] = FakeEngine(FakeContainer({}), images=set(), pullable=False)

    files.Runner(_container_task(backend, "53")).run()

    st = _only_status(backend, "53")
    assert (st.phase, st.failure_category) == (TaskPhase.FAILED, "IMAGE")
    assert "pull access denied" in st.message and "\n" not in st.message


@pytest.mark.parametrize(
    ("mode", "images", "expected"),
    [
        ("auto", {"img:1"}, "container"),
        ("auto", set(), "process"),
        ("always", set(), "container"),
        ("never", {"img:1"}, "process"),
    ],
)
def test_bind_picks_a_container_per_the_mode_and_the_engines_images(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, images: set[str], expected: str
) -> None:
    engine = FakeEngine(FakeContainer({}), images=images)
    monkeypatch.setattr(containers, "connect", lambda docker_host="": engine)
    monkeypatch.setattr(containers, "has_image", lambda client, image: image in client.known)
    backend = make_backend(tmp_path, containers_mode=mode)

    chosen, container_spec = backend._execution_mode(
        spec("54", ["python"], image="img:1"), placement("54", gpus=(1,))
    )

    assert chosen == expected
    if expected == "container":
        assert container_spec is not None and container_spec["gpu_indices"] == [1]


def test_a_preempted_container_is_stopped_with_the_preemption_grace_and_keeps_its_checkpoint_mount(
    tmp_path: Path, fake_docker: dict[str, Any]
) -> None:
    backend = make_backend(tmp_path)
    container = FakeContainer({"Status": "exited", "ExitCode": 0, "OOMKilled": False}, polls=10**6)
    engine = fake_docker["engine"] = FakeEngine(container, images={"gpu-platform/pytorch:2.3"})
    checkpoint = tmp_path / "checkpoint"
    task_dir = _container_task(
        backend,
        "55",
        container={
            "image": "gpu-platform/pytorch:2.3",
            "name": "gpu-platform-55-job-55-0",
            "gpu_indices": [1],
            "checkpoint_dir": str(checkpoint),
            "user": "3000007:998",
        },
    )
    reload = container.reload

    def preempted_while_running() -> None:  # what preempt_job writes, once the container runs
        reload()
        if not (task_dir / files.PREEMPT_FILE).exists():
            files.write_json(task_dir / files.PREEMPT_FILE, {"at": time.time(), "grace_s": 25})

    container.reload = preempted_while_running  # type: ignore[method-assign]

    files.Runner(task_dir).run()

    assert container.stopped_with == 25
    assert engine.run_kwargs["volumes"][str(checkpoint)] == {"bind": "/checkpoints", "mode": "rw"}
    assert engine.run_kwargs["user"] == "3000007:998"
    st = _only_status(backend, "55")
    assert (st.phase, st.failure_category) == (TaskPhase.FAILED, "")
    assert st.message.startswith("preempted")  # exit code 0 after SIGTERM is not a success
