"""``manage.py bench-api``: the name the benchmark is documented under (see bench_api)."""

from jobs.management.commands.bench_api import Command

__all__ = ["Command"]
