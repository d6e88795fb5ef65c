"""Who may read ``/metrics``.

With ``METRICS_TOKEN`` set a request needs ``Authorization: Bearer <token>`` (compared in constant
time); without it only loopback clients and the networks of ``METRICS_ALLOWED_NETWORKS`` are served.
The client address is REMOTE_ADDR: a Prometheus in the cluster scrapes the pod directly, and an
X-Forwarded-For header is the client's to invent.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable

from django.conf import settings
from django.http import HttpRequest


def _networks(values: Iterable[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(v.strip(), strict=False) for v in values if v.strip()]


def client_allowed(address: str, networks: Iterable[str]) -> bool:
    """Whether ``address`` is loopback or inside one of ``networks`` (CIDR strings)."""
    try:
        ip = ipaddress.ip_address((address or "").split("%", 1)[0])
    except ValueError:
        return False
    if ip.is_loopback:
        return True
    mapped = getattr(ip, "ipv4_mapped", None)
    return any((ip in net) or (mapped is not None and mapped in net) for net in _networks(networks))


def metrics_access(request: HttpRequest) -> tuple[bool, int]:
    """(allowed, status to answer when not): 401 without the right token, 403 outside the networks."""
    token = str(getattr(settings, "METRICS_TOKEN", "") or "")
    if token:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
            return True, 200
        return False, 401
    networks = getattr(settings, "METRICS_ALLOWED_NETWORKS", [])
    if client_allowed(request.META.get("REMOTE_ADDR", ""), networks):
        return True, 200
    return False, 403
