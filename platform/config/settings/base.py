"""Settings shared by every environment. Values come from environment variables (config.env)."""

from __future__ import annotations

from pathlib import Path

from csp.constants import NONE, SELF

from config.env import database_from_url, env_bool, env_float, env_int, env_list, env_str

REPO_ROOT = Path(__file__).resolve().parents[3]
BASE_DIR = REPO_ROOT
VAR_DIR = Path(env_str("GPU_PLATFORM_VAR_DIR", str(REPO_ROOT / "var")))

SECRET_KEY = env_str("DJANGO_SECRET_KEY", "insecure-development-key-change-me")
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files from the package: /api/docs/ works offline
    "csp",
    "accounts",
    "quotas",
    "images",
    "jobs",
    "frontend",
    "observability",
    "workspaces",
]

MIDDLEWARE = [
    # First and last: request latency and counts for /metrics (django-prometheus).
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [REPO_ROOT / "platform" / "config" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}")
# PostgreSQL connections per process in a pool (config.env.database_from_url says why); 0 = a new
# connection per request and per Celery task, as before. A follow of a job's logs holds one for up to
# LOGS_FOLLOW_MAX_SECONDS, so the size leaves room for a few followers per web process.
DATABASE_POOL_MAX_SIZE = env_int("DATABASE_POOL_MAX_SIZE", 8)
DATABASES = {"default": database_from_url(DATABASE_URL, pool_max_size=DATABASE_POOL_MAX_SIZE)}
# Web (several gunicorn workers), worker and beat share one SQLite file. WAL lets readers run beside
# the one writer instead of blocking it; writers wait up to `timeout` seconds for the write lock
# (sqlite3's busy handler), and IMMEDIATE takes that lock at BEGIN, where waiting is safe, rather than
# on the first write of a read transaction, where SQLite fails at once with "database is locked".
# synchronous=NORMAL is the documented safe pairing with WAL (a power cut may lose the last commits,
# never corrupt the file).
SQLITE_OPTIONS = {
    "timeout": 30,
    "transaction_mode": "IMMEDIATE",
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = dict(SQLITE_OPTIONS)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

REDIS_URL = env_str("REDIS_URL", "")
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            # One pool per process, not per request (config.redis_pool).
            "OPTIONS": {"pool_class": "config.redis_pool.SharedConnectionPool"},
        }
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache"),
        }
    }

# Celery: Redis when REDIS_URL is set, else a broker that needs no server (files under var/).
CELERY_BROKER_URL = REDIS_URL or "filesystem://"
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = (
    {}
    if REDIS_URL
    else {
        "data_folder_in": str(VAR_DIR / "broker" / "out"),
        "data_folder_out": str(VAR_DIR / "broker" / "out"),
        "processed_folder": str(VAR_DIR / "broker" / "processed"),
        "control_folder": str(VAR_DIR / "broker" / "control"),
        "store_processed": False,
    }
)
if not REDIS_URL:
    # The filesystem transport expects its folders to exist before web, worker or beat start.
    for _folder in ("out", "processed", "control"):
        (VAR_DIR / "broker" / _folder).mkdir(parents=True, exist_ok=True)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
# A worker killed with a message in hand leaves it unacknowledged; Redis hands it out again after the
# visibility timeout (kombu's default is one hour). Every task is idempotent, so a message delivered
# twice is harmless, and the reconciler drives jobs anyway: a short timeout only speeds recovery.
CELERY_VISIBILITY_TIMEOUT_SECONDS = env_float("CELERY_VISIBILITY_TIMEOUT_SECONDS", 120.0)
if REDIS_URL:
    CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] = CELERY_VISIBILITY_TIMEOUT_SECONDS
