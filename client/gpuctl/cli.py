"""The ``gpuctl`` command line. Each command is a thin layer over gpuctl.Client."""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import yaml
from rich.console import Console
from rich.table import Table

from gpuctl import config
from gpuctl.client import Client
from gpuctl.errors import (
    EXIT_INTERNAL,
    EXIT_USAGE,
    GpuctlError,
    RefusedError,
    UsageError,
    wait_exit_code,
)
from gpuctl.models import JobDetail, LogChunk, LogEnd
from gpuctl.spec import apply_sets, load_spec_file

EPILOG = """\b
Exit codes: 0 ok; 2 usage (bad option, bad YAML, a spec the API refused);
3 not found; 4 refused (not signed in, not allowed, conflict); 5 server error;
6 network. `wait` (and --wait, --follow): 0 SUCCEEDED, 10 USER, 11 OOM,
12 TIMEOUT, 13 IMAGE, 14 PLATFORM, 15 HARDWARE, 17 STOPPED, 18 --timeout ran out.

\b
Configuration: `gpuctl login URL` stores a token (mode 0600) in
~/.config/gpuctl/config.json ($GPUCTL_CONFIG to move it); --profile NAME keeps
several servers; GPUCTL_URL and GPUCTL_TOKEN override the stored profile.
"""

OUTPUT = click.option(
    "-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table", show_default=True
)
SETS = click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Change one field of the spec (repeatable): --set gpus=2, --set env.SEED=1.",
)

out = Console(highlight=False, soft_wrap=True)


class State:
    def __init__(self, profile: str | None, url: str | None) -> None:
        self.profile = profile
        self.url = url
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client.from_config(profile=self.profile, url=self.url)
            if not self._client.token:
                raise RefusedError("not signed in: run `gpuctl login URL` or set GPUCTL_TOKEN")
        return self._client


pass_state = click.make_pass_decorator(State)


@click.group(epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--profile", envvar="GPUCTL_PROFILE", help="Stored server profile to use (see `login`).")
@click.option("--url", help="Server URL, e.g. http://127.0.0.1:8000 (default: the profile's, or GPUCTL_URL).")
@click.version_option("0.1.0", prog_name="gpuctl")
@click.pass_context
def cli(ctx: click.Context, profile: str | None, url: str | None) -> None:
    """Submit, follow and manage jobs on the GPU platform.

    \b
    gpuctl login http://127.0.0.1:8000        sign in once (token stored 0600)
    gpuctl submit -f job.yaml --follow        submit, stream logs, exit with the job's outcome
    gpuctl list / describe JOB / logs -f JOB  see what runs and why
    gpuctl wait JOB; gpuctl cancel JOB        script around jobs
    """
    ctx.obj = State(profile, url)


# ---------------------------------------------------------------------- output helpers


def emit(data: Any, fmt: str, table: Callable[[], None]) -> None:
    if fmt == "json":
        click.echo(json.dumps(data, indent=2, default=str))
    elif fmt == "yaml":
        click.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), nl=False)
    else:
        table()


def asks(job: Any) -> str:
    per = f"{job.gpus} GPU" if job.gpus else f"{job.gpu_milli}m GPU" if job.gpu_milli else "CPU"
    return per + (f" x{job.replicas}" if job.replicas > 1 else "")


