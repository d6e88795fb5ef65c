"""``python -m scheduler.agent``: publish this node's GPUs on its Kubernetes Node, every period.

``python -m scheduler.agent report --url URL --token TOKEN --interval S``: profile the platform's
jobs that run alone on this node's GPUs and post their samples to the platform
(``scheduler.agent.report``; the token defaults to $NODE_AGENT_TOKEN).

Runs as the node-agent DaemonSet (deploy/node-agent.yaml) with NODE_NAME from the downward API.
Exit codes: 0 after ``--once``; 2 bad usage or configuration; 3 no NVIDIA driver (one line).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from scheduler.agent.inventory import NoNvidiaDriver, read_inventory, start
from scheduler.agent.publish import node_patch, publish

log = logging.getLogger("scheduler.agent")

EXIT_CONFIG = 2
EXIT_NO_DRIVER = 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m scheduler.agent", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--node-name", default=os.environ.get("NODE_NAME", ""), help="Node to publish on ($NODE_NAME)"
    )
    parser.add_argument("--interval", type=float, default=os.environ.get("AGENT_INTERVAL_S", "30"))
    parser.add_argument("--once", action="store_true", help="publish once and exit")
    parser.add_argument(
        "--dry-run", action="store_true", help="print the Node patch as JSON, publish nothing"
    )
    parser.add_argument("--no-topology", action="store_true", help="skip the NVLink/PCIe link matrix")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--in-cluster", action="store_true", help="use the pod's service account")
    where.add_argument(
        "--kubeconfig", default=None, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)"
    )
    return parser


def _core_api(args: argparse.Namespace) -> Any:
    import kubernetes.client
    import kubernetes.config

    configuration = kubernetes.client.Configuration()
    if args.in_cluster:
        kubernetes.config.load_incluster_config(client_configuration=configuration)
    else:
        kubernetes.config.load_kube_config(config_file=args.kubeconfig, client_configuration=configuration)
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))


def run(
    args: argparse.Namespace,
    nvml: Any,
    api_factory: Callable[[argparse.Namespace], Any] = _core_api,
    sleep: Callable[[float], None] = time.sleep,
    stop: Callable[[], bool] = lambda: False,
) -> int:
    """The agent loop; ``nvml``, ``api_factory``, ``sleep`` and ``stop`` are injectable for tests."""
    if not args.dry_run and not args.node_name:
        print("error: no node name: pass --node-name or set NODE_NAME", file=sys.stderr)
        return EXIT_CONFIG
    if args.interval <= 0:
        print("error: --interval must be positive", file=sys.stderr)
        return EXIT_CONFIG
    try:
        start(nvml)
    except NoNvidiaDriver as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_NO_DRIVER
    try:
        api = None
        if not args.dry_run:
            try:
                api = api_factory(args)
            except Exception as exc:  # ConfigException, missing files: one line, not a traceback
                print(
                    f"error: cannot load Kubernetes configuration: {str(exc).splitlines()[0] if str(exc) else exc!r}",
                    file=sys.stderr,
                )
                return EXIT_CONFIG
        while True:
            inventory = read_inventory(nvml, with_topology=not args.no_topology)
            if args.dry_run:
                print(json.dumps(node_patch(inventory), indent=2))
            else:
                try:
                    publish(api, args.node_name, inventory)
                    log.info("published %d GPUs on node %s", len(inventory.gpus), args.node_name)
                except Exception as exc:
                    # A flaky API server must not kill the DaemonSet pod; the next period retries.
                    log.warning(
                        "publishing on node %s failed: %s",
                        args.node_name,
                        str(exc).splitlines()[0] if str(exc) else exc,
                    )
                    if args.once:
                        print(f"error: publishing on node {args.node_name} failed", file=sys.stderr)
                        return 1
            if args.once or args.dry_run or stop():
                return 0
            sleep(args.interval)
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def build_report_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m scheduler.agent report", description="Post solo profiles of jobs alone on a GPU"
    )
    parser.add_argument(
        "--url", default=os.environ.get("PLATFORM_URL", ""), help="Platform URL ($PLATFORM_URL)"
    )
    parser.add_argument("--token", default=os.environ.get("NODE_AGENT_TOKEN", ""), help="($NODE_AGENT_TOKEN)")
    parser.add_argument("--node-name", default=os.environ.get("NODE_NAME", ""), help="($NODE_NAME)")
    parser.add_argument("--interval", type=float, default=float(os.environ.get("AGENT_SAMPLE_S", "5")))
    parser.add_argument("--profile-seconds", type=float, default=60.0, help="steady-state span per profile")
    parser.add_argument("--warmup-seconds", type=float, default=10.0, help="samples dropped at the start")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--in-cluster", action="store_true", help="use the pod's service account")
    where.add_argument(
        "--kubeconfig", default=None, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)"
    )
    return parser


def run_report(
    args: argparse.Namespace,
    nvml: Any,
    source_factory: Callable[[argparse.Namespace], Callable[[], Any]] | None = None,
    client: Any = None,
    sleep: Callable[[float], None] = time.sleep,
    stop: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """The report loop (``scheduler.agent.report``); NVML, the run source, the HTTP client, time and
    ``stop`` are injectable for tests."""
    from scheduler.agent.profiling import NoNvidiaDriver as NoDriver
    from scheduler.agent.profiling import open_nvml
    from scheduler.agent.report import ReportLoop, pod_source

    problems = [
        text
        for bad, text in (
            (not args.url, "no platform URL: pass --url or set PLATFORM_URL"),
            (not args.token.strip(), "no node agent token: pass --token or set NODE_AGENT_TOKEN"),
            (args.interval <= 0, "--interval must be positive"),
            (args.profile_seconds <= 0 or args.warmup_seconds < 0, "--profile-seconds must be positive"),
            (
                source_factory is None and not args.node_name,
                "no node name: pass --node-name or set NODE_NAME",
            ),
        )
        if bad
    ]
    if problems:
        print(f"error: {problems[0]}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        lib = open_nvml(nvml)
    except NoDriver as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_NO_DRIVER
    try:
        if source_factory is None:
            try:
                api = _core_api(args)
            except Exception as exc:
                print(
                    f"error: cannot load Kubernetes configuration: {str(exc).splitlines()[0]}",
                    file=sys.stderr,
                )
                return EXIT_CONFIG
            source = pod_source(api, args.node_name)
        else:
            source = source_factory(args)
        loop = ReportLoop(
            nvml=lib,
            source=source,
            url=args.url,
            token=args.token,
            profile_s=args.profile_seconds,
            warmup_s=args.warmup_seconds,
            client=client,
        )
        while True:
            try:
                loop.step(clock())
            except Exception as exc:  # an API server or NVML hiccup: the next period retries
                log.warning("report period failed: %s", str(exc).splitlines()[0] if str(exc) else repr(exc))
            if stop():
                return 0
            sleep(args.interval)
    finally:
        with contextlib.suppress(Exception):
            lib.nvmlShutdown()


def _import_pynvml() -> Any:
    try:
        import pynvml
    except ImportError:
        print(
            "error: no NVIDIA driver available (the pynvml module, nvidia-ml-py, is not installed)",
            file=sys.stderr,
        )
        return None
    return pynvml


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    argv = sys.argv[1:] if argv is None else argv
    report = bool(argv) and argv[0] == "report"
    args = build_report_parser().parse_args(argv[1:]) if report else build_parser().parse_args(argv)
    pynvml = _import_pynvml()
    if pynvml is None:
        return EXIT_NO_DRIVER
    try:
        return run_report(args, pynvml) if report else run(args, pynvml)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