# A message taken is a message at risk: one at a time per worker process (with acks_late).
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
SCHEDULE_INTERVAL_SECONDS = env_float("SCHEDULE_INTERVAL_SECONDS", 3.0)
# Least time between the starts of two triggered cycles: submits arriving faster are scheduled together
# (jobs.dispatch); 0 = a cycle per trigger.
SCHEDULE_MIN_SPACING_SECONDS = env_float("SCHEDULE_MIN_SPACING_SECONDS", 0.5)
RECONCILE_INTERVAL_SECONDS = env_float("RECONCILE_INTERVAL_SECONDS", 5.0)
# One queue name for producers and workers; tests run an isolated worker on a queue of their own.
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "celery")
# One queue per kind of work, each served by its own worker (runplatform), so a backlog of one (a
# burst of binds) never starves another (the status sync). Names derive from the default queue.
PLATFORM_QUEUES = {
    kind: f"{CELERY_TASK_DEFAULT_QUEUE}.{kind}" for kind in ("cycle", "bind", "sync", "reconcile")
}
CELERY_TASK_ROUTES = {
    "jobs.tasks.run_scheduling_cycle": {"queue": PLATFORM_QUEUES["cycle"]},
    "jobs.tasks.bind_job": {"queue": PLATFORM_QUEUES["bind"]},
    "jobs.tasks.stop_job": {"queue": PLATFORM_QUEUES["bind"]},
    "jobs.tasks.sync_status": {"queue": PLATFORM_QUEUES["sync"]},
    "jobs.tasks.reconcile": {"queue": PLATFORM_QUEUES["reconcile"]},
}
# Beat: periodic scheduling cycle, status sync and reconcile pass (jobs.tasks): the safety net that
# makes every message a hint.
CELERY_BEAT_SCHEDULE = {
    name: {
        "task": f"jobs.tasks.{task}",
        "schedule": every,
        # A tick nobody ran in time is dropped: the next one does the same work (no backlog of ticks).
        "options": {"expires": every * 3},
    }
    for name, task, every in (
        # Through the coalescing flag (jobs.dispatch): at most one cycle message waits.
        ("scheduling-cycle", "tick_scheduling_cycle", SCHEDULE_INTERVAL_SECONDS),
        ("status-sync", "sync_status", SCHEDULE_INTERVAL_SECONDS),
        ("reconcile", "reconcile", RECONCILE_INTERVAL_SECONDS),
    )
}
# The cluster history of the portal's chart (observability.history): one sample a minute.
HISTORY_SAMPLE_SECONDS = env_float("HISTORY_SAMPLE_SECONDS", 60.0)
# What `manage.py prune_history` keeps (older samples are deleted; hourly after 30 days until then).
HISTORY_RETENTION_DAYS = env_int("HISTORY_RETENTION_DAYS", 400)
CELERY_BEAT_SCHEDULE["cluster-history"] = {
    "task": "observability.tasks.sample_cluster_history",
    "schedule": HISTORY_SAMPLE_SECONDS,
    "options": {"expires": HISTORY_SAMPLE_SECONDS},
}
# Interference retraining on the platform's own co-location measurements (jobs.colocation): checked
# hourly, run when this many new measurements exist; on the reconcile queue (rare, minutes at most).
INTERFERENCE_RETRAIN_SECONDS = env_float("INTERFERENCE_RETRAIN_SECONDS", 3600.0)
INTERFERENCE_RETRAIN_MIN_NEW = env_int("INTERFERENCE_RETRAIN_MIN_NEW", 20)
CELERY_TASK_ROUTES["jobs.tasks.retrain_interference"] = {"queue": PLATFORM_QUEUES["reconcile"]}
# Co-location measurements from the running tasks' reported throughputs, once a minute.
COLOCATION_SWEEP_SECONDS = env_float("COLOCATION_SWEEP_SECONDS", 60.0)
CELERY_TASK_ROUTES["jobs.tasks.record_colocations"] = {"queue": PLATFORM_QUEUES["sync"]}
CELERY_BEAT_SCHEDULE["colocation-sweep"] = {
    "task": "jobs.tasks.record_colocations",
    "schedule": COLOCATION_SWEEP_SECONDS,
    "options": {"expires": COLOCATION_SWEEP_SECONDS},
}
# The local backend's own solo profiling through NVML (jobs.solo_sampling): a sample every few
# seconds of each unprofiled job alone on its GPU, a profile after SOLO_PROFILE_SECONDS of them.
SOLO_SAMPLE_SECONDS = env_float("SOLO_SAMPLE_SECONDS", 5.0)
SOLO_PROFILE_SECONDS = env_float("SOLO_PROFILE_SECONDS", 60.0)
SOLO_WARMUP_SECONDS = env_float("SOLO_WARMUP_SECONDS", 10.0)
CELERY_TASK_ROUTES["jobs.tasks.sample_solo_profiles"] = {"queue": PLATFORM_QUEUES["sync"]}
CELERY_BEAT_SCHEDULE["solo-sampling"] = {
    "task": "jobs.tasks.sample_solo_profiles",
    "schedule": SOLO_SAMPLE_SECONDS,
    "options": {"expires": SOLO_SAMPLE_SECONDS},
}
CELERY_BEAT_SCHEDULE["interference-retrain"] = {
    "task": "jobs.tasks.retrain_interference",
    "schedule": INTERFERENCE_RETRAIN_SECONDS,
    "options": {"expires": INTERFERENCE_RETRAIN_SECONDS},
}
# /metrics (observability.access): with a token, only "Authorization: Bearer <token>"; without one,
# loopback clients and these networks (CIDR, comma-separated).
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
METRICS_ALLOWED_NETWORKS = env_list("METRICS_ALLOWED_NETWORKS", [])
# Scheduling lease (jobs.lease) and the reconciler's deadlines (jobs.reconcile), in seconds.
SCHEDULING_LEASE_SECONDS = env_float("SCHEDULING_LEASE_SECONDS", 15.0)
RECONCILE_REBIND_AFTER_SECONDS = env_float("RECONCILE_REBIND_AFTER_SECONDS", 15.0)
RECONCILE_BIND_GIVE_UP_SECONDS = env_float("RECONCILE_BIND_GIVE_UP_SECONDS", 120.0)
RECONCILE_START_TIMEOUT_SECONDS = env_float("RECONCILE_START_TIMEOUT_SECONDS", 600.0)
RECONCILE_LOST_GRACE_SECONDS = env_float("RECONCILE_LOST_GRACE_SECONDS", 30.0)
RECONCILE_STOP_FORCE_SECONDS = env_float("RECONCILE_STOP_FORCE_SECONDS", 120.0)
RECONCILE_PREEMPT_MARGIN_SECONDS = env_float("RECONCILE_PREEMPT_MARGIN_SECONDS", 30.0)
RECONCILE_REQUEUE_AFTER_SECONDS = env_float("RECONCILE_REQUEUE_AFTER_SECONDS", 30.0)
# Dead-man switch: /api/v1/health answers 503 when the last cycle, sync or reconcile pass is older.
HEALTH_MAX_AGE_SECONDS = env_float("HEALTH_MAX_AGE_SECONDS", 60.0)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": [
        "config.filters.FilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "config.api.Pagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "config.api.exception_handler",
    # The API speaks JSON only (the portal, gpuctl and curl all send JSON): form encodings cannot say
    # null or nest, and DRF's browsable HTML pages need inline scripts the CSP refuses.
    "DEFAULT_PARSER_CLASSES": ["config.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_THROTTLE_CLASSES": ["accounts.throttles.WriteRateThrottle"],
    # Trusted reverse proxies in front of the web server: 0 = use REMOTE_ADDR and ignore
    # X-Forwarded-For, which any client can set (rate limits and lockouts key on the address).
    "NUM_PROXIES": env_int("DJANGO_NUM_PROXIES", 0),
}

