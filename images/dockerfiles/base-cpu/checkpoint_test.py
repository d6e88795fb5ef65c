#!/usr/bin/env python
"""Checkpoint smoke test of the gpu-platform images: a training-like loop that honours the platform's
preemption contract (DESIGN.md §5b). Standard library only, so it runs in every image and on the host:

    python /opt/gpu-platform/smoke-test/checkpoint.py [--steps N] [--step-seconds S] [--every K]
    python /opt/gpu-platform/smoke-test/checkpoint.py --self-test

As a job: counts ``--steps`` steps of ``--step-seconds`` each, writing its step to
``$CHECKPOINT_DIR/state.json`` every ``--every`` steps and when it receives SIGTERM (then exits 0,
well inside ``$PREEMPTION_GRACE_SECONDS``). With ``RESUME=1`` it starts from the saved step and prints
``resumed from step N``; without a checkpoint (or without ``RESUME``) it starts at step 0. The state is
written to a temporary file and renamed, so a SIGKILL mid-write never leaves a torn checkpoint.

``--self-test`` runs the loop as a child, preempts it with SIGTERM, resumes it with ``RESUME=1`` and
checks that it continued from where it stopped: one line per check, exit 0 when all pass, 1 otherwise.
Exit status 2 on bad usage. Python 3.10 (the images' Python).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

STATE_FILE = "state.json"


def checkpoint_dir() -> str:
    path = os.environ.get("CHECKPOINT_DIR", "")
    if not path:
        raise SystemExit("CHECKPOINT_DIR is not set: the platform sets it for every job")
    os.makedirs(path, exist_ok=True)
    return path


def load_step(folder: str) -> int:
    try:
        with open(os.path.join(folder, STATE_FILE)) as fh:
            return int(json.load(fh)["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def save_step(folder: str, step: int) -> None:
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=STATE_FILE, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump({"step": step, "saved_at": time.time()}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, os.path.join(folder, STATE_FILE))


def train(steps: int, step_seconds: float, every: int) -> int:
    folder = checkpoint_dir()
    stop = {"requested": False}

    def on_sigterm(signum: int, frame: object) -> None:
        stop["requested"] = True

    signal.signal(signal.SIGTERM, on_sigterm)
    start = load_step(folder) if os.environ.get("RESUME") == "1" else 0
    grace = os.environ.get("PREEMPTION_GRACE_SECONDS", "?")
    if start:
        print(f"resumed from step {start}", flush=True)
    else:
        print(f"starting at step 0 (RESUME={os.environ.get('RESUME', '')!r})", flush=True)
    print(f"checkpoints in {folder}, grace {grace} s", flush=True)
    step = start
    while step < steps:
        if stop["requested"]:
            save_step(folder, step)
            print(f"SIGTERM: checkpoint saved at step {step}", flush=True)
            return 0
        time.sleep(step_seconds)
        step += 1
        print(f"step {step}", flush=True)
        if step % every == 0:
            save_step(folder, step)
    save_step(folder, step)
    print(f"done: {steps} steps", flush=True)
    return 0


def self_test() -> int:
    failures = []

    def report(ok: bool, what: str) -> None:
        print(f"{'ok   ' if ok else 'FAIL '} {what}")
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, CHECKPOINT_DIR=folder, PREEMPTION_GRACE_SECONDS="5")
        env.pop("RESUME", None)
        argv = [sys.executable, os.path.abspath(__file__), "--steps", "1000", "--step-seconds", "0.01"]
        first = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
        assert first.stdout is not None
        seen = 0
        for line in first.stdout:
            if line.startswith("step "):
                seen = int(line.split()[1])
                if seen >= 20:
                    break
        first.send_signal(signal.SIGTERM)
        out, _ = first.communicate(timeout=30)
        saved = load_step(folder)
        report(first.returncode == 0, f"exits 0 on SIGTERM (exit code {first.returncode})")
        report(saved >= seen > 0, f"checkpoint saved at step {saved} on SIGTERM")
        env["RESUME"] = "1"
        second = subprocess.run(
            [*argv[:3], str(saved + 5), *argv[4:]], env=env, stdout=subprocess.PIPE, text=True, timeout=60
        )
        report(f"resumed from step {saved}" in second.stdout, f"RESUME=1 resumes from step {saved}")
        report(
            second.returncode == 0 and load_step(folder) == saved + 5,
            f"the resumed run finishes at step {saved + 5}",
        )
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600, help="steps to count (default 600)")
    parser.add_argument("--step-seconds", type=float, default=0.1, help="seconds per step (default 0.1)")
    parser.add_argument("--every", type=int, default=10, help="checkpoint every K steps (default 10)")
    parser.add_argument("--self-test", action="store_true", help="preempt and resume a run of the loop")
    args = parser.parse_args(argv)
    if args.steps < 0 or args.step_seconds < 0 or args.every < 1:
        parser.error("--steps and --step-seconds must be >= 0 and --every >= 1")
    if args.self_test:
        return self_test()
    return train(args.steps, args.step_seconds, args.every)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
