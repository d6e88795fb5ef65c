"""The platform applies every part of a policy decision: placements, evictions and migrations.

Everything here runs the real cycle (``jobs.scheduling``), the real sync and bind, the real simulated
backend (its grace period in simulated time) and the real database. Where the decision is the policy's
own (``plan_cycle`` with ``SCHEDULER_POLICY``), the test says so; the application of an eviction or a
migration is also checked with a decision written out (``_apply_preemptions`` is the code under test
there, not the policy).
"""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.utils import timezone

from jobs import scheduling
from jobs import sync as scheduling_sync
from jobs.binding import job_bind
from jobs.models import Job, JobEvent
from jobs.states import JobStatus
from jobs.sync import sync_status
from quotas.models import RunUsage
from scheduler.backends.simulated import SimulatedBackend
from scheduler.model import Decision, Eviction, Migration, Placement
from tests.jobs.runtime_fixtures import (  # noqa: F401  (fixtures)
    clock,
    image,
    researcher,
    sim,
    statuses,
    submit,
    team,
)


def cycle(sim: SimulatedBackend) -> scheduling.CycleResult:
    cache.delete(scheduling.round_key())  # every cycle of these tests is a round
    result = scheduling.run_scheduling_cycle(backend=sim)
    assert result is not None
    return result


def start(job: Job, sim: SimulatedBackend, clock: Any) -> None:
    """Bind the ADMITTED job and let the simulated cluster start it (pending 2 s + pull 10 s)."""
    assert job_bind(job_id=job.pk, backend=sim) == "bound"
    clock.advance(15)
    sync_status(backend=sim)
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING.value


def running_job(sim: SimulatedBackend, clock: Any, researcher: Any, image: Any, **spec: Any) -> Job:
    spec.setdefault("sim_duration_seconds", 100_000)
    job = submit(researcher, image, **spec)
    assert cycle(sim).admitted == [job.pk]
    start(job, sim, clock)
    return job


def apply(sim: SimulatedBackend, decision: Decision) -> dict[int, int | None]:
    view = scheduling.build_view(sim, rounds=False)
    return scheduling._apply_preemptions(sim, decision, view)


def test_a_placement_moves_the_job_to_admitted_with_the_position_and_rule_of_the_rest(
    sim, researcher, image
) -> None:
    placed = submit(researcher, image, gpus=2)
    waiting = submit(researcher, image, gpus=2)
    result = cycle(sim)
    placed.refresh_from_db()
    waiting.refresh_from_db()
    assert result.admitted == [placed.pk]
    assert placed.status == JobStatus.ADMITTED.value and placed.queue_position is None
    order = cache.get(scheduling.queue_order_key())
    assert order
    assert waiting.queue_position == 1
    assert waiting.pending_reason.startswith(f"#1 in queue ({order}): ")


def test_an_eviction_preempts_with_the_grace_period_and_requeues_once_the_tasks_stopped(
    sim, clock, researcher, image
) -> None:
    victim = running_job(sim, clock, researcher, image, gpus=2, preemption_grace_seconds=20)
    urgent = submit(researcher, image, gpus=2, priority=10)
    decision = Decision(evictions=[Eviction(str(victim.pk), "las-level", str(urgent.pk), "level 1 > 0")])

    assert apply(sim, decision) == {victim.pk: urgent.pk}

    victim.refresh_from_db()
    assert victim.status == JobStatus.PREEMPTING.value and victim.preemptions == 1
    event = JobEvent.objects.get(job=victim, to_status=JobStatus.PREEMPTING.value)
    assert "las-level" in event.reason and f"job {urgent.pk}" in event.reason
    # The preemptor waits for the GPUs the victim holds through its grace, named in its reason.
    cycle(sim)
    urgent.refresh_from_db()
    assert urgent.status == JobStatus.QUEUED.value
    assert f"waiting for preempted job {victim.pk} to stop" in urgent.pending_reason
    clock.advance(10)
    sync_status(backend=sim)
    assert Job.objects.get(pk=victim.pk).status == JobStatus.PREEMPTING.value  # grace not over

    clock.advance(15)
    sync_status(backend=sim)

    victim.refresh_from_db()
    assert statuses(victim)[-3:] == ["PREEMPTING", "REQUEUED", "QUEUED"]
    assert f"job {urgent.pk}" in victim.pending_reason
    assert victim.time_lost_seconds >= 0 and victim.run_started_at is None
    (run,) = RunUsage.objects.filter(job=victim)
    assert run.ended_as == JobStatus.REQUEUED.value
    assert victim.attained_gpu_seconds == pytest.approx(run.gpu_seconds)
    assert all(t.message.startswith("preempted") for t in victim.tasks.all())
    assert cycle(sim).admitted == [urgent.pk]
    assert job_bind(job_id=urgent.pk, backend=sim) == "bound"


