"""The scheduling lease: at most one scheduling cycle binds at a time, and a dead holder stalls nobody.

A lease, not a lock: it is short (``SCHEDULING_LEASE_SECONDS``, 15 s by default), it carries an owner
token, a renewal thread extends it while the cycle runs, and it is released by an atomic
compare-and-delete, so a cycle can never release a lease another cycle has taken since. A cycle is
*fenced*: it asks ``still_held()`` before it persists a placement or evicts a job, and a cycle that
lost its lease (its renewals failed, or it was paused for longer than the lease) persists nothing and
enqueues no bind.

Where the lease lives depends on where the platform's processes can meet:

* **Redis** (the default cache is Redis, i.e. ``REDIS_URL`` is set): redis-py's ``Lock``. Acquire is
  ``SET NX PX`` with a random token; renew (``reacquire``) and release are Lua scripts that act only
  when the stored token is ours. A holder that dies stops renewing, so its lease expires within one
  lease time; workers on many machines share it.
* **A file lock** (the embedded default: file cache, filesystem broker, every process on this one
  machine): ``fcntl.flock`` on a file under ``VAR_DIR``. The kernel drops the lock the moment the
  holding process dies, so a dead holder delays nobody; a holder that is alive but hung keeps it (no
  expiry), which on one machine is the process supervisor's business (``runplatform`` stops
  everything when a child misbehaves). The file is named after the database the cycle schedules,
  so two platforms (or two test runs) sharing a ``var/`` folder never block each other.

A PostgreSQL advisory lock was considered for PostgreSQL without Redis; that combination has no
broker shared across machines here (without Redis, Celery uses the filesystem broker), so the file
lock already covers it exactly.

Fencing has a small window left: between ``still_held()`` and the commit of the placement a lease can
expire. The renewal interval (a third of the lease) makes that window the length of one database
commit, well below the lease time; the bind itself re-checks capacity on every backend
(``PlacementConflictError``), which closes the rest.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Protocol

from django.conf import settings
from django.db import connection

logger = logging.getLogger(__name__)

LEASE_KEY = "gpu-platform:scheduling-lease"
DEFAULT_LEASE_S = 15.0


class Lease(Protocol):
    token: str
    seconds: float

    def acquire(self) -> bool:
        """Take the lease if nobody holds it; never blocks."""

    def renew(self) -> bool:
        """Extend the lease; False when it is no longer ours (expired, or taken by someone else)."""

    def still_held(self) -> bool:
        """True while the lease is ours."""

    def release(self) -> None:
        """Give the lease back if it is still ours; never touches another owner's lease."""


def lease_seconds() -> float:
    return float(getattr(settings, "SCHEDULING_LEASE_SECONDS", DEFAULT_LEASE_S))


class RedisLease:
    """redis-py's ``Lock``: token compare-and-set in Lua for renew and release."""

    def __init__(self, url: str, *, key: str = LEASE_KEY, seconds: float | None = None) -> None:
        import redis

        self.seconds = seconds if seconds is not None else lease_seconds()
        self.client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
        # thread_local=False: the renewal thread must see the token the cycle's thread acquired.
        self.lock = self.client.lock(key, timeout=self.seconds, blocking=False, thread_local=False)
        self.token = uuid.uuid4().hex
        self._lost = False

    def acquire(self) -> bool:
        try:
            return bool(self.lock.acquire(blocking=False, token=self.token))
        except Exception:  # noqa: BLE001  (Redis down: no lease, the next beat tries again)
            logger.warning("could not reach Redis to take the scheduling lease", exc_info=True)
            return False

    def renew(self) -> bool:
        from redis.exceptions import LockError

        if self._lost:
            return False
        try:
            self.lock.reacquire()
            return True
        except LockError:
            self._lost = True
        except Exception:  # noqa: BLE001  (cannot prove we still hold it: treat it as lost)
            logger.warning("could not renew the scheduling lease", exc_info=True)
            self._lost = True
        return False

    def still_held(self) -> bool:
        if self._lost:
            return False
        try:
            held = bool(self.lock.owned())
        except Exception:  # noqa: BLE001
            held = False
        if not held:
            self._lost = True
        return held

    def release(self) -> None:
        from redis.exceptions import LockError

        try:
            self.lock.release()
        except LockError:
            pass  # expired or taken over: the Lua script deleted nothing, as it should
        except Exception:  # noqa: BLE001  (it expires by itself within one lease)
            logger.warning("could not release the scheduling lease", exc_info=True)


