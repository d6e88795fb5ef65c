from config.settings.base import *  # noqa: F403

# Tests open connections per thread and close them (the concurrency tests release 50 threads at once
# against row locks): no pool unless asked for, so a test's threads never wait for one another's
# connection. tests/api/test_database_pool.py checks the pool itself.
_options = DATABASES["default"].get("OPTIONS")  # noqa: F405
if env_int("DATABASE_POOL_MAX_SIZE", 0) <= 0 and isinstance(_options, dict):  # noqa: F405
    _options.pop("pool", None)
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# The health check's dead-man switch (jobs.heartbeat) is off in tests unless a test turns it on: one
# test process runs cycles and syncs in-process at random times, so ages would mean nothing.
HEALTH_MAX_AGE_SECONDS = env_float("HEALTH_MAX_AGE_SECONDS", 0.0)  # noqa: F405

# Throttle and lockout state per test process, emptied before every test (tests/conftest.py): the
# personas share usernames across tests, and the shared file cache is seen by parallel test runs.
CACHES = {
    **CACHES,  # noqa: F405
    "throttle": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "throttle"},
}
THROTTLE_CACHE = "throttle"
# Triggered cycles go out at once in tests (a test's cycle follows its submit); the spacing itself is
# tested with the setting overridden (tests/jobs/test_cycle_spacing.py).
SCHEDULE_MIN_SPACING_SECONDS = env_float("SCHEDULE_MIN_SPACING_SECONDS", 0.0)  # noqa: F405
