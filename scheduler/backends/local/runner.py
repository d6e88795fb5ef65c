"""The task runner: a tiny supervisor that starts one task, waits for it, and records how it ended.

Run as ``python runner.py <task_dir>`` (a script path, not ``-m``: it needs only the standard library,
so it starts fast and does not import the scheduler package). The backend starts it from whatever
process binds the task (usually a Celery worker); the runner at once forks a daemon in its own session
and the first process exits, so the daemon is adopted by init and reaped there, not left as a zombie of
a long-lived worker, and it survives a restart of the platform's web, worker and beat.

The daemon, all state in files of ``task_dir`` (written atomically, read by any process):

1. writes ``runner.json`` (its pid and a process identity that survives pid reuse);
2. starts the command from ``task.json``: a subprocess (argument list, never a shell) in its own
   session and process group with stdout+stderr appended to ``output.log``; or a Docker container
   (``mode == "container"``) whose output it copies into ``output.log``;
3. writes ``started.json`` (child pid/process group, or container id);
4. waits; kills the process group (SIGTERM, then SIGKILL after the grace period) when the maximum
   runtime passes or when it receives SIGTERM itself: the backend's cancel (``deleted.json``) or
   preemption (``preempt.json``, which carries the grace period the job gets to write a checkpoint);
5. kills what is left of the process group (orphaned helpers would hold the GPU), and writes
   ``exit.json``: raw facts (exit code, signal, who killed it, OOM flag); the backend decides the
   phase and failure category from them.

If the daemon itself dies without ``exit.json`` (machine reboot, SIGKILL) the backend reports the task
FAILED (PLATFORM). This module is also imported by the backend for the file names and helpers.

With ``job_user`` in ``task.json`` (the platform runs as root) the daemon stays root, so it can always
kill the task, but the command runs as that uid and gid with no supplementary groups and umask 077.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

TASK_FILE = "task.json"
RUNNER_FILE = "runner.json"
STARTED_FILE = "started.json"
EXIT_FILE = "exit.json"
DELETED_FILE = "deleted.json"
PREEMPT_FILE = "preempt.json"
LOG_FILE = "output.log"
RUNNER_LOG_FILE = "runner.log"
WORK_DIR = "work"
TMP_DIR = "tmp"

POLL_S = 0.1
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126
NOTE_PREFIX = "[gpu-platform]"
CONTAINER_CHECKPOINT_DIR = "/checkpoints"


# ----------------------------------------------------------------------------- shared helpers


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` so that a reader sees the old file, no file, or the whole new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None when the file does not exist (or is not an object)."""
    try:
        with open(path) as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError, IsADirectoryError):
        return None
    return data if isinstance(data, dict) else None


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def process_identity(pid: int) -> str | None:
    """A string that names process ``pid`` uniquely across pid reuse and reboots, or None when no
    such live process exists. Zombies count as dead: an exited runner adopted by an init that does not
    reap would otherwise look alive forever.

    On Linux: boot id + the start time from ``/proc/<pid>/stat``; elsewhere just whether it exists.
    """
    if pid <= 0:
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return f"pid:{pid}"
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    state, start_ticks = fields[0], fields[19]
    if state in ("Z", "X", "x"):
        return None
    return f"{_boot_id()}:{start_ticks}"


def kill_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to process group ``pgid``; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


def group_alive(pgid: int) -> bool:
    return kill_group(pgid, 0)


# ----------------------------------------------------------------------------- the daemon


