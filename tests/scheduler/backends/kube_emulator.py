"""A Kubernetes API emulator (kmock) served over real HTTP from a background thread.

The official ``kubernetes`` client is synchronous and kmock is asyncio, so the emulator runs in its own
event loop on a daemon thread; tests talk to it over TCP like to any API server. Reactions (injected
faults, the Binding subresource) are added from the test thread before the calls they affect.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import kmock
import kubernetes.client

T = TypeVar("T")


class Emulator:
    """Handle on a running ``kmock.KubernetesEmulator``: its URL, its loop and its objects."""

    def __init__(
        self, handler: kmock.KubernetesEmulator, server: kmock.Server, loop: asyncio.AbstractEventLoop
    ):
        self.handler = handler
        self.server = server
        self.loop = loop

    @property
    def url(self) -> str:
        return str(self.server.url).rstrip("/")

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the emulator's loop (e.g. to publish a watch event) and wait for it."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=10)

    def api_client(self, retries: bool | None = None) -> kubernetes.client.ApiClient:
        """A client for the emulator; ``retries=False`` turns urllib3's own retries off, as the
        backend factory does, so the backend's retry layer is the only one."""
        config = kubernetes.client.Configuration()
        config.host = self.url
        if retries is not None:
            config.retries = retries
        return kubernetes.client.ApiClient(config)


@contextmanager
def running_emulator() -> Iterator[Emulator]:
    """Start a fresh emulator on a random localhost port; stop it on exit."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop: asyncio.Event | None = None
    box: dict[str, Any] = {}

    async def serve() -> None:
        nonlocal stop
        stop = asyncio.Event()
        async with kmock.KubernetesEmulator() as handler, kmock.Server(handler) as server:
            # Declared up front so listing an empty cluster answers an empty list, not 404.
            for resource in (PODS, NODES, SERVICES):
                handler.resources[resource] = {}
            box["handler"], box["server"] = handler, server
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=lambda: loop.run_until_complete(serve()), daemon=True)
    thread.start()
    if not ready.wait(timeout=10):
        raise RuntimeError("kmock emulator did not start")
    try:
        yield Emulator(box["handler"], box["server"], loop)
    finally:
        assert stop is not None
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
        loop.close()


PODS = kmock.resource("", "v1", "pods")
NODES = kmock.resource("", "v1", "nodes")
SERVICES = kmock.resource("", "v1", "services")


def serve_bindings(emu: Emulator) -> list[tuple[str, str, str]]:
    """Make ``pods/binding`` behave like the API server: set ``spec.nodeName`` of the pod, answer 201,
    and 409 when the pod is already bound. Returns the list of (namespace, pod, node) bindings seen."""
    seen: list[tuple[str, str, str]] = []

    def bind(request: kmock.Request) -> Any:
        pod = emu.handler.objects[PODS, request.namespace, request.name]
        node = request.data["target"]["name"]
        if pod.get("spec", {}).get("nodeName"):
            raise kmock.KubernetesError(
                status=409, reason="Conflict", message=f"pod {request.name} is already assigned"
            )
        pod.patch({"spec": {"nodeName": node}})
        seen.append((request.namespace, request.name, node))
        return {"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201}

    emu.handler["post", kmock.subresource("binding")] << bind
    return seen


def fail_next(
    emu: Emulator, criteria: Any, times: int, status: int, headers: dict[str, str] | None = None
) -> list[int]:
    """Answer the next ``times`` requests matching ``criteria`` with ``status``; then serve normally.
    Returns a one-element list counting the failures served."""
    served = [0]

    def fail(request: kmock.Request) -> Any:
        if served[0] >= times:
            raise kmock.ReactionMismatchError
        served[0] += 1
        raise kmock.KubernetesError(status=status, reason=f"Injected{status}", message=f"injected {status}")

    emu.handler[criteria] << fail
    return served


def add_node(
    emu: Emulator,
    name: str,
    *,
    cpu: str = "32",
    memory: str = "256Gi",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    capacity: dict[str, str] | None = None,
) -> None:
    """Register a Node like the kubelet does (the agent then patches labels and annotations on it)."""
    allocatable = {"cpu": cpu, "memory": memory, **(capacity or {})}
    emu.handler.objects[NODES, None, name] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {}), "annotations": dict(annotations or {})},
        "spec": {},
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def stored(emu: Emulator, resource: Any, namespace: str | None, name: str) -> dict[str, Any]:
    """The object as the emulator holds it now (a plain dict)."""
    return dict(emu.handler.objects[resource, namespace, name].raw)