def age(stamp: str | None) -> str:
    if not stamp:
        return "-"
    try:
        when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    seconds = int((dt.datetime.now(dt.UTC) - when).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def when(stamp: str | None) -> str:
    """An API time (ISO 8601, UTC) as local time to the second."""
    if not stamp:
        return "-"
    try:
        moment = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def jobs_table(jobs: list[Any], *, queue: bool = False) -> None:
    table = Table(box=None, pad_edge=False, header_style="bold")
    columns = ["ID", "NAME", "TEAM", "USER", "STATUS", "ASKS", "AGE", "REASON"]
    if queue:
        columns.insert(0, "POS")
    for column in columns:
        table.add_column(column, overflow="fold")
    for job in jobs:
        reason = job.pending_reason if job.status == "QUEUED" else job.failure_category or job.pending_reason
        row = [
            str(job.id),
            job.name or "-",
            job.team_slug,
            job.user,
            job.status,
            asks(job),
            age(job.created_at),
        ]
        row.append(reason or "")
        if queue:
            row.insert(0, str(job.queue_position or "-"))
        table.add_row(*row)
    out.print(table) if jobs else click.echo("No jobs.")


def read_spec(path: str, sets: tuple[str, ...]) -> dict[str, Any]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read it ({exc})") from None
    return apply_sets(load_spec_file(path, text), sets)


def follow(client: Client, job_id: int, task: int | None, *, prefix: bool) -> LogEnd:
    end: LogEnd | None = None
    for item in client.follow_logs(job_id, task=task):
        if isinstance(item, LogEnd):
            end = item
            break
        write_chunk(item, prefix=prefix)
    assert end is not None  # follow_logs always finishes with a LogEnd
    return end


def write_chunk(chunk: LogChunk, *, prefix: bool) -> None:
    text = chunk.text
    if prefix:
        lines = text.splitlines(keepends=True)
        text = "".join(f"[{chunk.task}] {line}" for line in lines)
    sys.stdout.write(text)
    sys.stdout.flush()


def finish(job_id: int, status: str, category: str, quiet: bool = False) -> int:
    code = wait_exit_code(status, category)
    if not quiet:
        what = f"{status} ({category})" if category else status
        click.echo(f"job {job_id} {what}", err=True)
    return code


def submitted(client: Client, job: JobDetail, *, fmt: str, quiet: bool, wait: bool, follow_logs: bool) -> int:
    if quiet:
        click.echo(str(job.id))
    elif fmt != "table":
        emit(job.to_dict(), fmt, lambda: None)
    else:
        reason = f": {job.pending_reason}" if job.pending_reason else ""
        click.echo(f"job {job.id} submitted ({job.status}{reason})")
        if job.kind == "workspace":
            click.echo(f"open it at {client.url}/workspaces/{job.id}/ once it runs (in the portal: Open)")
    if follow_logs:
        end = follow(client, job.id, None, prefix=job.replicas > 1)
        return finish(job.id, end.status, end.failure_category, quiet)
    if wait:
        final = client.wait(job.id)
        return finish(job.id, final.status, final.failure_category, quiet)
    return 0


# ---------------------------------------------------------------------- commands


@cli.command()
@click.argument("url")
@click.option("-u", "--username", help="Your username (asked when missing).")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@click.option("--profile", "profile_name", help="Store under this profile name (default: the current one).")
@click.pass_context
def login(
    ctx: click.Context, url: str, username: str | None, password_stdin: bool, profile_name: str | None
) -> int:
    """Trade a username and password for an API token and store it (mode 0600).

    The password is asked without echo, or read from stdin (--password-stdin) or GPUCTL_PASSWORD."""
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"{url!r}: give the server's URL, e.g. http://127.0.0.1:8000")
    username = username or click.prompt("Username")
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = os.environ.get("GPUCTL_PASSWORD") or getpass.getpass("Password: ")
    name = profile_name or ctx.obj.profile
    with Client(url) as client:
        token = client.login(username, password, name=f"gpuctl on {os.uname().nodename}"[:100])
    path = config.store_login(url=url.rstrip("/"), token=token.token, username=username, profile=name)
    click.echo(f"Signed in to {url.rstrip('/')} as {username}; token stored in {path}.")
    return 0


@cli.command()
def profiles() -> int:
    """List the stored server profiles (the current one is marked *)."""
    data = config.load()
    for name, entry in sorted(data["profiles"].items()):
        mark = "*" if name == data.get("current") else " "
        click.echo(f"{mark} {name}\t{entry.get('url', '')}\t{entry.get('username', '')}")
    if not data["profiles"]:
        click.echo("No profiles: run `gpuctl login URL`.")
    return 0


