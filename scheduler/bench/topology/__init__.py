"""Topology benchmarks: the parallelizer against the baselines (``baselines``: besteffort, first fit,
random) on the measured topologies (``evaluate``)."""
