"""Results of the client as dataclasses, one per schema of the API (``/api/schema/``).

Each class names the OpenAPI component it mirrors in ``SCHEMA``; a test compares every field (name,
type, nullability) with the live schema, so the two cannot drift apart. Fields the server adds after
this client was released land in ``extra`` instead of failing: an old gpuctl keeps working against a
newer server.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

T = TypeVar("T", bound="ApiModel")


@dataclass
class ApiModel:
    SCHEMA: ClassVar[str] = ""
    # Fields whose JSON is turned into another model (name -> model class); the rest are copied.
    NESTED: ClassVar[dict[str, type[ApiModel]]] = {}

    extra: dict[str, Any] = field(default_factory=dict, kw_only=True, repr=False)

    @classmethod
    def api_fields(cls) -> list[dataclasses.Field[Any]]:
        return [f for f in dataclasses.fields(cls) if f.name != "extra"]

    @classmethod
    def from_api(cls: type[T], data: dict[str, Any]) -> T:
        known = {f.name for f in cls.api_fields()}
        values: dict[str, Any] = {}
        for name in known:
            if name not in data:
                continue
            value = data[name]
            nested = cls.NESTED.get(name)
            if nested is not None and isinstance(value, list):
                value = [nested.from_api(item) for item in value]
            values[name] = value
        missing = [f.name for f in cls.api_fields() if f.name not in values and _required(f)]
        for name in missing:  # an older server: leave the field empty rather than fail
            values[name] = None
        return cls(**values, extra={k: v for k, v in data.items() if k not in known})

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in self.api_fields():
            value = getattr(self, f.name)
            if isinstance(value, list):
                value = [item.to_dict() if isinstance(item, ApiModel) else item for item in value]
            out[f.name] = value
        out.update(self.extra)
        return out


def _required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


@dataclass
class Task(ApiModel):
    SCHEMA: ClassVar[str] = "TaskOutput"

    index: int
    name: str
    phase: str
    node: str
    gpu_indices: list[int]
    gpu_milli: int
    gpu_memory_mib: int
    predicted_slowdown: float | None
    placement_reason: str
    exit_code: int | None
    message: str
    started_at: str | None
    finished_at: str | None


@dataclass
class Job(ApiModel):
    """A job as ``GET /api/v1/jobs/`` lists it."""

    SCHEMA: ClassVar[str] = "JobOutput"

    id: int
    name: str
    team: int
    team_slug: str
    user: str
    image: int
    image_reference: str
    command: list[str]
    args: list[str]
    env: dict[str, str]
    gpus: int
    gpu_milli: int
    gpu_memory_mib: int
    gpu_models: list[str]
    cpu_milli: int
    memory_mib: int
    replicas: int
    total_gpu_milli: int
    priority: int
    max_runtime_seconds: int | None
    max_retries: int
    slowdown_tolerance: float
    sim_duration_seconds: float | None
    preemptible: bool
    min_runtime_seconds: int
    allow_sharing: bool
    preemption_grace_seconds: int | None
    kind: str
    workspace_app: str
    workspace_port: int | None
    status: str
    pending_reason: str
    queue_position: int | None
    queue_order: str | None
    attained_gpu_seconds: float
    eta: str | None
    eta_confidence: str | None
    preemptions: int
    migrations: int
    time_lost_seconds: float
    failure_category: str
    failure_message: str
    retries: int
    created_at: str
    submitted_at: str | None
    started_at: str | None
    finished_at: str | None
    updated_at: str

    @property
    def finished(self) -> bool:
        return self.status in FINAL_STATUSES


@dataclass
class Preemption(ApiModel):
    """One time the job was stopped for another (or moved): when, by which rule, for whom."""

    SCHEMA: ClassVar[str] = "PreemptionOutput"

    at: str
    kind: str
    rule: str
    preemptor: int | None
    reason: str
    stopped_at: str | None


@dataclass
class JobDetail(Job):
    """One job with its tasks (``GET /api/v1/jobs/{id}/``)."""

    SCHEMA: ClassVar[str] = "JobDetailOutput"
    NESTED: ClassVar[dict[str, type[ApiModel]]] = {"tasks": Task, "preemption_history": Preemption}

    las_level: int | None = None
    preemption_history: list[Preemption] = field(default_factory=list)
    borrowed_gpu_milli: int = 0
    priority_class: str = "normal"
    tasks: list[Task] = field(default_factory=list)


@dataclass
class JobEvent(ApiModel):
    SCHEMA: ClassVar[str] = "JobEventOutput"

    id: int
    created_at: str
    from_status: str
    to_status: str
    actor: str
    reason: str


@dataclass
class TaskLog(ApiModel):
    SCHEMA: ClassVar[str] = "TaskLogOutput"

    task: str
    index: int
    phase: str
    log: str


@dataclass
class Image(ApiModel):
    SCHEMA: ClassVar[str] = "ImageOutput"

    id: int
    name: str
    tag: str
    reference: str
    framework: str
    framework_version: str
    cuda_version: str
    min_driver: str
    python_version: str
    description: str
    registry: str
    digest: str
    accelerator: str
    base_image: str
    built_at: str | None
    is_active: bool
    created_at: str
    updated_at: str


@dataclass
class WaitingJob(ApiModel):
    SCHEMA: ClassVar[str] = "WaitingJobOutput"

    job_id: int
    name: str
    reason: str


@dataclass
class Quota(ApiModel):
    SCHEMA: ClassVar[str] = "QuotaUsageOutput"
    NESTED: ClassVar[dict[str, type[ApiModel]]] = {"waiting_jobs": WaitingJob}

    team_id: int
    team_slug: str
    team_name: str
    guaranteed_gpu_milli: int
    max_gpu_milli: int
    used_gpu_milli: int
    free_gpu_milli: int
    max_concurrent_jobs: int
    used_jobs: int
    per_user_gpu_milli: int
    caller_gpu_milli: int
    gpu_hours_per_month: float
    gpu_hours_this_month: float
    updated_at: str
    lending_limit_gpu_milli: int | None
    borrowed_gpu_milli: int
    decayed_gpu_hours: float
    fair_share_factor: float
    budget_gpu_hours: float
    budget_used_fraction: float
    budget_warning: bool
    waiting_jobs: list[WaitingJob] = field(default_factory=list)


@dataclass
class Token(ApiModel):
    SCHEMA: ClassVar[str] = "TokenCreatedOutput"

    id: int
    name: str
    prefix: str
    created_at: str
    expires_at: str | None
    revoked_at: str | None
    last_used_at: str | None
    is_active: bool
    token: str


@dataclass
class LogChunk:
    """New output of one task, from the live-logs stream."""

    task: str
    index: int
    offset: int
    text: str
    reset: bool = False


@dataclass
class LogEnd:
    """The job has ended: the stream is over."""

    status: str
    failure_category: str = ""


FINAL_STATUSES = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})
MODELS: tuple[type[ApiModel], ...] = (
    Task,
    Job,
    Preemption,
    JobDetail,
    JobEvent,
    TaskLog,
    Image,
    Quota,
    Token,
)

# The request body of POST /api/v1/jobs/ (schema JobCreateInput), in the order a person reads a spec:
# what `clone --set` copies from a job and what `submit` documents. Kept in step by a test.
SUBMIT_FIELDS: tuple[str, ...] = (
    "name",
    "team",
    "image",
    "command",
    "args",
    "env",
    "gpus",
    "gpu_milli",
    "gpu_memory_mib",
    "gpu_models",
    "cpu_milli",
    "memory_mib",
    "replicas",
    "priority",
    "max_runtime_seconds",
    "max_retries",
    "slowdown_tolerance",
    "sim_duration_seconds",
    "preemptible",
    "min_runtime_seconds",
    "allow_sharing",
    "preemption_grace_seconds",
    "kind",
    "workspace_app",
    "workspace_port",
)
