"""``manage.py prune_history [--days N]``: downsample the cluster history, then delete what is older
than N days (default HISTORY_RETENTION_DAYS)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from observability.history import history_downsample, history_prune


class Command(BaseCommand):
    help = "Downsample the cluster history by age and delete samples older than --days."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days",
            default=None,
            help="keep this many days (a positive whole number; default HISTORY_RETENTION_DAYS)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        raw = options["days"] if options["days"] is not None else settings.HISTORY_RETENTION_DAYS
        try:
            days = int(str(raw))
        except ValueError:
            raise CommandError(f"--days must be a positive whole number, got {raw!r}") from None
        if days <= 0:
            raise CommandError(f"--days must be a positive whole number, got {raw!r}")
        merged = history_downsample()
        deleted = history_prune(older_than=dt.timedelta(days=days))
        self.stdout.write(
            f"history: {merged} rows merged by downsampling, {deleted} older than {days} days deleted"
        )