def test_a_job_that_finishes_during_its_grace_succeeds_instead_of_requeueing(
    sim, clock, researcher, image
) -> None:
    victim = running_job(
        sim, clock, researcher, image, gpus=1, sim_duration_seconds=20, preemption_grace_seconds=60
    )
    apply(sim, Decision(evictions=[Eviction(str(victim.pk), "unpack")]))
    clock.advance(30)
    sync_status(backend=sim)
    victim.refresh_from_db()
    assert victim.status == JobStatus.SUCCEEDED.value
    assert statuses(victim)[-2:] == ["PREEMPTING", "SUCCEEDED"]


def test_cancelling_a_preempting_job_stops_it(sim, clock, researcher, image) -> None:
    from jobs.services import job_cancel

    victim = running_job(sim, clock, researcher, image, gpus=1)
    apply(sim, Decision(evictions=[Eviction(str(victim.pk), "priority")]))
    job_cancel(job=victim, user=researcher)
    sync_status(backend=sim)
    victim.refresh_from_db()
    assert statuses(victim)[-3:] == ["PREEMPTING", "STOPPING", "STOPPED"]
    assert sim.task_statuses(job_id=str(victim.pk)) == []


def test_a_migration_is_placed_on_its_planned_target_once_the_job_is_queued_again(
    sim, clock, researcher, image
) -> None:
    moved = running_job(sim, clock, researcher, image, gpus=1, preemption_grace_seconds=0)
    (task,) = moved.tasks.all()
    other_gpu = 1 - task.gpu_indices[0]
    target = Placement(
        job_id=str(moved.pk),
        task_id=task.name,
        node=task.node,
        gpu_indices=(other_gpu,),
        gpu_milli=1000,
        gpu_memory_mib=task.gpu_memory_mib,
        cpu_milli=moved.cpu_milli,
        memory_mib=moved.memory_mib,
        reason="drained for a 2-GPU job",
    )
    decision = Decision(
        migrations=[Migration(str(moved.pk), (task.node,), "drain", "", "defragment", (target,))]
    )

    assert apply(sim, decision) == {moved.pk: None}

    moved.refresh_from_db()
    assert (moved.status, moved.preemptions, moved.migrations) == (JobStatus.PREEMPTING.value, 1, 1)
    assert moved.planned_placement[0]["gpu_indices"] == [other_gpu]
    sync_status(backend=sim)  # a zero grace: the tasks stopped at once
    assert Job.objects.get(pk=moved.pk).status == JobStatus.QUEUED.value

    result = cycle(sim)

    moved.refresh_from_db()
    assert result.admitted == [moved.pk]
    (task,) = moved.tasks.all()
    assert task.gpu_indices == [other_gpu]
    assert moved.planned_placement == []
    assert "migrated to its planned target" in moved.events.filter(to_status="ADMITTED").last().reason
    start(moved, sim, clock)  # the next run starts RUNNING again, with its restart counted as lost
    assert moved.time_lost_seconds > 0 and moved.preempted_at is None