class Runner:
    def __init__(self, task_dir: Path) -> None:
        self.dir = task_dir
        task = read_json(task_dir / TASK_FILE)
        if task is None:
            raise SystemExit(f"runner: no {TASK_FILE} in {task_dir}")
        self.task = task
        self.grace_s = float(task.get("grace_s", 10.0))
        max_runtime = task.get("max_runtime_s")
        self.max_runtime_s = float(max_runtime) if max_runtime else None
        self.stop_requested = False
        # "timeout", "stop" or "preempt": the platform ended the task on purpose
        self.killed_by = ""
        self.sent_sigkill = False

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self.stop_requested = True

    def should_stop(self) -> bool:
        """SIGTERM from the backend, or its ``deleted.json`` / ``preempt.json`` (which also cover a
        request that came before this runner had published its pid)."""
        if not self.stop_requested and (
            (self.dir / DELETED_FILE).exists() or (self.dir / PREEMPT_FILE).exists()
        ):
            self.stop_requested = True
        return self.stop_requested

    def stop_reason(self) -> tuple[str, float]:
        """("stop", cancel grace) or ("preempt", the grace preempt_job asked for). A cancel wins: the
        job is going away, its checkpoint no longer matters."""
        preempt = read_json(self.dir / PREEMPT_FILE)
        if preempt is not None and not (self.dir / DELETED_FILE).exists():
            return "preempt", float(preempt.get("grace_s", self.grace_s))
        return "stop", self.grace_s

    def note(self, text: str) -> None:
        """A line of the platform's own in the task's log, so the user sees why it ended."""
        with open(self.dir / LOG_FILE, "a") as fh:
            fh.write(f"{NOTE_PREFIX} {text}\n")

    def finish(self, **facts: Any) -> None:
        facts.setdefault("killed_by", self.killed_by)
        facts.setdefault("finished_at", time.time())
        write_json(self.dir / EXIT_FILE, facts)

    def run(self) -> None:
        signal.signal(signal.SIGTERM, self._on_sigterm)
        # An ignored signal stays ignored across exec: whatever the binding process ignored, the
        # command must start with the defaults.
        for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        write_json(
            self.dir / RUNNER_FILE,
            {"pid": os.getpid(), "identity": process_identity(os.getpid()), "at": time.time()},
        )
        if self.should_stop():  # deleted or preempted before it even started
            self.killed_by = self.stop_reason()[0]
            self.finish(exit_code=None, signal=None, never_started=True)
        elif self.task.get("mode") == "container":
            ContainerRun(self).run()
        else:
            self.run_process()

    # ------------------------------------------------------------------ a subprocess

    def run_process(self) -> None:
        argv = [str(a) for a in self.task["argv"]]
        workdir = self.dir / WORK_DIR
        workdir.mkdir(exist_ok=True)
        identity: dict[str, Any] = {}
        job_user = self.task.get("job_user")
        if job_user:
            # No supplementary groups: root's would otherwise follow the job across the setuid.
            identity = {
                "user": int(job_user["uid"]),
                "group": int(job_user["gid"]),
                "extra_groups": [],
                "umask": 0o077,
            }
        with open(self.dir / LOG_FILE, "ab", buffering=0) as log:
            try:
                child = subprocess.Popen(
                    argv,
                    cwd=workdir,
                    env={str(k): str(v) for k, v in self.task["env"].items()},
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own session and process group: killpg reaches it all
                    close_fds=True,
                    **identity,
                )
            except FileNotFoundError:
                self.note(f"command not found: {argv[0]}")
                self.finish(
                    exit_code=EXIT_NOT_FOUND, signal=None, launch_error=f"command not found: {argv[0]}"
                )
                return
            except PermissionError:
                self.note(f"command is not executable: {argv[0]}")
                self.finish(
                    exit_code=EXIT_NOT_EXECUTABLE, signal=None, launch_error=f"not executable: {argv[0]}"
                )
                return
            except OSError as exc:
                self.note(f"could not start {argv[0]}: {exc}")
                self.finish(exit_code=EXIT_NOT_EXECUTABLE, signal=None, launch_error=str(exc))
                return
        started = time.time()
        write_json(
            self.dir / STARTED_FILE,
            {
                "pid": child.pid,
                "pgid": child.pid,
                "identity": process_identity(child.pid),
                "started_at": started,
                "mode": "process",
            },
        )
        deadline = started + self.max_runtime_s if self.max_runtime_s else None
        while child.poll() is None:
            if self.should_stop() and not self.killed_by:
                self.killed_by, grace = self.stop_reason()
                if self.killed_by == "preempt":
                    self.note(f"preempting: SIGTERM, then SIGKILL after {grace:g} s to write a checkpoint")
                else:
                    self.note("stopping: the job was cancelled")
                self._terminate(child, grace)
            elif deadline is not None and time.time() >= deadline and not self.killed_by:
                self.killed_by = "timeout"
                self.note(f"stopping: maximum runtime of {self.max_runtime_s:g} s exceeded")
                self._terminate(child)
            else:
                time.sleep(POLL_S)
        # Helpers the command left behind (data loader workers, shells) would keep the GPU busy.
        kill_group(child.pid, signal.SIGKILL)
        code = child.returncode
        self.finish(
            exit_code=code if code >= 0 else None,
            signal=-code if code < 0 else None,
            sent_sigkill=self.sent_sigkill,
            runtime_s=time.time() - started,
        )

    def _terminate(self, child: subprocess.Popen[bytes], grace_s: float | None = None) -> None:
        """SIGTERM to the whole group, SIGKILL after the grace period."""
        grace = self.grace_s if grace_s is None else grace_s
        kill_group(child.pid, signal.SIGTERM)
        try:
            child.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.note(f"still running {grace:g} s after SIGTERM: sending SIGKILL")
            self.sent_sigkill = True
            kill_group(child.pid, signal.SIGKILL)
            child.wait()


