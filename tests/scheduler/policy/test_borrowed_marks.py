"""A team's borrowed marks (scheduler.policy.cohort.borrowed_marks): its excess over its guarantee,
on its newest admissions first, each up to its size."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scheduler.policy.cohort import borrowed_marks


def test_the_excess_goes_to_the_newest_admissions_first() -> None:
    # Newest first: 2, 1 and 2 GPUs; 3 GPUs beyond the guarantee.
    assert borrowed_marks([2000, 1000, 2000], 3000) == [2000, 1000, 0]


def test_the_admission_where_the_excess_runs_out_is_marked_in_part() -> None:
    assert borrowed_marks([1000, 2000, 1000], 2500) == [1000, 1500, 0]


def test_no_excess_marks_nothing() -> None:
    assert borrowed_marks([1000, 2000], 0) == [0, 0]
    assert borrowed_marks([1000, 2000], -500) == [0, 0]  # under the guarantee


def test_an_excess_beyond_what_the_team_holds_marks_every_admission_in_full() -> None:
    assert borrowed_marks([1000, 250], 5000) == [1000, 250]
    assert borrowed_marks([], 1000) == []


@given(st.lists(st.integers(0, 8000), max_size=12), st.integers(-10_000, 50_000))
def test_marks_add_up_to_the_excess_and_fill_the_newer_admissions_before_older_ones(
    sizes: list[int], excess: int
) -> None:
    marks = borrowed_marks(sizes, excess)
    assert sum(marks) == min(max(0, excess), sum(sizes))
    assert all(0 <= mark <= size for mark, size in zip(marks, sizes, strict=True))
    # An older admission is marked only once every newer one is marked in full.
    for i, mark in enumerate(marks):
        if mark:
            assert marks[:i] == sizes[:i]
