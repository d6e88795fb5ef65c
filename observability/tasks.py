"""Beat's observability work: sample the cluster into the history table once a minute."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="observability.tasks.sample_cluster_history", ignore_result=True)
def sample_cluster_history() -> None:
    """One sample plus downsampling. A missed minute is a gap in the chart, never a wrong value, so
    the task is not retried (the next tick samples again)."""
    from observability.history import history_sample

    history_sample()


# Imported with the tasks, i.e. in every worker: connects the metrics server to worker start-up.
from observability import worker_metrics  # noqa: E402, F401
