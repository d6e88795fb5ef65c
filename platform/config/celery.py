"""The Celery app. Tasks live in jobs.tasks; beat triggers a scheduling cycle every few seconds."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")

app = Celery("gpu_platform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