SPECTACULAR_SETTINGS = {
    "TITLE": "GPU Platform API",
    "DESCRIPTION": "Submit and follow deep learning jobs on shared GPUs.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # "kind" is also a preemption's (preempted | migrated): the job's choice sets get names of their own.
    "ENUM_NAME_OVERRIDES": {
        "JobKindEnum": "jobs.models.JobKind",
        "WorkspaceAppEnum": "jobs.models.WorkspaceApp",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "config.openapi.add_common_error_responses",
    ],
}

# Limits (docs/security.md). Rates are DRF's "<n>/<second|minute|hour|day>"; empty turns one off.
API_THROTTLE_RATES = {
    # POST /api/v1/auth/token/ per client address, successes included.
    "auth": env_str("API_AUTH_THROTTLE_RATE", "60/minute").strip(),
    # POST/PUT/PATCH/DELETE under /api/ per signed-in user.
    "write": env_str("API_WRITE_THROTTLE_RATE", "120/minute").strip(),
}
# Failed logins (token endpoint, portal, admin) before a lockout until the window ends.
LOGIN_FAILURES_PER_USERNAME = env_int("LOGIN_FAILURES_PER_USERNAME", 5)
LOGIN_FAILURES_PER_ADDRESS = env_int("LOGIN_FAILURES_PER_ADDRESS", 50)
LOGIN_FAILURE_WINDOW_SECONDS = env_int("LOGIN_FAILURE_WINDOW_SECONDS", 900)
# A failed CSRF check answers in the API's error shape under /api/.
CSRF_FAILURE_VIEW = "config.api.csrf_failure"
# Cache alias that holds throttle and lockout state (shared by every web process).
THROTTLE_CACHE = "default"
# JSON bodies nesting deeper than this are a 400 (config.parsers).
API_MAX_JSON_DEPTH = 32

