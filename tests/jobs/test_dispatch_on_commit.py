"""Dispatch: work is enqueued only once the transaction commits, and a broker outage never escapes."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from jobs import dispatch, tasks


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...]]]:
    calls: list[tuple[str, tuple[Any, ...]]] = []
    dispatch.cycle_started()  # no coalesced cycle left pending by an earlier test
    for name in ("run_scheduling_cycle", "bind_job", "stop_job", "sync_status"):
        monkeypatch.setattr(getattr(tasks, name), "delay", lambda *a, _n=name: calls.append((_n, a)))
    return calls


def test_requests_are_sent_only_after_the_transaction_commits(
    db: Any, sent, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        dispatch.request_scheduling_cycle()
        dispatch.request_bind(7)
        dispatch.request_stop(8)
        dispatch.request_status_sync()
        assert sent == []  # nothing leaves before the commit
    assert sent == [("run_scheduling_cycle", ()), ("bind_job", (7,)), ("stop_job", (8,)), ("sync_status", ())]


def test_a_rolled_back_transaction_sends_nothing(transactional_db: Any, sent) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        dispatch.request_stop(3)
        raise RuntimeError("submission failed")
    assert sent == []


def test_a_broker_outage_is_logged_not_raised(
    db: Any, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks, caplog
) -> None:
    def refuse(*args: Any) -> None:
        raise ConnectionError("broker down")

    monkeypatch.setattr(tasks.run_scheduling_cycle, "delay", refuse)
    dispatch.cycle_started()  # no coalesced cycle left pending by an earlier test
    with django_capture_on_commit_callbacks(execute=True):
        dispatch.request_scheduling_cycle()
    assert "could not enqueue run_scheduling_cycle" in caplog.text
