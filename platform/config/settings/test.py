from config.settings.base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# The health check's dead-man switch (jobs.heartbeat) is off in tests unless a test turns it on: one
# test process runs cycles and syncs in-process at random times, so ages would mean nothing.
HEALTH_MAX_AGE_SECONDS = env_float("HEALTH_MAX_AGE_SECONDS", 0.0)  # noqa: F405
