"""Calls to the Kubernetes API with retries, and the one-line errors they end in.

5xx, 429 and network errors are retried with capped exponential backoff and jitter (``sleep`` is
injectable; a ``Retry-After`` header is honoured up to the cap), then raised as TransientBackendError;
401/403 become PermanentBackendError naming the missing permission; any other 4xx is permanent at once.
A status the caller expects (409 on a repeated create, 404 on a delete) comes back as ``Tolerated``.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Iterable
from typing import Any

import kubernetes.client
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

from scheduler.backends.base import PermanentBackendError, TransientBackendError

log = logging.getLogger(__name__)

RETRYABLE_NETWORK = (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError)


class Tolerated:
    """An API answer the caller expected (e.g. 409 on a repeat create); carries the status code."""

    def __init__(self, status: int) -> None:
        self.status = status


class ApiCaller:
    """The core API of one namespace, called with the retry rules above."""

    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        *,
        namespace: str,
        max_attempts: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 10.0,
        request_timeout_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self.api = kubernetes.client.CoreV1Api(api_client)
        self.namespace = namespace
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.request_timeout_s = request_timeout_s
        self.sleep = sleep
        self.rng = rng or random.Random()

    def call(
        self, what: str, fn: Callable[..., Any], *args: Any, tolerate: Iterable[int] = (), **kwargs: Any
    ) -> Any:
        """Call the API; retry transient faults with capped exponential backoff and jitter.

        Returns the result, or ``Tolerated(status)`` when the API answered a status in ``tolerate``.
        """
        tolerated = frozenset(tolerate)
        kwargs.setdefault("_request_timeout", self.request_timeout_s)
        last = ""
        for attempt in range(self.max_attempts):
            retry_after: float | None = None
            try:
                return fn(*args, **kwargs)
            except ApiException as exc:
                status = int(exc.status or 0)
                if status in tolerated:
                    return Tolerated(status)
                if status in (401, 403):
                    raise PermanentBackendError(self._forbidden_message(what, status)) from None
                if status != 429 and status < 500:
                    raise PermanentBackendError(
                        f"Kubernetes API rejected {what}: {status} {exc.reason}: {_api_message(exc)}"
                    ) from None
                last = f"{status} {exc.reason}"
                retry_after = _retry_after(exc)
            except RETRYABLE_NETWORK as exc:
                last = f"{type(exc).__name__}: {exc}"
            if attempt + 1 < self.max_attempts:
                delay = min(self.max_backoff_s, self.backoff_s * (2**attempt)) * self.rng.uniform(0.5, 1.0)
                if retry_after is not None:
                    delay = min(self.max_backoff_s, max(delay, retry_after))
                log.info("kubernetes %s failed (%s); retry %d in %.2fs", what, last, attempt + 1, delay)
                self.sleep(delay)
        raise TransientBackendError(
            f"Kubernetes API {what} still failing after {self.max_attempts} attempts: {last}"
        )

    def sanitize(self, obj: Any) -> Any:
        """A client model object as the plain dict the API sent."""
        return self.api.api_client.sanitize_for_serialization(obj)

    def _forbidden_message(self, what: str, status: int) -> str:
        if status == 401:
            return (
                f"Kubernetes API refused {what}: 401 Unauthorized. The credentials in the kubeconfig or "
                "the service account token are invalid or expired."
            )
        return (
            f"Kubernetes API refused {what}: 403 Forbidden. The scheduler's service account lacks this "
            f"permission in namespace {self.namespace!r}; apply deploy/rbac.yaml (ClusterRole "
            "gpu-platform-scheduler) or check KUBERNETES_NAMESPACE."
        )


def _retry_after(exc: ApiException) -> float | None:
    headers = exc.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _api_message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body or "{}").get("message") or exc.body or "")[:300]
    except (ValueError, AttributeError):
        return str(exc.body or "")[:300]
