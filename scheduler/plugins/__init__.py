"""Built-in scheduler plugins; importing this package registers them by name."""

from scheduler.plugins import first_fit_gpus, resource_fit  # noqa: F401
