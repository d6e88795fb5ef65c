"""State updates: a job starts on its placements, or releases them (finish, preemption, migration)."""

from __future__ import annotations

from scheduler.model import GPU_MILLI, Placement, reserve, unreserve
from scheduler.sim.perf import bottleneck_link, comm_rate
from scheduler.sim.queue import SimQueue
from scheduler.sim.records import DONE, RUNNING, _Job


class SimState(SimQueue):
    def _start(self, job: _Job, placed: list[Placement], now: float) -> None:
        self._dequeue(job)
        job.state = RUNNING
        job.placements = placed
        job.gids = []
        job.violated = False
        job.last = now
        job.run_since = now
        self.since[job.idx] = now
        job.started_at = now
        job.rate = 0.0
        if job.first_start is None:
            job.first_start = now
        else:
            job.remaining += self.cfg.preempt_penalty_s
        nodes_used = set()
        if job.shared:  # only a shared task makes or leaves a partly used GPU (slot kinds)
            self.gpu_moves += 1
        for p in placed:
            ni = self.node_by_name[p.node]
            nodes_used.add(ni)
            self.sig_id[ni] = -1
            self.node_vkey[ni] = None
            self.node_classes[ni] = None
            self.node_clone[ni] = None
            reserve(self.nodes[ni], p)
            self.node_running[ni][p.task_id] = p
            self.task_profiles[p.task_id] = job.tenant_profile
            for gi in p.gpu_indices:
                gid = self.offsets[ni] + gi
                self.free_milli[gid] -= p.gpu_milli
                self.free_mem[gid] -= p.gpu_memory_mib
                self.alloc_milli += p.gpu_milli
                self.tenants[gid].append(job.idx)
                self.tenant_count[ni, gi] += 1
                self.gpu_kind[gid] = None
                job.gids.append(gid)
        self.running.add(job.idx)
        self.placements += 1
        if job.shared:
            gid = job.gids[0]
            if len(self.tenants[gid]) > 1:
                self.shared_gids.add(gid)
            self._set_rate(job, self._shared_rate(job.idx, gid), now)
            self._refresh_gpu(gid, now, skip=job.idx)
        else:
            if len(nodes_used) > 1:
                link: str | None = "NET"
            else:
                ni = next(iter(nodes_used))
                gpus = [gi for p in placed for gi in p.gpu_indices]
                links = self.links[ni]
                key = (id(links), tuple(gpus))  # (the link tables live as long as the run)
                link = self._bottleneck.get(key, "")
                if link == "":
                    link = self._bottleneck[key] = bottleneck_link(links, gpus)
            comm_fraction = self.perf.job_types[job.type_idx].comm_fraction
            ref = self._best_link(self.node_group[min(nodes_used)], job.trace.num_gpus)
            rate = comm_rate(comm_fraction, link) / comm_rate(comm_fraction, ref)
            self._set_rate(job, min(1.0, rate), now)

    def _release(self, job: _Job, now: float) -> None:
        if not self.gpu_bound:
            self.idle_epoch += 1  # CPU or memory may bind: any release may unblock anyone
        self._advance(job, now)
        self.useful -= job.rate * job.trace.num_gpus
        job.rate = 0.0
        job.version += 1
        job.attained += job.trace.num_gpus * (now - job.run_since)
        self.att[job.idx] = job.attained
        self.running.discard(job.idx)
        touched: list[int] = []
        if job.shared:
            self.gpu_moves += 1
        for p in job.placements:
            ni = self.node_by_name[p.node]
            self.sig_id[ni] = -1
            self.node_vkey[ni] = None
            self.node_classes[ni] = None
            self.node_clone[ni] = None
            unreserve(self.nodes[ni], p)
            del self.node_running[ni][p.task_id]
            self.task_profiles.pop(p.task_id, None)
            for gi in p.gpu_indices:
                gid = self.offsets[ni] + gi
                self.free_milli[gid] += p.gpu_milli
                self.free_mem[gid] += p.gpu_memory_mib
                self.alloc_milli -= p.gpu_milli
                self.tenants[gid].remove(job.idx)
                self.tenant_count[ni, gi] -= 1
                self.gpu_kind[gid] = None
                touched.append(gid)
                if self.free_milli[gid] == GPU_MILLI:
                    self.idle_epoch += 1
                else:
                    self.slot_epoch += 1
        job.placements = []
        job.gids = []
        if job.shared:
            for gid in touched:
                if len(self.tenants[gid]) < 2:
                    self.shared_gids.discard(gid)
                self._refresh_gpu(gid, now)

    def _finish(self, job: _Job, now: float) -> None:
        self._release(job, now)
        job.state = DONE
        job.finish = now
        job.remaining = 0.0
        # What an online scheduler learns: this job's service, now that it is done.
        self.priority.completed(job.trace.group, job.trace.num_gpus, job.attained)

    def _preempt(self, job: _Job, now: float) -> None:
        self._release(job, now)
        job.preemptions += 1
        self.preemptions += 1
        self._enqueue(job)
