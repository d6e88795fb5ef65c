"""The placement engine: ``schedule()`` and what it runs on.

Modules: ``schedule`` (the cycle over a queue of jobs, gang all-or-nothing), ``placement`` (one task at
a time: filter, score, choose GPUs), ``arrays`` (the NumPy view of the cluster the batch plugins read),
``fit`` (which GPUs can take a task, shared by the engine and the plugins) and ``row_adapters`` (the
per-node hooks of batch plugins, run on a one-row view). Plugins live in ``scheduler.plugins``; their
Protocols and the profile in ``scheduler.framework``. Importing this package imports none of them, so
a plugin module can import ``scheduler.engine.arrays`` without a cycle.
"""