def test_a_planned_target_taken_meanwhile_leaves_the_job_to_the_policy(sim, clock, researcher, image) -> None:
    moved = running_job(sim, clock, researcher, image, gpus=1, preemption_grace_seconds=0)
    (task,) = moved.tasks.all()
    taken = task.gpu_indices[0]
    target = Placement(
        job_id=str(moved.pk), task_id=task.name, node=task.node, gpu_indices=(taken,), gpu_milli=1000,
        cpu_milli=moved.cpu_milli, memory_mib=moved.memory_mib,
    )  # fmt: skip
    apply(sim, Decision(migrations=[Migration(str(moved.pk), (task.node,), "drain", to=(target,))]))
    sync_status(backend=sim)
    Job.objects.filter(pk=moved.pk).update(
        planned_placement=[{**target.to_dict(), "gpu_indices": [taken, taken + 5]}]  # no such GPU
    )

    result = cycle(sim)

    moved.refresh_from_db()
    assert result.admitted == [moved.pk]  # placed by the policy instead
    assert "migrated to its planned target" not in moved.events.filter(to_status="ADMITTED").last().reason
    assert moved.planned_placement == []


def test_a_job_that_may_not_be_preempted_is_left_running_by_the_real_policy(
    sim, clock, researcher, image, settings
) -> None:
    settings.SCHEDULER_POLICY = "ours"
    keep = running_job(sim, clock, researcher, image, gpus=2, preemptible=False)
    Job.objects.filter(pk=keep.pk).update(run_started_at=timezone.now() - timedelta(hours=10))
    newcomer = submit(researcher, image, gpus=2)

    cycle(sim)

    assert Job.objects.get(pk=keep.pk).status == JobStatus.RUNNING.value
    assert Job.objects.get(pk=newcomer.pk).status == JobStatus.QUEUED.value


def test_the_view_carries_attained_service_run_start_and_preemption_rules(
    sim, clock, researcher, image
) -> None:
    long = running_job(sim, clock, researcher, image, gpus=1, min_runtime_seconds=600)
    started = timezone.now() - timedelta(hours=2)
    Job.objects.filter(pk=long.pk).update(run_started_at=started, attained_gpu_seconds=999.0)
    RunUsage.objects.create(
        team_id=long.team_id, job=long, started_at=started - timedelta(hours=5),
        ended_at=started - timedelta(hours=4), gpus=1, gpu_milli=1000, gpu_seconds=3600.0, ended_as="REQUEUED",
    )  # fmt: skip
    waiting = submit(researcher, image, gpus=1, preemptible=False, max_runtime_seconds=120)

    cycle_view = scheduling.build_view(sim, rounds=True)

    (running,) = cycle_view.view.running
    assert running.job_id == str(long.pk)
    assert running.request.attained_gpu_s == pytest.approx(3600.0)  # from the ledger
    assert running.started_at == pytest.approx(started.timestamp())
    assert running.attained_at(cycle_view.view.now) == pytest.approx(3600.0 + 2 * 3600, rel=1e-3)
    assert running.request.min_runtime_s == 600 and running.placements
    (queued,) = cycle_view.view.queue
    assert (queued.job_id, queued.preemptible, queued.expected_duration_s) == (str(waiting.pk), False, 120.0)
    assert queued.group == image.name


def test_the_real_policy_preempts_a_long_job_for_a_new_one_and_names_the_rule(
    sim, clock, researcher, image, settings
) -> None:
    settings.SCHEDULER_POLICY = "ours"
    long = running_job(sim, clock, researcher, image, gpus=2, preemption_grace_seconds=5)
    # Two GPU-hours attained: level 2 of ours' 2D-LAS (thresholds at 1 and 10 GPU-hours).
    Job.objects.filter(pk=long.pk).update(run_started_at=timezone.now() - timedelta(hours=1))
    short = submit(researcher, image, gpus=2, sim_duration_seconds=60)

    result = cycle(sim)

    long.refresh_from_db()
    assert result.evicted == [long.pk]
    assert long.status == JobStatus.PREEMPTING.value and long.preempted_for_id == short.pk
    assert long.preemption_rule
    clock.advance(10)
    sync_status(backend=sim)
    assert Job.objects.get(pk=long.pk).status == JobStatus.QUEUED.value
    assert short.pk in cycle(sim).admitted