@cli.command()
@click.option("-f", "--file", "path", help="Job spec YAML (the portal's format); - for stdin.")
@SETS
@click.option(
    "--kind",
    type=click.Choice(["batch", "workspace"]),
    help="workspace: a JupyterLab (or workspace_app) on 250 milli-GPU by default, opened at "
    "/workspaces/<id>/; without -f, --set image=... is all it needs.",
)
@click.option("--wait", is_flag=True, help="Wait for the job to end; exit with its outcome.")
@click.option("--follow", "follow_logs", is_flag=True, help="Stream its logs until it ends (implies --wait).")
@click.option("-q", "--quiet", is_flag=True, help="Print only the job id.")
@OUTPUT
@pass_state
def submit(
    state: State,
    path: str | None,
    sets: tuple[str, ...],
    kind: str | None,
    wait: bool,
    follow_logs: bool,
    quiet: bool,
    output: str,
) -> int:
    """Submit a job from a YAML spec.

    \b
    Example job.yaml (fields as in POST /api/v1/jobs/):
      name: resnet
      image: pytorch:2.4
      gpus: 1
      replicas: 2
      command: python train.py --epochs 3
    """
    if path is None and kind != "workspace":
        raise UsageError("Give a spec file with -f (only --kind workspace may go without one).")
    spec = read_spec(path, sets) if path is not None else apply_sets({}, sets)
    if kind is not None:
        spec["kind"] = kind
    job = state.client.submit(spec)
    return submitted(state.client, job, fmt=output, quiet=quiet, wait=wait, follow_logs=follow_logs)


