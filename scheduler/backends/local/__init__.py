"""Local executor backend: the platform's own machine is the one node, and tasks really run.

See :mod:`scheduler.backends.local.backend` for the contract and docs/local-backend.md for usage.
"""

from scheduler.backends.local.backend import LocalBackend, classify, create_local_backend, parse_uid_range

__all__ = ["LocalBackend", "classify", "create_local_backend", "parse_uid_range"]
