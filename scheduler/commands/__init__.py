"""Subcommands of ``python -m scheduler``. Each module defines ``register(subparsers)``.

A registered subcommand sets ``func`` on its parser; ``func(args) -> int`` returns the exit code and
raises ``CommandError`` for expected failures (printed as one line, exit code 2).
"""


class CommandError(Exception):
    """An expected failure of a command: one line for the user, non-zero exit."""