def test_a_job_that_fails_by_itself_during_its_grace_fails_with_its_own_category(
    sim, clock, researcher, image
) -> None:
    victim = running_job(
        sim, clock, researcher, image, gpus=1, command=["false"], sim_duration_seconds=20,
        preemption_grace_seconds=60,
    )  # fmt: skip
    apply(sim, Decision(evictions=[Eviction(str(victim.pk), "priority")]))
    clock.advance(30)
    sync_status(backend=sim)
    victim.refresh_from_db()
    assert (victim.status, victim.failure_category) == (JobStatus.FAILED.value, "USER")
    assert statuses(victim)[-2:] == ["PREEMPTING", "FAILED"]


class IgnoresSigterm(SimulatedBackend):
    """A cluster whose SIGTERM never arrives (a lost message, a hung runtime)."""

    def preempt_job(self, job_id: str, grace_seconds: float) -> None:
        return None


def test_tasks_still_running_well_past_their_grace_are_deleted_and_the_job_requeued(
    clock, researcher, image, sim
) -> None:
    deaf = IgnoresSigterm(sim.state_path, cluster="small", time_scale=1.0, clock=clock)
    victim = running_job(deaf, clock, researcher, image, gpus=1, preemption_grace_seconds=10)
    apply(deaf, Decision(evictions=[Eviction(str(victim.pk), "priority")]))
    sync_status(backend=deaf)
    assert Job.objects.get(pk=victim.pk).status == JobStatus.PREEMPTING.value  # within grace + slack

    late = timezone.now() - timedelta(seconds=10 + scheduling_sync.PREEMPT_KILL_SLACK_S + 1)
    Job.objects.filter(pk=victim.pk).update(preempted_at=late)
    sync_status(backend=deaf)  # deletes the tasks the backend did not stop
    sync_status(backend=deaf)  # finds them gone: requeues

    victim.refresh_from_db()
    assert victim.status == JobStatus.QUEUED.value
    assert deaf.task_statuses(job_id=str(victim.pk)) == []


def test_a_migration_target_is_held_for_the_moved_job_during_its_grace(sim, clock, researcher, image) -> None:
    moved = running_job(sim, clock, researcher, image, gpus=1, preemption_grace_seconds=60)
    (task,) = moved.tasks.all()
    free_gpu = 1 - task.gpu_indices[0]
    target = Placement(
        job_id=str(moved.pk), task_id=task.name, node=task.node, gpu_indices=(free_gpu,), gpu_milli=1000,
        cpu_milli=moved.cpu_milli, memory_mib=moved.memory_mib,
    )  # fmt: skip
    apply(sim, Decision(migrations=[Migration(str(moved.pk), (task.node,), "drain", to=(target,))]))
    newcomer = submit(researcher, image, gpus=1)

    cycle(sim)  # the free GPU is the moved job's target: the newcomer may not take it

    assert Job.objects.get(pk=newcomer.pk).status == JobStatus.QUEUED.value
    clock.advance(61)
    sync_status(backend=sim)
    result = cycle(sim)
    assert moved.pk in result.admitted
    assert Job.objects.get(pk=moved.pk).tasks.get().gpu_indices == [free_gpu]


@pytest.fixture
def two_nodes(tmp_path, clock, settings) -> SimulatedBackend:
    """Two nodes of 2 T4s each: two 1-GPU jobs spread over them leave no node for a 2-GPU job."""
    from scheduler.backends.sim_clusters import cluster_spec

    settings.CACHES = {
        **settings.CACHES,  # other aliases (the throttle cache) stay
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": str(tmp_path)},
    }
    (node,) = cluster_spec("small")
    nodes = [{**node, "name": "t4-1"}, {**node, "name": "t4-2"}]
    return SimulatedBackend(tmp_path / "two.json", cluster=nodes, time_scale=1.0, clock=clock)


