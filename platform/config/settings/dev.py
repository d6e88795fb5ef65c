from config.env import env_bool, env_str
from config.settings.base import *  # noqa: F403

DEBUG = env_bool("DJANGO_DEBUG", True)
# `make run` (and manage.py) run submitted jobs for real on this machine (docs/local-backend.md);
# CLUSTER_BACKEND=simulated gives the simulated multi-node cluster. Tests and production keep
# base.py's default.
CLUSTER_BACKEND = env_str("CLUSTER_BACKEND", "local")
