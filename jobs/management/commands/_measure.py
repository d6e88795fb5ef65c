"""What the benchmark commands share: percentiles, one latency summary, provenance, a child's environment.

A name starting with ``_`` is not a management command (Django skips it), so this is only imported.
"""

from __future__ import annotations

import os
import platform as host_platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

from django.conf import settings
from django.core.management.base import CommandError

from accounts.models import Team
from quotas.models import Quota


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile; 0.0 for no values (a run that measured nothing reports zeros)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def latency_summary_ms(values: list[float]) -> dict[str, float]:
    """Seconds in, milliseconds out: the one shape every latency in the API benchmarks' JSON has."""
    return {
        "count": len(values),
        "p50_ms": round(percentile(values, 50) * 1000, 2),
        "p90_ms": round(percentile(values, 90) * 1000, 2),
        "p99_ms": round(percentile(values, 99) * 1000, 2),
        "max_ms": round(max(values) * 1000, 2) if values else 0.0,
    }


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=settings.BASE_DIR, capture_output=True, text=True)
    except OSError:
        return ""
    return done.stdout.strip()


def commit() -> str:
    return _git("rev-parse", "--short", "HEAD")


def provenance(loadavg_at_start: float) -> dict[str, object]:
    """Which code measured (commit; dirty when tracked files differ from it) on what box, how loaded:
    the load average is what other work took of the cores the numbers shared."""
    return {
        "commit": commit(),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "cpus": os.cpu_count(),
        "python": host_platform.python_version(),
        "loadavg_1m_at_start": round(loadavg_at_start, 2),
        "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
    }


def platform_env(var: Path, database_url: str = "", redis_url: str = "") -> dict[str, str]:
    """The environment of a child ``manage.py`` on a fresh ``var/`` with the simulated cluster: the
    embedded default unless a database (and broker) is named."""
    root = Path(settings.BASE_DIR)
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update({"DATABASE_URL": database_url} if database_url else {})
    env.update({"REDIS_URL": redis_url} if redis_url else {})
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings.dev",
            "PYTHONPATH": os.pathsep.join([str(root / "platform"), str(root)]),
            "GPU_PLATFORM_VAR_DIR": str(var),
            "CLUSTER_BACKEND": "simulated",
            "SIM_STATE_PATH": str(var / "simulated-cluster.json"),
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def manage(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    """Run ``manage.py ARGS`` in a child with ``env``; its stdout, or a CommandError with its stderr's end."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise CommandError(f"manage.py {args[0]} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout


def _role(argv: list[str]) -> str:
    """Which part of ``runplatform`` a process is, from its command line."""
    programs = {Path(arg).name for arg in argv}  # "-m celery" or a celery script, not a word in an argument
    if "gunicorn" in programs:
        return "web"
    if "celery" in programs:
        if "beat" in argv:
            return "beat"
        if "-n" in argv and argv.index("-n") + 1 < len(argv):
            return "worker-" + argv[argv.index("-n") + 1].split("@")[0]
        return "worker"
    return "supervisor"


def _tree(root: int | None) -> list[tuple[list[str], float, int, float]]:
    """(command line, user + system CPU seconds, niceness, seconds waited for a core) of ``root`` and every live process below
    it (runplatform's children run in sessions of their own, so the parent links are what ties them
    to it); empty without a root or without /proc. A process that exited meanwhile is not there."""
    proc = Path("/proc")
    if root is None or not proc.is_dir():
        return []
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    found: dict[int, tuple[list[str], float, int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        # Fields after the command name in parentheses (which may hold spaces): state, ppid, ...;
        # utime, stime and nice are fields 14, 15 and 19 of proc(5).
        fields = stat[stat.rindex(")") + 2 :].split()
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        argv = [arg.decode(errors="replace") for arg in raw.split(b"\0") if arg]
        found[pid] = (argv, (int(fields[11]) + int(fields[12])) / ticks, int(fields[16]))
    below: list[tuple[list[str], float, int, float]] = []
    for pid, row in found.items():
        ancestor, hops = pid, 0
        while ancestor not in (root, 0, 1) and ancestor in parents and hops < 64:
            ancestor, hops = parents[ancestor], hops + 1
        if ancestor == root:
            below.append((*row[:3], _run_queue_wait_s(pid)))
    return below


def _run_queue_wait_s(pid: int) -> float:
    """Seconds the threads of ``pid`` have spent runnable but waiting for a core (schedstat's second
    field, nanoseconds; 0.0 where the kernel does not keep it)."""
    waited = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0.0
    for task in tasks:
        try:
            waited += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return waited / 1e9


class RoleUsage(NamedTuple):
    """What one role of ``root``'s process tree has used so far: CPU seconds (user + system), seconds
    runnable but waiting for a core (the queueing a latency under load is made of), and its niceness
    (the largest where a role has several processes)."""

    cpu_s: float
    waited_s: float
    nice: int


def role_usage(root: int | None) -> dict[str, RoleUsage]:
    """``root``'s process tree (see ``_tree``) by role, read in one walk of /proc."""
    usage: dict[str, RoleUsage] = {}
    for argv, cpu, nice, waited in _tree(root):
        role = _role(argv)
        seen = usage.get(role, RoleUsage(0.0, 0.0, nice))
        usage[role] = RoleUsage(seen.cpu_s + cpu, seen.waited_s + waited, max(seen.nice, nice))
    return dict(sorted(usage.items()))


def cpu_split(
    before: dict[str, float], after: dict[str, float], clients_s: float, requests: int
) -> dict[str, float]:
    """CPU seconds per role between two samples, the clients' own, and the web tier's per request."""
    roles = {role: round(after[role] - before.get(role, 0.0), 2) for role in sorted(after)}
    split: dict[str, float] = {**roles, "clients": round(clients_s, 2)}
    if "web" in roles and requests:
        split["web_ms_per_request"] = round(roles["web"] / requests * 1000, 2)
    return split


def unlimited_quota(team: Team, *, guaranteed_gpu_milli: int) -> None:
    """Room for everything: a benchmark measures answers and cycles, not quota refusals."""
    Quota.objects.update_or_create(
        team=team,
        defaults={
            "max_gpu_milli": 10**9,
            "per_user_gpu_milli": 10**9,
            "max_concurrent_jobs": 10**6,
            "gpu_hours_per_month": 10.0**12,
            "guaranteed_gpu_milli": guaranteed_gpu_milli,
        },
    )
