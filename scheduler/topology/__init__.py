"""Link topology of GPU nodes, communication cost of GPU sets, and the topology-aware parallelizer.

* ``parse_topology`` / ``read_topology_file``: ``nvidia-smi topo -m`` text -> ``Topology``;
* ``read_topology`` (``scheduler.topology.nvml``): NVML through a pynvml-like module -> ``Topology``;
* ``Topology.to_dict`` / ``Topology.from_dict``: the JSON form backends carry in annotations;
* ``scheduler.topology.links``: bandwidth per link class and generation;
* ``scheduler.topology.cost``: ring all-reduce bandwidth/time and predicted iteration time;
* ``choose_set`` / ``place_job``: the parallelizer; ``scheduler.bench.topology.baselines``: besteffort,
  first fit, random.
"""

from __future__ import annotations

from typing import Any

from scheduler.topology.cost import CommProfile, iteration_time, ring_bandwidth
from scheduler.topology.graph import Topology
from scheduler.topology.parser import TopologyParseError, parse_topology, read_topology_file
from scheduler.topology.placer import Choice, JobPlan, NodeView, choose_set, place_job


def topology_from_any(value: Any) -> Topology | None:
    """What backends may store in ``Node.topology``: a Topology, its dict form, or matrix text."""
    if value is None or isinstance(value, Topology):
        return value
    if isinstance(value, dict):
        return Topology.from_dict(value)
    if isinstance(value, str):
        return parse_topology(value)
    raise ValueError(f"unsupported topology value of type {type(value).__name__}")


__all__ = [
    "Choice",
    "CommProfile",
    "JobPlan",
    "NodeView",
    "Topology",
    "TopologyParseError",
    "choose_set",
    "iteration_time",
    "parse_topology",
    "place_job",
    "read_topology_file",
    "ring_bandwidth",
    "topology_from_any",
]