class FileLease:
    """``fcntl.flock`` on a file: released by the kernel when the holder dies."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seconds = lease_seconds()
        self.token = uuid.uuid4().hex
        self._file: IO[str] | None = None

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")  # noqa: SIM115  (kept open while the lease is held)
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        # Who holds it, for a person looking at the file; the lock itself is the flock.
        handle.seek(0)
        handle.truncate()
        handle.write(f"{self.token} pid={os.getpid()} since={time.time():.3f}\n")
        handle.flush()
        self._file = handle
        return True

    def renew(self) -> bool:
        return self.still_held()

    def still_held(self) -> bool:
        return self._file is not None and not self._file.closed

    def release(self) -> None:
        if self._file is None:
            return
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
        finally:
            self._file.close()
            self._file = None


def _database_identity() -> str:
    s = connection.settings_dict
    name = str(s.get("NAME") or "")
    ident = f"{connection.vendor}:{s.get('HOST') or ''}:{s.get('PORT') or ''}:{name}"
    if connection.vendor == "sqlite" and ("memory" in name or not name):
        # An in-memory database belongs to one process: so does its lease.
        ident += f":pid={os.getpid()}"
    return ident


def _redis_location() -> str | None:
    cache = settings.CACHES.get("default", {})
    if "redis" in str(cache.get("BACKEND", "")).lower():
        location = cache.get("LOCATION")
        if isinstance(location, (list, tuple)):
            location = location[0]
        return str(location) if location else None
    return None


def database_scope() -> str:
    """A short digest of the database being scheduled: keys and files shared between platforms (or
    test runs) on one Redis or one ``var/`` folder are scoped by it, so they never meet."""
    return hashlib.sha1(_database_identity().encode(), usedforsecurity=False).hexdigest()[:12]


def scoped_key(name: str) -> str:
    """``name`` as a cache key of this database's platform: two platforms (or test runs) sharing one
    Redis db keep their round window, rerun mark, queue order and ETAs apart."""
    return f"{name}:{database_scope()}"


def make_lease() -> Lease:
    """The lease for this deployment: Redis when the cache is Redis, else a file lock (see above)."""
    url = _redis_location()
    digest = database_scope()
    if url:
        return RedisLease(url, key=f"{LEASE_KEY}:{digest}")
    folder = Path(getattr(settings, "SCHEDULING_LEASE_DIR", "") or settings.VAR_DIR)
    return FileLease(folder / f"scheduling-lease-{digest}.lock")


class _Renewer(threading.Thread):
    """Renews the lease every third of its lifetime until stopped or until a renewal fails."""

    def __init__(self, lease: Lease, every_s: float) -> None:
        super().__init__(name="scheduling-lease-renewer", daemon=True)
        self.lease = lease
        self.every_s = every_s
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.every_s):
            if not self.lease.renew():
                logger.warning("the scheduling lease was lost; this cycle binds nothing more")
                return


_local = threading.local()


def current() -> Lease | None:
    """The lease of the scheduling cycle running in this thread, if any."""
    return getattr(_local, "lease", None)


def still_held() -> bool:
    """The fencing check of a cycle's persist step: False once this thread's cycle lost its lease.

    Outside a leased cycle (a test or a command calling the persist step directly) there is nothing
    to fence, and the answer is True.
    """
    lease = current()
    return True if lease is None else lease.still_held()


@contextmanager
def held(lease: Lease | None = None) -> Iterator[Lease | None]:
    """Take the scheduling lease for the duration of the block, renewed in the background.

    Yields None (and runs nothing under a lease) when another holder has it.
    """
    lease = lease or make_lease()
    if not lease.acquire():
        yield None
        return
    renewer = _Renewer(lease, max(0.05, lease.seconds / 3))
    renewer.start()
    previous = current()
    _local.lease = lease
    try:
        yield lease
    finally:
        _local.lease = previous
        renewer.stopped.set()
        renewer.join(timeout=5)
        lease.release()


class LeaseLost(Exception):
    """The cycle's lease expired or was taken over: the cycle must persist nothing more."""


def check() -> None:
    """Raise ``LeaseLost`` when this thread's cycle no longer holds its lease (see ``still_held``)."""
    if not still_held():
        raise LeaseLost("the scheduling lease was lost; this cycle persists and binds nothing more")
