"""``manage.py bench-platform``: the name the benchmark is documented under (see bench_platform)."""

from jobs.management.commands.bench_platform import Command

__all__ = ["Command"]
