"""The node agent's report loop (``python -m scheduler.agent report``) posts a job's solo run to the
platform's real endpoint, served by Django's live server, and the platform stores its ``SoloProfile``.

Only the driver is recorded (``FakeNvml``, a DGX-1's readings) and the run source is a fixed list
(what the Kubernetes pod listing would return); the loop, its HTTP client and the endpoint are real.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from fake_nvml import FakeNvml

from jobs.models import SoloProfile
from jobs.profiling_services import command_hash
from scheduler.agent.__main__ import EXIT_CONFIG, EXIT_NO_DRIVER, build_report_parser, main, run_report
from scheduler.agent.report import Run, alone, runs_from_pods

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "node-secret-0123456789"
IMAGE = "registry.local/pytorch:2.4"
COMMAND = "python train.py --model resnet50"


class Clock:
    def __init__(self) -> None:
        self.t = 100.0
        self.periods = 0

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds
        self.periods += 1


def report_args(url: str, *extra: str) -> argparse.Namespace:
    return build_report_parser().parse_args(
        [
            "--url",
            url,
            "--token",
            TOKEN,
            "--interval",
            "5",
            "--profile-seconds",
            "20",
            "--warmup-seconds",
            "5",
            *extra,
        ]
    )


def test_the_report_loop_posts_a_solo_run_and_the_platform_stores_its_profile(
    live_server: Any, settings: Any, tmp_path: Path
) -> None:
    settings.NODE_AGENT_TOKEN = TOKEN
    rate = tmp_path / "throughput"
    rate.write_text("410.0\n412.5\n")
    runs = [
        Run("job-1-0", 1, IMAGE, COMMAND, throughput_file=str(rate)),  # alone on GPU 1 (37 % SM recorded)
        Run("job-2-0", 2, IMAGE, "python other.py"),  # GPU 2 is shared by two tasks: never profiled
        Run("job-3-0", 2, IMAGE, "python third.py"),
    ]
    clock = Clock()
    nvml = FakeNvml.load("nvml_dgx1_v100.json")
    code = run_report(
        report_args(live_server.url),
        nvml,
        source_factory=lambda _args: lambda: runs,
        sleep=clock.sleep,
        stop=lambda: clock.periods >= 8,
        clock=clock,
    )
    assert code == 0 and nvml.shutdowns == 1

    (row,) = SoloProfile.objects.all()
    assert (row.image, row.command_hash, row.gpu_model) == (
        IMAGE,
        command_hash(COMMAND),
        "Tesla V100-SXM2-32GB",
    )
    # Samples at t = 0, 5, ..., 25: the window of 20 s past the 5 s warm-up ends at t = 25, and the
    # warm-up sample at t = 0 is dropped: five steady samples, posted once although the loop ran on.
    assert row.samples == 5
    assert (row.gpu_util, row.mem_util, row.gpu_memory_mib) == (37.0, 12.0, 2048.0)
    assert row.solo_throughput == pytest.approx(412.5)


def test_a_refused_post_is_retried_next_period_with_the_same_samples(live_server: Any, settings: Any) -> None:
    settings.NODE_AGENT_TOKEN = ""  # the platform refuses every post until its token is set
    clock = Clock()

    def stop() -> bool:
        if clock.periods == 5:
            settings.NODE_AGENT_TOKEN = TOKEN
        return clock.periods >= 7

    code = run_report(
        report_args(live_server.url),
        FakeNvml.load("nvml_dgx1_v100.json"),
        source_factory=lambda _args: lambda: [Run("job-1-0", 1, IMAGE, COMMAND)],
        sleep=clock.sleep,
        stop=stop,
        clock=clock,
    )
    assert code == 0
    (row,) = SoloProfile.objects.all()
    assert row.samples == 6  # t = 5 ... 30: refused at t = 25, stored at t = 30 with every sample kept
    assert row.solo_throughput is None  # the agent saw no throughput file


def test_without_a_driver_the_report_loop_exits_with_one_line(capsys: Any) -> None:
    code = run_report(
        report_args("http://127.0.0.1:9"),
        FakeNvml.load("nvml_dgx1_v100.json", driver_loaded=False),
        source_factory=lambda _args: lambda: [],
    )
    err = capsys.readouterr().err.strip()
    assert code == EXIT_NO_DRIVER and err.startswith("error: no NVIDIA driver") and "\n" not in err


def test_the_report_command_refuses_a_missing_url_or_token(capsys: Any, monkeypatch: Any) -> None:
    monkeypatch.delenv("NODE_AGENT_TOKEN", raising=False)
    monkeypatch.delenv("PLATFORM_URL", raising=False)
    assert main(["report", "--token", TOKEN]) == EXIT_CONFIG
    assert capsys.readouterr().err.strip() == "error: no platform URL: pass --url or set PLATFORM_URL"
    assert main(["report", "--url", "http://platform:8000"]) == EXIT_CONFIG
    assert "no node agent token" in capsys.readouterr().err


def test_only_running_pods_on_one_gpu_alone_on_it_are_solo_runs() -> None:
    from types import SimpleNamespace as NS

    def pod(name: str, indices: str, phase: str = "Running") -> NS:
        container = NS(image=IMAGE, command=["python", "train.py"], args=["--lr", "0.1 x"])
        annotations = {"gpu-platform.io/gpu-indices": indices, "gpu-platform.io/task-id": f"{name}-0"}
        return NS(
            metadata=NS(name=name, annotations=annotations),
            spec=NS(containers=[container]),
            status=NS(phase=phase),
        )

    runs = runs_from_pods(
        [pod("a", "0"), pod("b", "1"), pod("c", "1"), pod("d", "2,3"), pod("e", "4", "Pending")]
    )
    assert [(r.task_id, r.gpu_index) for r in runs] == [("a-0", 0), ("b-0", 1), ("c-0", 1)]
    assert runs[0].command == "python train.py --lr '0.1 x'"
    assert [r.task_id for r in alone(runs)] == ["a-0"]