class ContainerRun:
    """The same lifecycle for a Docker container (the backend checked that an engine is reachable)."""

    def __init__(self, runner: Runner) -> None:
        self.r = runner
        self.spec: dict[str, Any] = runner.task["container"]

    def run(self) -> None:
        r = self.r
        try:
            import docker  # the platform's dependency; imported late so process mode never needs it
            from docker.types import DeviceRequest
        except ImportError as exc:
            r.note(f"the docker package is not installed: {exc}")
            r.finish(exit_code=None, signal=None, platform_error=f"docker package missing: {exc}")
            return
        try:
            client = (
                docker.DockerClient(base_url=self.spec["docker_host"])
                if self.spec.get("docker_host")
                else docker.from_env()
            )
            image = self.spec["image"]
            try:
                client.images.get(image)
            except docker.errors.ImageNotFound:
                r.note(f"pulling image {image}")
                client.images.pull(image)
        except docker.errors.ImageNotFound as exc:
            r.note(f"image not found: {exc}")
            r.finish(exit_code=None, signal=None, image_error=str(exc).splitlines()[0])
            return
        except docker.errors.APIError as exc:
            r.note(f"could not get image: {exc}")
            r.finish(exit_code=None, signal=None, image_error=str(exc).splitlines()[0])
            return
        except docker.errors.DockerException as exc:
            r.note(f"Docker engine error: {exc}")
            r.finish(exit_code=None, signal=None, platform_error=str(exc).splitlines()[0])
            return
        gpu_ids = [str(i) for i in self.spec.get("gpu_indices", [])]
        workdir = r.dir / WORK_DIR
        workdir.mkdir(exist_ok=True)
        volumes = {str(workdir): {"bind": "/workspace", "mode": "rw"}}
        if self.spec.get("checkpoint_dir"):
            # The standard images keep /checkpoints for this (images/dockerfiles/base/README.md).
            volumes[str(self.spec["checkpoint_dir"])] = {"bind": CONTAINER_CHECKPOINT_DIR, "mode": "rw"}
        try:
            container = client.containers.run(
                image,
                command=[str(a) for a in r.task["argv"]],
                name=self.spec["name"],
                detach=True,
                environment={str(k): str(v) for k, v in r.task["env"].items()},
                device_requests=[DeviceRequest(device_ids=gpu_ids, capabilities=[["gpu"]])]
                if gpu_ids
                else [],
                labels={str(k): str(v) for k, v in self.spec.get("labels", {}).items()},
                volumes=volumes,
                working_dir="/workspace",
                init=True,
                **({"user": str(self.spec["user"])} if self.spec.get("user") else {}),
            )
        except docker.errors.DockerException as exc:
            r.note(f"could not start the container: {exc}")
            r.finish(exit_code=None, signal=None, platform_error=str(exc).splitlines()[0])
            return
        started = time.time()
        write_json(
            r.dir / STARTED_FILE,
            {"container_id": container.id, "started_at": started, "mode": "container", "pid": 0, "pgid": 0},
        )
        copier = threading.Thread(target=self._copy_logs, args=(container,), daemon=True)
        copier.start()
        deadline = started + r.max_runtime_s if r.max_runtime_s else None
        state: dict[str, Any] = {}
        while True:
            container.reload()
            state = container.attrs.get("State", {})
            if state.get("Status") in ("exited", "dead"):
                break
            if r.should_stop() and not r.killed_by:
                r.killed_by, grace = r.stop_reason()
                container.stop(timeout=max(0, int(grace)))
            elif deadline is not None and time.time() >= deadline and not r.killed_by:
                r.killed_by = "timeout"
                r.note(f"stopping: maximum runtime of {r.max_runtime_s:g} s exceeded")
                container.stop(timeout=int(r.grace_s))
            else:
                time.sleep(0.5)
        copier.join(timeout=5)
        with contextlib.suppress(docker.errors.DockerException):
            container.remove(force=True)
        r.finish(
            exit_code=int(state.get("ExitCode", -1)),
            signal=None,
            oom_killed=bool(state.get("OOMKilled")),
            runtime_s=time.time() - started,
        )

    def _copy_logs(self, container: Any) -> None:
        # The engine going away ends the copy, not the task.
        with open(self.r.dir / LOG_FILE, "ab", buffering=0) as log, contextlib.suppress(Exception):
            for chunk in container.logs(stream=True, follow=True):
                log.write(chunk)


# ----------------------------------------------------------------------------- entry point


def _daemonize(task_dir: Path) -> None:
    """Fork: the parent returns to exit at once; the child leaves the caller's session for good."""
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    # Detach from the caller's files: stdio go to runner.log for tracebacks.
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    out = os.open(task_dir / RUNNER_LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: runner.py TASK_DIR", file=sys.stderr)
        return 2
    task_dir = Path(argv[1]).resolve()
    if not (task_dir / TASK_FILE).is_file():
        print(f"runner: no {TASK_FILE} in {task_dir}", file=sys.stderr)
        return 2
    _daemonize(task_dir)
    try:
        Runner(task_dir).run()
    except BaseException as exc:  # a bug here must still leave a record, or the task looks vanished
        import traceback

        traceback.print_exc()
        started = read_json(task_dir / STARTED_FILE)
        if started and started.get("pgid"):  # no supervisor any more: do not leave the command behind
            kill_group(int(started["pgid"]), signal.SIGKILL)
        if read_json(task_dir / EXIT_FILE) is None:
            with contextlib.suppress(Exception):
                write_json(
                    task_dir / EXIT_FILE,
                    {
                        "exit_code": None,
                        "signal": None,
                        "platform_error": f"runner crashed: {exc!r}",
                        "finished_at": time.time(),
                        "killed_by": "",
                    },
                )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
