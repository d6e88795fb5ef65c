"""``python -m scheduler.agent``: publish this node's GPUs on its Kubernetes Node, every period.

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


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    try:
        import pynvml
    except ImportError:
        print(
            "error: no NVIDIA driver available (the pynvml module, nvidia-ml-py, is not installed)",
            file=sys.stderr,
        )
        return EXIT_NO_DRIVER
    try:
        return run(args, pynvml)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
