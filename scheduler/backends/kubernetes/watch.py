"""The cache of our pods, kept current by a watch, as informers do.

``refresh()`` watches from the last resourceVersion for a short window; it relists instead when there
is no version yet, when the last list is older than ``resync_s`` (a periodic resync catches anything a
watch missed), and when the watch answers 410 Gone (history compacted) or breaks. A pod that vanishes
without our asking (node drain, eviction, garbage collection) is kept as a FAILED task (PLATFORM), so a
task never silently disappears from its job's view; one we deleted, or preempted, is not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import kubernetes.watch
from kubernetes.client.exceptions import ApiException

from scheduler.backends.base import TaskPhase, TaskStatus
from scheduler.backends.kubernetes import pods as p
from scheduler.backends.kubernetes.client import RETRYABLE_NETWORK, ApiCaller

log = logging.getLogger(__name__)


class PodWatch:
    """Our pods of one namespace by name, the resourceVersion to resume from, and lost tasks."""

    def __init__(
        self, client: ApiCaller, *, watch_timeout_s: float, resync_s: float, clock: Callable[[], float]
    ) -> None:
        self.client = client
        self.watch_timeout_s = watch_timeout_s
        self.resync_s = resync_s
        self.clock = clock
        self.pods: dict[str, dict[str, Any]] = {}
        # Tasks whose pod disappeared without our asking, and pods we are deleting ourselves.
        self.lost: dict[str, TaskStatus] = {}
        self.deleting: set[str] = set()
        self.relists = 0
        self._resource_version: str | None = None
        self._listed_at = float("-inf")

    def relist(self) -> None:
        """Replace the cache with a fresh list; remember its resourceVersion for the next watch."""
        api, namespace = self.client.api, self.client.namespace
        result = self.client.call(
            f"list pods in {namespace}", api.list_namespaced_pod, namespace, label_selector=p.job_selector()
        )
        pods = (self.client.sanitize(item) for item in result.items)
        fresh = {p.name_of(pod): pod for pod in pods if p.is_ours(pod)}
        for name, pod in self.pods.items():
            if name not in fresh:
                self.forget(pod)
        self.pods = fresh
        self._resource_version = result.metadata.resource_version if result.metadata else None
        self._listed_at = self.clock()
        self.relists += 1

    def forget(self, pod: dict[str, Any]) -> None:
        """A pod is gone. If we did not delete it and it had not finished, its task failed: someone or
        something removed it under the job's feet."""
        name = p.name_of(pod)
        if name in self.deleting:
            self.deleting.discard(name)
            return
        status = p.task_status(pod)
        if p.is_preempted(pod):
            status = p.preempted_status(pod, status)
        elif not status.phase.finished:
            status.phase = TaskPhase.FAILED
            status.failure_category = "PLATFORM"
            status.message = "the pod was deleted outside the platform"
        self.lost[name] = status

    def apply(self, event: dict[str, Any]) -> None:
        pod = event.get("raw_object") or {}
        version = (pod.get("metadata") or {}).get("resourceVersion")
        if event.get("type") == "BOOKMARK":
            if version:
                self._resource_version = version
            return
        if not p.is_ours(pod):
            return
        if version:
            self._resource_version = version
        name = p.name_of(pod)
        if event.get("type") == "DELETED":
            self.pods.pop(name, None)
            self.forget(pod)
        else:
            self.pods[name] = pod
            self.lost.pop(name, None)

    def refresh(self, timeout_s: float | None = None) -> None:
        """Bring the cache up to date: watch for up to ``timeout_s`` seconds, or relist (see above)."""
        if self._resource_version is None or self.clock() - self._listed_at >= self.resync_s:
            # A fresh list is the whole truth: no need to wait on a watch right after it.
            self.relist()
            return
        timeout = self.watch_timeout_s if timeout_s is None else timeout_s
        api, namespace = self.client.api, self.client.namespace
        stream = kubernetes.watch.Watch()
        try:
            for event in stream.stream(
                api.list_namespaced_pod,
                namespace,
                label_selector=p.job_selector(),
                resource_version=self._resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=max(1, int(timeout)),
                # The read timeout ends a quiet stream: a server that ignores timeout_seconds still
                # returns control to us.
                _request_timeout=(self.client.request_timeout_s, timeout),
            ):
                self.apply(event)
        except ApiException as exc:
            if exc.status == 410:
                log.info("watch of pods expired (410 Gone); relisting")
            else:
                log.warning("watch of pods failed (%s %s); relisting", exc.status, exc.reason)
            self.relist()
        except RETRYABLE_NETWORK:
            pass  # the end of a quiet watch window (read timeout) or a dropped connection
        finally:
            stream.stop()

    def statuses(self) -> list[TaskStatus]:
        """Every task of ours: live pods from the cache, plus pods that vanished without our asking."""
        statuses = [p.task_status(pod) for pod in self.pods.values()]
        return statuses + [status for name, status in self.lost.items() if name not in self.pods]

    def drop(self, name: str) -> None:
        """We deleted pod ``name``: its disappearance is not a loss."""
        self.deleting.add(name)
        self.pods.pop(name, None)
        self.lost.pop(name, None)
