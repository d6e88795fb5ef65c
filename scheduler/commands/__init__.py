"""Subcommands of ``python -m scheduler``. Each module defines ``register(subparsers)``.

A registered subcommand sets ``func`` on its parser; ``func(args) -> int`` returns the exit code and
raises ``CommandError`` for expected failures (printed as one line, exit code 2).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator


class CommandError(Exception):
    """An expected failure of a command: one line for the user, non-zero exit."""


@contextlib.contextmanager
def model_fallback_notice(command: str) -> Iterator[None]:
    """For the run inside: fresh provenance records, and exactly one stderr line the first time a
    prediction falls back to the analytic estimate (no trained model), naming the fix.

    Printed through ``tqdm.write`` so that it does not tear a progress bar."""
    from tqdm import tqdm

    from scheduler.interference import store

    printed = False

    def notify(note: str) -> None:
        nonlocal printed
        if not printed:
            printed = True
            tqdm.write(store.fallback_message(note, command), file=sys.stderr)

    store.reset_records()
    store.set_fallback_listener(notify)
    try:
        yield
    finally:
        store.set_fallback_listener(None)
