#!/usr/bin/env python
"""Smoke test of gpu-platform/pytorch-jupyter and its CPU twin. Runs inside the container:

    python /opt/gpu-platform/smoke-test/jupyter.py [--module torch]

Starts JupyterLab the way the platform starts a workspace (127.0.0.1, a free port, the base URL of
the platform's proxy, the token in JUPYTER_TOKEN, never on the command line) and checks, one line
each: /api/status answers with the token and refuses without it; the lab page under the base URL has
JupyterLab's title; a python3 kernel starts and imports ``--module`` (the framework of the image).
Exit status 0 when everything passes, 1 when a check fails. Python 3.10 (the images' Python).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

FAILURES: list[str] = []
BASE_URL = "/workspaces/0/"


def report(ok: bool, what: str) -> bool:
    print(f"{'ok   ' if ok else 'FAIL '} {what}")
    if not ok:
        FAILURES.append(what)
    return ok


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str, token: str | None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (our own server)
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def wait_served(root: str, token: str, server: subprocess.Popen) -> bool:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and server.poll() is None:
        try:
            if get(root + "api/status", token)[0] == 200:
                return True
        except OSError:
            pass
        time.sleep(0.5)
    return False


def check_throughput_report(cells_per_second: float) -> None:
    """The platform's throughput contract, as every image checks it: a rate through gpu_platform (here
    the kernel's cells per second) lands in the file the platform names."""
    try:
        import gpu_platform
    except Exception as exc:
        report(False, f"import gpu_platform (the throughput helper): {exc}")
        return
    report(*gpu_platform.self_check(cells_per_second))


def kernel_imports(module: str) -> bool:
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3")
    printed: list[str] = []

    def hook(message: dict) -> None:
        if message["msg_type"] == "stream":
            printed.append(message["content"]["text"])

    try:
        started = time.perf_counter()
        client.execute_interactive(
            f"import {module}; print({module}.__name__)", output_hook=hook, timeout=120
        )
        check_throughput_report(1.0 / max(time.perf_counter() - started, 1e-9))
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return "".join(printed).strip() == module


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--module", default="torch", help="the module a kernel must import (default torch)")
    options = parser.parse_args()
    token = secrets.token_hex(24)
    port = free_port()
    root = f"http://127.0.0.1:{port}{BASE_URL}"
    with tempfile.TemporaryDirectory() as home:
        command = [
            sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}", f"--ServerApp.base_url={BASE_URL}", f"--ServerApp.root_dir={home}",
        ]  # fmt: skip
        if os.geteuid() == 0:
            command.append("--allow-root")  # the images run as jobuser; a root build host may not
        env = {**os.environ, "JUPYTER_TOKEN": token}
        server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            if report(wait_served(root, token, server), "JupyterLab serves /api/status under the base URL"):
                status, body = get(root + "api/status", token)
                report(status == 200 and "started" in json.loads(body), "its status answers with the token")
                report(get(root + "api/status", None)[0] in (401, 403), "and refuses a request without it")
                status, page = get(root + "lab", token)
                report(status == 200 and "<title>JupyterLab</title>" in page, "the lab page is JupyterLab's")
            report(kernel_imports(options.module), f"a python3 kernel imports {options.module}")
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
    print("PASS" if not FAILURES else f"{len(FAILURES)} check(s) failed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
