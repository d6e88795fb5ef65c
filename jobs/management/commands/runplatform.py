"""Run the whole platform in the foreground: migrate, seed demo data, then web + worker + beat.

``make run`` calls this. The three servers are child processes in their own sessions, so Ctrl-C (or
SIGTERM) reaches only this supervisor, which then stops every child with SIGTERM (SIGKILL after a grace
period). If any child dies on its own, the others are stopped too and the exit status is non-zero:
a half-running platform is worse than none.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

GRACE_S = 10.0
# Background work that may wait for a core while a person waits for an answer: the scheduling cycle,
# the status sync, the reconciler and beat. The bind worker keeps the web tier's priority: the local
# backend's jobs are its descendants and would inherit a lowered one.
BACKGROUND = ("worker-cycle", "worker-sync", "worker-reconcile", "beat")
BACKGROUND_NICE = 10


def background_priority(name: str, increment: int) -> Callable[[], object] | None:
    """What lowers child ``name``'s CPU priority by ``increment`` before it runs, or None where it
    keeps the supervisor's (the web tier, the bind worker, or an increment of 0)."""
    if name not in BACKGROUND or increment <= 0:
        return None
    return functools.partial(os.nice, increment)


class Command(BaseCommand):
    help = "Migrate, load demo data and run web, Celery workers and beat until Ctrl-C."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--web",
            choices=("runserver", "gunicorn"),
            default="gunicorn",
            help="web server: gunicorn (default) or Django's runserver (one process, for debugging)",
        )
        parser.add_argument(
            "--web-workers",
            type=int,
            default=0,
            help="gunicorn worker processes (default: 2 x CPU cores + 1, at most 9)",
        )
        parser.add_argument("--no-seed", action="store_true", help="skip seed_demo")
        parser.add_argument(
            "--background-nice",
            type=int,
            default=BACKGROUND_NICE,
            help="niceness added to the cycle, sync and reconcile workers and beat, so API requests get "
            "a core first when both want one (0: the web tier's priority)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not 0 <= options["background_nice"] <= 19:
            raise CommandError("--background-nice must be 0-19")
        root = Path(settings.BASE_DIR)
        self._prepare_dirs()
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("Database migrated.")
        if not options["no_seed"]:
            call_command("seed_demo", stdout=self.stdout)
        env = self._child_env(root)
        url = f"http://{options['host']}:{options['port']}"
        commands = {
            "web": self._web_command(root, options),
            **self._worker_commands(),
            "beat": [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "beat",
                "-l",
                "warning",  # beat's INFO line per tick would drown the worker's useful output
                "-s",
                str(settings.CELERY_BEAT_SCHEDULE_FILENAME),
            ],
        }
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.stopping = False
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)
        try:
            for name, command in commands.items():
                # Own session: a terminal's Ctrl-C hits only us; we stop the children in order.
                self.children[name] = subprocess.Popen(
                    command,
                    cwd=root,
                    env=env,
                    start_new_session=True,
                    preexec_fn=background_priority(name, options["background_nice"]),  # noqa: PLW1509
                )
            self._announce(url)
            self._supervise()
        finally:
            self._stop_children()

    # ------------------------------------------------------------------ helpers

    def _prepare_dirs(self) -> None:
        var = Path(settings.VAR_DIR)
        var.mkdir(parents=True, exist_ok=True)
        for folder in ("data_folder_in", "data_folder_out", "processed_folder"):
            path = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get(folder)
            if isinstance(path, str):
                Path(path).mkdir(parents=True, exist_ok=True)
        Path(settings.SIM_STATE_PATH).parent.mkdir(parents=True, exist_ok=True)
        self.workspace_path = ""
        if os.geteuid() == 0 and settings.CLUSTER_BACKEND == "local" and settings.LOCAL_JOB_USER:
            self._prepare_job_user(var)
            self._prepare_workspace_python()

    def _prepare_workspace_python(self) -> None:
        """A JupyterLab the job user can run (the platform's own Python may be private to root);
        without one only workspaces fail, so a problem is one warning, not a refusal to start."""
        from jobs.workspace_runtime import ensure_workspace_python

        target = Path(settings.LOCAL_WORK_DIR) / "workspace-python"
        try:
            self.workspace_path = str(
                ensure_workspace_python(target, Path(settings.BASE_DIR) / "requirements.lock")
            )
        except (RuntimeError, OSError) as exc:
            self.stdout.write(self.style.WARNING(f"Workspaces' JupyterLab for the job user: {exc}"))

    def _prepare_job_user(self, var: Path) -> None:
        """As root, jobs run as LOCAL_JOB_USER's group with their own uid (docs/local-backend.md):
        create the account when missing, and make var/ (database, credentials) private to root."""
        import pwd

        user = settings.LOCAL_JOB_USER
        try:
            pwd.getpwnam(user)
        except KeyError:
            created = subprocess.run(
                ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", user],
                capture_output=True,
                text=True,
                check=False,
            )
            if created.returncode != 0:
                detail = (created.stderr or created.stdout).strip().splitlines()
                raise SystemExit(
                    f"cannot create job user {user!r}: {detail[-1] if detail else created.returncode}"
                ) from None
            self.stdout.write(
                f"Created the job user {user!r} (jobs run with its group and a uid of their own)."
            )
        var.chmod(0o700)

    def _child_env(self, root: Path) -> dict[str, str]:
        env = dict(os.environ)
        paths = [str(root / "platform"), str(root)]
        if env.get("PYTHONPATH"):
            paths.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env.setdefault(
            "DJANGO_SETTINGS_MODULE", os.environ.get("DJANGO_SETTINGS_MODULE", "config.settings.dev")
        )
        env.setdefault("PYTHONUNBUFFERED", "1")
        if getattr(self, "workspace_path", ""):
            from jobs.workspace_runtime import PATH_VARIABLE

            env[PATH_VARIABLE] = self.workspace_path
        # One folder for the metrics of every web and worker process: the web's /metrics adds them up
        # (observability.multiprocess, docs/observability.md).
        if not env.get("PROMETHEUS_MULTIPROC_DIR"):
            from observability.multiprocess import fresh_metrics_dir

            env["PROMETHEUS_MULTIPROC_DIR"] = str(fresh_metrics_dir(Path(settings.VAR_DIR) / "metrics"))
        return env

    def _worker_commands(self) -> dict[str, list[str]]:
        """One worker per kind of work (settings.PLATFORM_QUEUES), so a backlog of one never starves
        another. The cycle runs under a lease (one at a time anyway) and sync and reconcile are whole
        passes: one process each. Binds are independent backend calls that mostly wait on I/O: a
        thread pool sized for the machine."""
        queues = settings.PLATFORM_QUEUES
        bind_threads = str(min(8, max(2, 2 * (os.cpu_count() or 1))))
        base = [sys.executable, "-m", "celery", "-A", "config", "worker", "-l", "info"]
        return {
            "worker-cycle": [*base, "--pool=solo", "-n", "cycle@%h", "-Q", queues["cycle"]],
            "worker-bind": [
                *base, "--pool=threads", "-c", bind_threads, "-n", "bind@%h",
                "-Q", f"{queues['bind']},{settings.CELERY_TASK_DEFAULT_QUEUE}",
            ],
            "worker-sync": [*base, "--pool=solo", "-n", "sync@%h", "-Q", queues["sync"]],
            "worker-reconcile": [*base, "--pool=solo", "-n", "reconcile@%h", "-Q", queues["reconcile"]],
        }  # fmt: skip

    def _web_command(self, root: Path, options: dict[str, Any]) -> list[str]:
        bind = f"{options['host']}:{options['port']}"
        if options["web"] == "gunicorn":
            # gunicorn's rule of thumb for sync workers, capped: on SQLite more processes only queue
            # for the one write lock. runserver, the old default, has a listen queue of 10 and reset
            # about half of 50 parallel connections (issue 18).
            workers = options.get("web_workers") or min(2 * (os.cpu_count() or 1) + 1, 9)
            return [
                sys.executable,
                "-m",
                "gunicorn",
                # ASGI through uvicorn's worker: the workspace proxy needs WebSockets (docs/workspaces.md).
                "config.asgi:application",
                "--worker-class",
                "uvicorn_worker.UvicornWorker",
                "--bind",
                bind,
                "--workers",
                str(workers),
                "--backlog",
                "2048",
                "--timeout",
                "60",
                "--graceful-timeout",
                "10",
                "--access-logfile",
                "-",
            ]
        return [sys.executable, str(root / "manage.py"), "runserver", bind, "--noreload"]

    def _announce(self, url: str) -> None:
        health = f"{url}/api/v1/health"
        deadline = time.monotonic() + 60
        ready = False
        while time.monotonic() < deadline and not self.stopping:
            if self.children["web"].poll() is not None:
                break
            try:
                with urllib.request.urlopen(health, timeout=2) as response:  # noqa: S310 (our own URL)
                    ready = response.status == 200
            except (urllib.error.URLError, OSError):
                ready = False
            if ready:
                break
            time.sleep(0.5)
        self.stdout.write("")
        if ready:
            self.stdout.write(self.style.SUCCESS(f"GPU platform is up: {url}/"))
        else:
            self.stdout.write(self.style.WARNING(f"GPU platform started; {health} did not answer 200 yet"))
        self.stdout.write(f"  API: {url}/api/v1/   docs: {url}/api/docs/   admin: {url}/admin/")
        creds_path = Path(settings.VAR_DIR) / "demo-credentials.json"
        try:
            creds = json.loads(creds_path.read_text())
        except (OSError, ValueError):
            creds = {}
        for user, password in creds.items():
            self.stdout.write(f"  user {user:<11} password {password}")
        self.stdout.write(f"  (demo credentials are kept in {creds_path})")
        self.stdout.write("  Press Ctrl-C to stop web, worker and beat.")
        self.stdout.flush()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True

    def _supervise(self) -> None:
        while not self.stopping:
            for name, child in self.children.items():
                code = child.poll()
                if code is not None:
                    self.stderr.write(f"{name} exited with status {code}; stopping the platform")
                    self._stop_children()
                    raise SystemExit(code or 1)
            time.sleep(0.5)
        self.stdout.write("Stopping web, worker and beat ...")

    def _stop_children(self) -> None:
        children = getattr(self, "children", {})
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        for child in children.values():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        if children:
            self.stdout.write("All stopped.")
