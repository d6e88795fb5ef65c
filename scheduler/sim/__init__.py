"""Trace-driven cluster simulator: replays job traces through ``scheduler.schedule()`` in simulated time.

Modules: ``trace`` (loaders), ``cluster`` (spec files), ``perf`` (ground-truth speed from Gavel's
measurements and a comm cost model), ``policies`` (queue order x request shape x placement profile),
``placement`` (``sim_*`` baseline plugins), ``engine`` (the discrete-event loop), ``metrics``, ``plots``
and ``runner`` (one call that runs several policies on one trace).
"""