def test_the_real_policy_drains_a_node_by_migration_and_the_moved_job_lands_on_its_target(
    two_nodes, clock, researcher, image, settings
) -> None:
    settings.SCHEDULER_POLICY = "ours"
    first = submit(researcher, image, gpus=1, sim_duration_seconds=100_000, preemption_grace_seconds=5)
    second = submit(researcher, image, gpus=1, sim_duration_seconds=100_000, preemption_grace_seconds=5)
    cycle(two_nodes)
    for job in (first, second):
        job_bind(job_id=job.pk, backend=two_nodes)
    clock.advance(15)
    sync_status(backend=two_nodes)
    nodes = {Job.objects.get(pk=j.pk).tasks.get().node for j in (first, second)}
    assert nodes == {"t4-1", "t4-2"}  # ours spreads: an idle GPU first
    wide = submit(researcher, image, gpus=2, sim_duration_seconds=60)

    result = cycle(two_nodes)

    (moved_id,) = result.evicted
    moved = Job.objects.get(pk=moved_id)
    assert (moved.status, moved.migrations, moved.preemption_rule) == (JobStatus.PREEMPTING.value, 1, "drain")
    (target,) = moved.planned_placement
    assert target["node"] != moved.tasks.get().node  # moved to the other node
    wide.refresh_from_db()
    assert f"waiting for preempted job {moved_id} to stop" in wide.pending_reason
    clock.advance(10)
    sync_status(backend=two_nodes)
    assert Job.objects.get(pk=moved_id).status == JobStatus.QUEUED.value

    result = cycle(two_nodes)

    assert set(result.admitted) == {moved_id, wide.pk}
    moved.refresh_from_db()
    assert (moved.tasks.get().node, moved.tasks.get().gpu_indices) == (target["node"], target["gpu_indices"])
    assert len({t.node for t in Job.objects.get(pk=wide.pk).tasks.all()}) == 1  # the drained node, whole


def test_the_real_policy_does_not_drain_a_job_inside_its_minimum_run_time(
    two_nodes, clock, researcher, image, settings
) -> None:
    settings.SCHEDULER_POLICY = "ours"
    spec = {"gpus": 1, "sim_duration_seconds": 100_000, "min_runtime_seconds": 3600}
    running = [submit(researcher, image, **spec) for _ in range(2)]
    cycle(two_nodes)
    for job in running:
        job_bind(job_id=job.pk, backend=two_nodes)
    clock.advance(15)
    sync_status(backend=two_nodes)
    wide = submit(researcher, image, gpus=2, sim_duration_seconds=60)

    result = cycle(two_nodes)

    assert result.evicted == []
    assert all(Job.objects.get(pk=j.pk).status == JobStatus.RUNNING.value for j in running)
    assert Job.objects.get(pk=wide.pk).status == JobStatus.QUEUED.value


def test_with_nobody_waiting_a_round_still_unpacks_a_shared_gpu_when_a_gpu_is_idle(
    sim, clock, researcher, image, settings
) -> None:
    settings.SCHEDULER_POLICY = "ours"  # unpack on idle: the newest tenant restarts alone
    whole = submit(researcher, image, gpus=1, sim_duration_seconds=30)
    cycle(sim)
    job_bind(job_id=whole.pk, backend=sim)
    shared = [submit(researcher, image, gpu_milli=400, sim_duration_seconds=100_000) for _ in range(2)]
    cycle(sim)
    for job in shared:
        job_bind(job_id=job.pk, backend=sim)
    clock.advance(15)
    sync_status(backend=sim)
    assert len({tuple(Job.objects.get(pk=j.pk).tasks.get().gpu_indices) for j in shared}) == 1  # packed
    clock.advance(40)
    sync_status(backend=sim)
    assert Job.objects.get(pk=whole.pk).status == JobStatus.SUCCEEDED.value  # its GPU is idle now
    assert not Job.objects.filter(status=JobStatus.QUEUED.value).exists()

    result = cycle(sim)

    (moved,) = result.evicted
    job = Job.objects.get(pk=moved)
    assert (job.status, job.preemption_rule, job.preempted_for_id) == ("PREEMPTING", "unpack-idle", None)
    cache.set(scheduling.round_key(), int(scheduling._now() // scheduling.ROUND_S))
    assert scheduling.run_scheduling_cycle(backend=sim).evicted == []  # not a round: nothing runs
