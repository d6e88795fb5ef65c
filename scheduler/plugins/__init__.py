"""Built-in scheduler plugins, one per module. Importing this package imports every module, and each
registers its plugin (``scheduler.plugin_registry.register``); the package root imports it, so the
registry is full before any profile is built. A new plugin module is added to this list
(tests/layout checks that none is missing)."""

from scheduler.plugins import (  # noqa: F401  (imported to register)
    balance,
    balance_yield,
    best_fit,
    best_fit_gpus,
    dot_product,
    fgd,
    fgd_fine,
    fgd_fine_gpus,
    fgd_gpus,
    first_fit_gpus,
    gpu_clustering,
    gpu_packing,
    interference_aware,
    k8s_spread,
    random_gpus,
    random_score,
    resource_fit,
    sim_gandiva_gpus,
    sim_gpu_memory_binpack,
    sim_interference,
    sim_least_allocated,
    sim_most_allocated,
    strand_guard,
    topology_aware,
)
