"""Triggered cycles are spaced: a stream of submits is scheduled in batches, a lone one at once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.test import override_settings

from jobs import dispatch, tasks

SPACING_S = 0.5


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, float]]]:
    """(how, countdown) of each cycle message: "now" through delay(), "later" through apply_async."""
    calls: list[tuple[str, float]] = []
    task = tasks.run_scheduling_cycle
    monkeypatch.setattr(task, "delay", lambda *a: calls.append(("now", 0.0)))
    monkeypatch.setattr(
        task, "apply_async", lambda args=(), countdown=0.0, **kw: calls.append(("later", countdown))
    )
    with override_settings(SCHEDULE_MIN_SPACING_SECONDS=SPACING_S):
        dispatch.cycle_started()  # clears a pending mark an earlier test may have left
        cache.delete(dispatch.scoped_key(dispatch.LAST_START_KEY))  # and the last start it recorded
        yield calls


def test_a_trigger_with_no_recent_cycle_is_sent_at_once(db: Any, sent) -> None:
    dispatch.tick_scheduling_cycle()

    assert sent == [("now", 0.0)]


def test_a_trigger_just_after_a_cycle_started_waits_out_the_rest_of_the_spacing(db: Any, sent) -> None:
    dispatch.cycle_started()
    dispatch.tick_scheduling_cycle()

    assert len(sent) == 1
    how, countdown = sent[0]
    assert how == "later"
    assert 0 < countdown <= SPACING_S


def test_triggers_during_the_wait_add_no_message(db: Any, sent) -> None:
    dispatch.cycle_started()
    for _ in range(20):  # a burst of submits while the spaced cycle waits
        dispatch.tick_scheduling_cycle()

    assert [how for how, _ in sent] == ["later"]


def test_a_trigger_once_the_spacing_has_passed_is_sent_at_once(db: Any, sent) -> None:
    dispatch.cycle_started()
    time.sleep(SPACING_S + 0.1)
    dispatch.tick_scheduling_cycle()

    assert sent == [("now", 0.0)]


def test_no_spacing_when_it_is_set_to_zero(db: Any, sent) -> None:
    with override_settings(SCHEDULE_MIN_SPACING_SECONDS=0):
        dispatch.cycle_started()
        dispatch.tick_scheduling_cycle()

    assert sent == [("now", 0.0)]
