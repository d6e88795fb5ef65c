"""The fairness benchmark's bookkeeping: Jain's index, each team's served fraction, per-team JCT
and the reclaim time.

- **Normalised service** of a team: the GPU-seconds it was served during the arrival window
  ``[0, last submit]`` over the most its jobs could have been served in it (each job from its
  submit: ``num_gpus * min(duration, window end - submit)``; ``possible_service``). A trace
  replayed to the end serves everything, so only the window shows who was kept waiting; a team
  whose jobs all ran at once gets 1, whatever their size and length.
- **Jain's index** over those fractions: ``(sum x)^2 / (n * sum x^2)``, 1 when equal, ``1/n`` when
  one team gets everything.
- **Reclaim time**: a team is *owed* while it holds less than its guarantee and one of its waiting
  jobs would fit in the rest of its guarantee (``held + size <= guarantee``). An episode runs from
  the first moment a team is owed to the first moment it is not (it got its guarantee, or what it
  asks for within it). Episodes still open when the replay ends are counted apart (``open``), and
  are not in the percentiles.
- **Request reclaim time**: the same question asked per job. A job asks *within its team's
  guarantee* when, just before it arrives, its team holds less than its guarantee and the job fits
  in the rest; its time is from its submit to its first start, or to the first moment its team no
  longer has room for it within the guarantee, if sooner (the team's own other work took the rest:
  it has its guarantee, and the job waits behind its own team). An episode is the team's: a team
  whose jobs arrive faster than the grace period stays owed from the first to the last, though each
  is served at once, so the episode grows with the stream and says nothing of how long any one
  request waited. This one does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index of ``values`` (1.0 for an empty or all-zero list: nobody is favoured)."""
    x = np.asarray(values, dtype=float)
    square = float((x**2).sum())
    if len(x) == 0 or square == 0.0:
        return 1.0
    return float(x.sum() ** 2 / (len(x) * square))


@dataclass(frozen=True)
class Run:
    """One run of a job: its team, the GPUs it held, and when (``end`` may be past the window)."""

    team: str
    gpus: float
    start: float
    end: float


def possible_service(jobs: Iterable[tuple[str, float, float, float]], window_end: float) -> dict[str, float]:
    """Per team, the GPU-seconds its jobs ((team, GPUs, submit, duration)) could get by ``window_end``
    had each run from its submit."""
    out: dict[str, float] = {}
    for team, gpus, submit, duration in jobs:
        if submit <= window_end:
            out[team] = out.get(team, 0.0) + gpus * min(duration, window_end - submit)
    return out


def served_fraction(
    runs: Iterable[Run], demand_gpu_s: Mapping[str, float], window_end: float
) -> dict[str, float]:
    """Per team of ``demand_gpu_s``: GPU-seconds its ``runs`` got before ``window_end`` over
    ``demand_gpu_s`` (what it could have got, ``possible_service``; capped at 1)."""
    got = dict.fromkeys(demand_gpu_s, 0.0)
    for run in runs:
        if run.team in got:
            got[run.team] += run.gpus * max(0.0, min(run.end, window_end) - run.start)
    return {t: min(1.0, got[t] / d) if d > 0 else 1.0 for t, d in demand_gpu_s.items()}


@dataclass(frozen=True)
class TeamSample:
    """What the teams held and asked for at one instant (milli-GPU)."""

    t: float
    held: Mapping[str, int]
    # Team -> sizes of its waiting jobs.
    waiting: Mapping[str, Sequence[int]]


@dataclass(frozen=True)
class Episode:
    team: str
    start: float
    end: float
    closed: bool

    @property
    def seconds(self) -> float:
        return self.end - self.start


def owed(held: int, guarantee: int, waiting: Sequence[int]) -> bool:
    return held < guarantee and any(held + size <= guarantee for size in waiting)


def reclaim_episodes(samples: Sequence[TeamSample], guarantees_milli: Mapping[str, int]) -> list[Episode]:
    """The episodes during which a team was owed its guarantee (module docstring), in ``samples``
    (in time order; each state holds until the next sample)."""
    since: dict[str, float] = {}
    out: list[Episode] = []
    for sample in samples:
        for team, guarantee in guarantees_milli.items():
            now_owed = owed(sample.held.get(team, 0), guarantee, sample.waiting.get(team, ()))
            if now_owed and team not in since:
                since[team] = sample.t
            elif not now_owed and team in since:
                out.append(Episode(team, since.pop(team), sample.t, True))
    end = samples[-1].t if samples else 0.0
    out += [Episode(team, start, end, False) for team, start in since.items()]
    return sorted(out, key=lambda e: (e.start, e.team))


def request_reclaim_times(
    samples: Sequence[TeamSample],
    guarantees_milli: Mapping[str, int],
    jobs: Iterable[tuple[str, int, float, float]],
) -> list[float]:
    """Per job ((team, milli-GPU, submit, first start)) that asked within its team's guarantee
    (module docstring; judged on the last sample before its submit, none: the team held nothing):
    seconds from its submit until it started or its team no longer had room for it within the
    guarantee (its own other work took the rest: the team has its guarantee), whichever came first.
    Jobs that never started are left out."""
    times = np.array([s.t for s in samples], dtype=float)
    held_of: dict[str, np.ndarray] = {}
    out: list[float] = []
    for team, milli, submit, first_start in jobs:
        if math.isnan(first_start):
            continue
        if team not in held_of:
            held_of[team] = np.array([s.held.get(team, 0) for s in samples], dtype=np.int64)
        held = held_of[team]
        guarantee = guarantees_milli.get(team, 0)
        i = int(np.searchsorted(times, submit, side="left"))
        before = int(held[i - 1]) if i > 0 else 0
        if not (before < guarantee and before + milli <= guarantee):
            continue
        after = np.flatnonzero(held[i:] + milli > guarantee)
        full_at = float(times[i + after[0]]) if after.size else math.inf
        out.append(min(first_start, max(submit, full_at)) - submit)
    return out


def percentile(values: Sequence[float], q: float) -> float | None:
    """``q``-th percentile (linear interpolation), None for no values."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else None


def team_jct(teams: Sequence[str], submit: np.ndarray, finish: np.ndarray) -> dict[str, float]:
    """Average JCT (seconds) per team."""
    jct = finish - submit
    labels = np.asarray(teams)
    return {t: float(jct[labels == t].mean()) for t in sorted(set(teams))}