@cli.command("list")
@click.option("-s", "--status", help="Only these statuses, comma-separated (QUEUED,RUNNING).")
@click.option("-t", "--team", help="Team id or slug.")
@click.option("-u", "--user", help="Only jobs of this username.")
@click.option("--mine", is_flag=True, help="Only your jobs.")
@click.option("-n", "--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@OUTPUT
@pass_state
def list_jobs(
    state: State, status: str | None, team: str | None, user: str | None, mine: bool, limit: int, output: str
) -> int:
    """List jobs of your teams, newest first."""
    if mine:
        user = user or config.resolve(state.profile, state.url).username or None
        if not user:
            raise UsageError("--mine needs the username `gpuctl login` stores; give --user instead")
    statuses = [s.strip().upper() for s in status.split(",") if s.strip()] if status else None
    jobs = state.client.list(status=statuses, team=team, user=user, limit=limit)
    emit([j.to_dict() for j in jobs], output, lambda: jobs_table(jobs))
    return 0


@cli.command()
@click.argument("job_id", type=int, metavar="JOB")
@OUTPUT
@pass_state
def describe(state: State, job_id: int, output: str) -> int:
    """A job's status, placement, predicted slowdown, queue position and reason, and events."""
    job = state.client.get(job_id)
    events = state.client.events(job_id)
    data = {**job.to_dict(), "events": [e.to_dict() for e in events]}

    def table() -> None:
        rows = [
            ("Job", f"{job.id} {job.name}".strip()),
            ("Status", job.status + (f" ({job.failure_category})" if job.failure_category else "")),
            ("Team / user", f"{job.team_slug} / {job.user}"),
            ("Image", job.image_reference),
            ("Command", shlex.join([*job.command, *job.args])),
            ("Asks", f"{asks(job)}, {job.cpu_milli / 1000:g} CPU, {job.memory_mib} MiB"),
        ]
        if job.status == "QUEUED":
            order = f" (ordered by {job.queue_order})" if job.queue_order else ""
            rows.append(("Queue position", f"{job.queue_position or '-'}{order}"))
        if job.pending_reason:
            rows.append(("Reason", job.pending_reason))
        if job.eta:
            rows.append(
                ("ETA", job.eta + (f" ({job.eta_confidence} confidence)" if job.eta_confidence else ""))
            )
        if job.failure_message:
            rows.append(("Failure", job.failure_message))
        if job.retries:
            rows.append(("Retries", f"{job.retries} of {job.max_retries}"))
        if job.preemptions or job.migrations:
            lost = f", {job.time_lost_seconds:.0f} s lost" if job.time_lost_seconds else ""
            rows.append(("Preempted", f"{job.preemptions} time(s), migrated {job.migrations}{lost}"))
        if job.las_level is not None:
            rows.append(("LAS level", str(job.las_level)))
        if job.attained_gpu_seconds:
            rows.append(("GPU time", f"{job.attained_gpu_seconds / 3600:.2f} GPU-hours"))
        if not job.preemptible or job.min_runtime_seconds:
            rows.append(
                ("Preemptible", "no" if not job.preemptible else f"after {job.min_runtime_seconds} s")
            )
        rows += [("Created", when(job.created_at)), ("Started", when(job.started_at))]
        rows.append(("Finished", when(job.finished_at)))
        for label, value in rows:
            out.print(f"[bold]{label + ':':<16}[/bold]{value}", markup=True, highlight=False)
        if job.tasks:
            tasks = Table(title="Tasks", title_justify="left", box=None, header_style="bold")
            for column in ("TASK", "PHASE", "NODE", "GPUS", "SHARE", "SLOWDOWN", "MESSAGE"):
                tasks.add_column(column, overflow="fold")
            for t in job.tasks:
                share = (
                    f"{t.gpu_milli}m"
                    if t.gpu_milli and t.gpu_milli < 1000
                    else "whole"
                    if t.gpu_indices
                    else "-"
                )
                slowdown = f"x{t.predicted_slowdown:.2f}" if t.predicted_slowdown is not None else "-"
                gpus = ",".join(str(i) for i in t.gpu_indices) or "-"
                tasks.add_row(
                    t.name, t.phase, t.node or "-", gpus, share, slowdown, t.placement_reason or t.message
                )
            out.print(tasks)
        if job.preemption_history:
            history = Table(title="Preemptions", title_justify="left", box=None, header_style="bold")
            for column in ("AT", "KIND", "RULE", "FOR JOB", "REASON"):
                history.add_column(column, overflow="fold")
            for p in job.preemption_history:
                history.add_row(when(p.at), p.kind, p.rule, str(p.preemptor or "-"), p.reason)
            out.print(history)
        if events:
            table_ = Table(title="Events", title_justify="left", box=None, header_style="bold")
            for column in ("WHEN", "TRANSITION", "BY", "REASON"):
                table_.add_column(column, overflow="fold")
            for e in events:
                move = f"{e.from_status} -> {e.to_status}" if e.from_status else e.to_status
                table_.add_row(when(e.created_at), move, e.actor, e.reason)
            out.print(table_)

    emit(data, output, table)
    return 0


@cli.command()
@click.argument("job_id", type=int, metavar="JOB")
@click.option("-f", "--follow", "follow_logs", is_flag=True, help="Stream new output until the job ends.")
@click.option("--task", type=click.IntRange(0), help="Only this task index.")
@pass_state
def logs(state: State, job_id: int, follow_logs: bool, task: int | None) -> int:
    """Print a job's output (every task, or --task N); -f follows it live."""
    if follow_logs:
        job = state.client.get(job_id)
        follow(state.client, job_id, task, prefix=task is None and job.replicas > 1)
        return 0
    tasks = state.client.logs(job_id, task=task)
    for item in tasks:
        if len(tasks) > 1:
            click.echo(f"==> {item.task} ({item.phase}) <==")
        sys.stdout.write(item.log)
    sys.stdout.flush()
    if not tasks:
        click.echo("No output yet: the job has no tasks.", err=True)
    return 0


@cli.command()
@click.argument("job_ids", type=int, nargs=-1, required=True, metavar="JOB...")
@pass_state
def cancel(state: State, job_ids: tuple[int, ...]) -> int:
    """Cancel jobs (queued ones stop at once, running ones go through STOPPING)."""
    for job_id in job_ids:
        job = state.client.cancel(job_id)
        click.echo(f"job {job.id} {job.status}")
    return 0


@cli.command()
@click.argument("job_id", type=int, metavar="JOB")
@SETS
@click.option("--wait", is_flag=True, help="Wait for the copy to end; exit with its outcome.")
@click.option("--follow", "follow_logs", is_flag=True, help="Stream the copy's logs until it ends.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the new job's id.")
@OUTPUT
@pass_state
def clone(
    state: State, job_id: int, sets: tuple[str, ...], wait: bool, follow_logs: bool, quiet: bool, output: str
) -> int:
    """Submit a copy of a job, optionally with fields changed (--set)."""
    client = state.client
    if sets:
        spec = apply_sets(client.spec_of(client.get(job_id)), sets)
        job = client.submit(spec)
    else:
        job = client.clone(job_id)
    return submitted(client, job, fmt=output, quiet=quiet, wait=wait, follow_logs=follow_logs)


@cli.command()
@click.argument("job_id", type=int, metavar="JOB")
@click.option("--timeout", type=click.FloatRange(min=0), help="Give up after this many seconds (exit 18).")
@click.option(
    "--poll", type=click.FloatRange(min=0.1), default=2.0, show_default=True, help="Seconds between checks."
)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing; only the exit code tells.")
@pass_state
def wait(state: State, job_id: int, timeout: float | None, poll: float, quiet: bool) -> int:
    """Wait until a job ends. Exit 0 if it SUCCEEDED, else the code of how it ended (see --help)."""
    job = state.client.wait(job_id, timeout=timeout, poll=poll)
    return finish(job.id, job.status, job.failure_category, quiet)


@cli.command()
@OUTPUT
@pass_state
def queue(state: State, output: str) -> int:
    """Queued jobs of your teams in the scheduler's order, with why each waits."""
    jobs = state.client.queue()
    emit([j.to_dict() for j in jobs], output, lambda: jobs_table(jobs, queue=True))
    return 0


@cli.command()
@OUTPUT
@pass_state
def quota(state: State, output: str) -> int:
    """Your teams' GPU quotas and what is in use (GPUs as milli-GPU / 1000)."""
    quotas = state.client.quota()

    def table() -> None:
        t = Table(box=None, header_style="bold")
        for column in ("TEAM", "USED", "GUARANTEED", "LIMIT", "FREE", "JOBS", "YOU", "GPU-H THIS MONTH"):
            t.add_column(column)
        for q in quotas:
            t.add_row(
                q.team_slug,
                f"{q.used_gpu_milli / 1000:g}",
                f"{q.guaranteed_gpu_milli / 1000:g}",
                f"{q.max_gpu_milli / 1000:g}",
                f"{q.free_gpu_milli / 1000:g}",
                f"{q.used_jobs}/{q.max_concurrent_jobs}",
                f"{q.caller_gpu_milli / 1000:g}/{q.per_user_gpu_milli / 1000:g}",
                f"{q.gpu_hours_this_month:.1f}/{q.gpu_hours_per_month:g}",
            )
        out.print(t) if quotas else click.echo("No quotas: you are in no team.")

    emit([q.to_dict() for q in quotas], output, table)
    return 0


@cli.command()
@OUTPUT
@pass_state
def top(state: State, output: str) -> int:
    """The cluster's GPUs: how much of each is allocated, and to which team and job."""
    view = state.client.cluster()

    def table() -> None:
        t = Table(box=None, header_style="bold")
        for column in ("NODE", "GPU", "MODEL", "ALLOCATED", "MEMORY MiB", "UTIL", "HELD BY"):
            t.add_column(column, overflow="fold")
        for node in view.get("nodes", []):
            for gpu in node.get("gpus", []):
                used = int(gpu.get("used_milli") or 0)
                bar = "#" * round(used / 100) + "." * (10 - round(used / 100))
                held = ", ".join(
                    f"{a.get('team') or '?'}/{a.get('job_id') or '-'} {a.get('gpu_milli')}m"
                    for a in gpu.get("allocations", [])
                )
                util = gpu.get("utilization_pct")
                t.add_row(
                    node.get("name", ""),
                    str(gpu.get("index", "")),
                    str(gpu.get("model", "")),
                    f"{bar} {used / 1000:.2f}",
                    f"{gpu.get('used_memory_mib', 0)}/{gpu.get('memory_mib', 0)}",
                    f"{util:.0f}%" if isinstance(util, int | float) else "-",
                    held or "-",
                )
        out.print(t)
        totals = view.get("totals") or {}
        if totals:
            click.echo(
                f"{totals.get('used_gpu_milli', 0) / 1000:g} of {totals.get('gpus', 0)} GPUs allocated"
            )

    emit(view, output, table)
    return 0


@cli.command()
@click.option("-q", "--quiet", is_flag=True, help="Print only the references, one a line.")
@OUTPUT
@pass_state
def images(state: State, quiet: bool, output: str) -> int:
    """Job images of the catalog (use the REFERENCE as `image:` in a spec)."""
    items = state.client.images()
    if quiet:
        for item in items:
            click.echo(item.reference)
        return 0

    def table() -> None:
        t = Table(box=None, header_style="bold")
        for column in ("REFERENCE", "FRAMEWORK", "CUDA", "PYTHON", "MIN DRIVER", "ACTIVE"):
            t.add_column(column)
        for i in items:
            t.add_row(
                i.reference,
                f"{i.framework} {i.framework_version}".strip(),
                i.cuda_version or "-",
                i.python_version or "-",
                i.min_driver or "-",
                "yes" if i.is_active else "no",
            )
        out.print(t) if items else click.echo("No images.")

    emit([i.to_dict() for i in items], output, table)
    return 0


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> int:
    """Print the shell completion script.

    \b
    bash: eval "$(gpuctl completion bash)"     (in ~/.bashrc)
    zsh:  eval "$(gpuctl completion zsh)"      (in ~/.zshrc)
    fish: gpuctl completion fish > ~/.config/fish/completions/gpuctl.fish
    """
    from click.shell_completion import get_completion_class

    completer = get_completion_class(shell)
    assert completer is not None  # the three shells are built into click
    click.echo(completer(cli, {}, "gpuctl", "_GPUCTL_COMPLETE").source())
    return 0


# ---------------------------------------------------------------------- entry point


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def main(argv: list[str] | None = None) -> int:
    """Run gpuctl; every failure is one line on stderr and a documented exit code."""
    try:
        code = cli.main(args=argv, prog_name="gpuctl", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else "", err=True)
        code = EXIT_USAGE
    except click.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "gpuctl"
        click.echo(f"gpuctl: error: {_one_line(exc.format_message())} (see: {command} --help)", err=True)
        code = EXIT_USAGE
    except click.Abort:
        click.echo("gpuctl: aborted", err=True)
        code = 130
    except click.ClickException as exc:
        click.echo(f"gpuctl: error: {_one_line(exc.format_message())}", err=True)
        code = exc.exit_code
    except GpuctlError as exc:
        click.echo(f"gpuctl: error: {_one_line(exc.message)}", err=True)
        code = exc.exit_code
    except KeyboardInterrupt:
        click.echo("gpuctl: interrupted", err=True)
        code = 130
    except BrokenPipeError:
        code = 0  # `gpuctl list | head`: the reader has all it wanted
    except Exception as exc:  # noqa: BLE001 (the promise is one line, never a traceback)
        click.echo(f"gpuctl: internal error: {type(exc).__name__}: {_one_line(str(exc))}", err=True)
        code = EXIT_INTERNAL
    return code if isinstance(code, int) else 0
