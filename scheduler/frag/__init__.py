"""Fragmentation math (FGD's fragment measure, ``fragmentation``) and the FGD trace benchmark.

The placement engine and the cluster's NumPy view live in ``scheduler.engine``.
"""