# Content-Security-Policy (django-csp) of every page: the portal, admin and Swagger UI load scripts
# and styles only from this origin (no inline code anywhere), images also from data: URLs (the
# favicon, Swagger UI's icons), and no page may be framed.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

# Scheduler and cluster backend (validated by system checks in jobs.checks).
SCHEDULER_PROFILE = env_str("SCHEDULER_PROFILE", "default")
# The policy of every cycle (scheduler.policy.POLICY_NAMES), and the default SIGTERM-to-SIGKILL grace
# of a preempted job (a job may set its own).
SCHEDULER_POLICY = env_str("SCHEDULER_POLICY", "ours")
PREEMPTION_GRACE_SECONDS = env_float("PREEMPTION_GRACE_SECONDS", 30.0)
# How often the policy's periodic rules (preemption, unpacking, drains) run, and the policy's 2D-LAS
# level thresholds in GPU-seconds (empty: the policy's own). Both are the simulator's defaults; a small
# cluster or a demonstration may want shorter ones (README, Configuration).
SCHEDULER_ROUND_SECONDS = env_float("SCHEDULER_ROUND_SECONDS", 360.0)
SCHEDULER_LAS_THRESHOLDS_GPU_S = [float(x) for x in env_list("SCHEDULER_LAS_THRESHOLDS_GPU_S", [])]
# Half-life of the decayed GPU-hour usage behind the teams' fair share (docs/quotas.md).
QUOTA_USAGE_HALF_LIFE_DAYS = env_float("QUOTA_USAGE_HALF_LIFE_DAYS", 7.0)
# Estimate each waiting job's start at the cycle's rounds (jobs.queue_eta; the API's ``eta``).
QUEUE_ETA = env_bool("QUEUE_ETA", True)
CLUSTER_BACKEND = env_str("CLUSTER_BACKEND", "simulated")
# Simulated backend: seconds of simulated time per real second, and the cluster it models.
SIM_TIME_SCALE = env_float("SIM_TIME_SCALE", 60.0)
SIM_CLUSTER = env_str("SIM_CLUSTER", "demo")
SIM_STATE_PATH = env_str("SIM_STATE_PATH", str(VAR_DIR / "simulated-cluster.json"))
# Gavel GPU type whose measured pairs give simulated tasks (env SIM_JOB_TYPE) their rates and
# reported throughputs (scheduler.backends.simulated_throughput); "" turns the ground truth off.
SIM_GROUND_TRUTH_GPU = env_str("SIM_GROUND_TRUTH_GPU", "v100")
# Node agents post solo profiles with this bearer token (jobs.agent_api); "" refuses every post.
NODE_AGENT_TOKEN = env_str("NODE_AGENT_TOKEN", "")
# Minutes a job whose configuration has no solo profile runs alone on an idle GPU, when one is free,
# so that it can be profiled (jobs.solo_first; the cost is in docs/interference.md); 0 = off.
PROFILE_NEW_JOBS = env_float("PROFILE_NEW_JOBS", 0.0)
KUBERNETES_NAMESPACE = env_str("KUBERNETES_NAMESPACE", "gpu-jobs")
KUBERNETES_SCHEDULER_NAME = env_str("KUBERNETES_SCHEDULER_NAME", "gpu-platform-scheduler")
# Where pods keep CHECKPOINT_DIR across a job's runs: "pvc:<claim>" or "hostPath:<dir>" (per-job
# subPath); empty: inside the container, lost on preemption (docs/kubernetes.md).
KUBERNETES_CHECKPOINT_VOLUME = env_str("KUBERNETES_CHECKPOINT_VOLUME", "")
# Local backend (CLUSTER_BACKEND=local): this machine is the one node and tasks really run on it,
# each in a folder under LOCAL_WORK_DIR (see docs/local-backend.md). GPUs come from NVML when a driver
# is present (LOCAL_GPUS=auto), else LOCAL_VIRTUAL_GPUS virtual GPUs marked as such ("virtual" forces
# them, "nvml" refuses to start without a driver). LOCAL_CONTAINERS: "auto" runs a job in Docker when
# an engine is reachable and already has the job's image, "always" requires Docker, "never" uses
# processes only. LOCAL_CPU_MILLI / LOCAL_MEMORY_MIB = 0 means "what the machine has".
# Beside var/, not in it: jobs running as their own uid must traverse the folders above their task
# folders, and var/ (database, credentials) is private to the platform (docs/local-backend.md).
LOCAL_WORK_DIR = env_str("LOCAL_WORK_DIR", str(VAR_DIR.parent / f"{VAR_DIR.name}-jobs"))
LOCAL_NODE_NAME = env_str("LOCAL_NODE_NAME", "")
LOCAL_GPUS = env_str("LOCAL_GPUS", "auto")
LOCAL_VIRTUAL_GPUS = env_int("LOCAL_VIRTUAL_GPUS", 2)
LOCAL_VIRTUAL_GPU_MODEL = env_str("LOCAL_VIRTUAL_GPU_MODEL", "Virtual GPU")
LOCAL_VIRTUAL_GPU_MEMORY_MIB = env_int("LOCAL_VIRTUAL_GPU_MEMORY_MIB", 16384)
LOCAL_CPU_MILLI = env_int("LOCAL_CPU_MILLI", 0)
LOCAL_MEMORY_MIB = env_int("LOCAL_MEMORY_MIB", 0)
LOCAL_STOP_GRACE_SECONDS = env_float("LOCAL_STOP_GRACE_SECONDS", 10.0)
LOCAL_CONTAINERS = env_str("LOCAL_CONTAINERS", "auto")
LOCAL_DOCKER_HOST = env_str("LOCAL_DOCKER_HOST", "")
# Extra variables of the platform's environment that tasks inherit (besides PATH, HOME, LANG, ...).
LOCAL_PASSTHROUGH_ENV = env_list("LOCAL_PASSTHROUGH_ENV", [])
# Isolation (docs/local-backend.md, "Threat model"): when the platform runs as root, jobs run as
# LOCAL_JOB_USER's group with a uid of their own from LOCAL_JOB_UID_RANGE ("" = all as LOCAL_JOB_USER).
# Not root: jobs run as the platform's user; production refuses that unless LOCAL_TRUSTED_USERS=1.
LOCAL_JOB_USER = env_str("LOCAL_JOB_USER", "gpujob")
LOCAL_JOB_UID_RANGE = env_str("LOCAL_JOB_UID_RANGE", "3000000-3099999")
LOCAL_TRUSTED_USERS = env_bool("LOCAL_TRUSTED_USERS", False)
LOCAL_ISOLATION_REQUIRED = False  # production settings: True
API_TOKEN_TTL_DAYS = env_int("API_TOKEN_TTL_DAYS", 90)
# Live logs (jobs.log_stream): how often a follower polls, and how long one stream may last before it
# ends with a `timeout` event and the client reconnects (a bound on a web worker's time per request).
LOGS_FOLLOW_POLL_SECONDS = env_float("LOGS_FOLLOW_POLL_SECONDS", 1.0)
LOGS_FOLLOW_MAX_SECONDS = env_float("LOGS_FOLLOW_MAX_SECONDS", 30.0)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}

# Workspaces (issue 25, docs/workspaces.md): stopped after this long without a request through the
# proxy or kernel activity (Jupyter's /api/status); checked by beat every WORKSPACE_CULL_CHECK_SECONDS.
WORKSPACE_IDLE_SECONDS = env_float("WORKSPACE_IDLE_SECONDS", 3600.0)
WORKSPACE_CULL_CHECK_SECONDS = env_float("WORKSPACE_CULL_CHECK_SECONDS", 60.0)
CELERY_BEAT_SCHEDULE["workspace-cull"] = {
    "task": "workspaces.tasks.cull_idle_workspaces",
    "schedule": WORKSPACE_CULL_CHECK_SECONDS,
    "options": {"expires": WORKSPACE_CULL_CHECK_SECONDS},
}
