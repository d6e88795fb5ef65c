"""Vectorised cluster state, placement engine, fragmentation math and the FGD trace benchmark.

Modules: ``arrays`` (NumPy view of the cluster), ``engine`` (the placement loop ``schedule()`` and
the benchmark share), ``batch`` (per-node adapters of batch plugins), ``fragmentation`` (FGD's
fragment measure), ``trace`` (CSV loading), ``experiment`` (the paper's fill-the-cluster method),
``metrics`` (binning and summaries) and ``report`` (markdown tables beside the published numbers).
"""
