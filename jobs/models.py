"""Jobs, their tasks (one per replica) and the event log of every transition."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models import Team
from images.models import JobImage
from jobs.states import FailureCategory, JobStatus

STATUS_CHOICES = [(s.value, s.value.title()) for s in JobStatus]
FAILURE_CHOICES = [(c.value, c.value.title()) for c in FailureCategory]


class JobKind(models.TextChoices):
    # A batch job runs to its end; a workspace (issue 25) serves HTTP on a port until stopped or culled.
    BATCH = "batch"
    WORKSPACE = "workspace"


class WorkspaceApp(models.TextChoices):
    JUPYTERLAB = "jupyterlab"
    TENSORBOARD = "tensorboard"
    HTTP = "http"


class Job(models.Model):
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=10, choices=JobKind.choices, default=JobKind.BATCH, db_index=True)
    # Workspaces only (docs/workspaces.md): what serves, and on which port inside its container (the
    # local backend picks a free port of 127.0.0.1 instead); a TensorBoard reads this job's event files.
    workspace_app = models.CharField(max_length=12, choices=WorkspaceApp.choices, blank=True)
    workspace_port = models.PositiveIntegerField(null=True, blank=True)
    tensorboard_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="tensorboards"
    )
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="jobs")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs")
    image = models.ForeignKey(JobImage, on_delete=models.PROTECT, related_name="jobs")
    command = models.JSONField(help_text='Argument list, e.g. ["python", "train.py"]')
    args = models.JSONField(default=list, blank=True)
    env = models.JSONField(default=dict, blank=True)
    # Either whole GPUs per replica, or one shared GPU per replica (gpu_milli 1..999 + GPU memory).
    gpus = models.PositiveIntegerField(default=0)
    gpu_milli = models.PositiveIntegerField(default=0)
    gpu_memory_mib = models.PositiveIntegerField(default=0)
    gpu_models = models.JSONField(default=list, blank=True, help_text="Acceptable GPU models; empty = any")
    cpu_milli = models.PositiveIntegerField(default=1000)
    memory_mib = models.PositiveIntegerField(default=2048)
    replicas = models.PositiveIntegerField(default=1)
    priority = models.IntegerField(default=0)
    max_runtime_seconds = models.PositiveIntegerField(null=True, blank=True)
    max_retries = models.PositiveIntegerField(default=0)
    slowdown_tolerance = models.FloatField(default=1.5)
    # Simulated backend: how long the job "runs", in simulated seconds.
    sim_duration_seconds = models.FloatField(null=True, blank=True)
    # Preemption (DESIGN.md §5b): whether the policy may stop the job for another one, and not before
    # its current run is this old; SIGTERM -> grace -> SIGKILL (None = settings.PREEMPTION_GRACE_SECONDS).
    preemptible = models.BooleanField(default=True)
    min_runtime_seconds = models.PositiveIntegerField(default=0)
    preemption_grace_seconds = models.PositiveIntegerField(null=True, blank=True)
    # A 1-GPU job that may be packed onto a share of a GPU when the model predicts it stays within
    # slowdown_tolerance.
    allow_sharing = models.BooleanField(default=False)
    status = models.CharField(
        max_length=12, choices=STATUS_CHOICES, default=JobStatus.DRAFT.value, db_index=True
    )
    pending_reason = models.CharField(max_length=500, blank=True)
    # 1-based place in the cluster queue after the last scheduling cycle, in the policy's order (None
    # when not waiting).
    queue_position = models.PositiveIntegerField(null=True, blank=True)
    failure_category = models.CharField(max_length=10, choices=FAILURE_CHOICES, blank=True)
    failure_message = models.TextField(blank=True)
    retries = models.PositiveIntegerField(default=0)
    # Kept across runs (written by jobs.services.job_transition at the end of each run).
    preemptions = models.PositiveIntegerField(default=0)
    migrations = models.PositiveIntegerField(default=0)
    attained_gpu_seconds = models.FloatField(
        default=0.0, help_text="GPU-seconds over all finished runs (a shared GPU counts as one, as in 2D-LAS)"
    )
    time_lost_seconds = models.FloatField(
        default=0.0, help_text="Grace periods waited when preempted, plus the restarts that followed"
    )
    # The current run: when it started RUNNING (None between runs); when it was asked to stop for
    # another job, by which rule and for which job (cleared when the next run starts).
    run_started_at = models.DateTimeField(null=True, blank=True)
    preempted_at = models.DateTimeField(null=True, blank=True)
    preemption_rule = models.CharField(max_length=40, blank=True)
    preempted_for = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # A migration's planned target (Placement.to_dict() per task), tried first once the job is QUEUED.
    planned_placement = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["team", "status"])]

    def __str__(self) -> str:
        return f"job {self.pk} {self.name}"

    @property
    def gpu_milli_per_replica(self) -> int:
        return self.gpus * 1000 if self.gpus else self.gpu_milli

    @property
    def total_gpu_milli(self) -> int:
        return self.gpu_milli_per_replica * self.replicas

    @property
    def grace_seconds(self) -> float:
        """SIGTERM-to-SIGKILL grace on preemption: the job's own, else the platform default."""
        if self.preemption_grace_seconds is not None:
            return float(self.preemption_grace_seconds)
        return float(settings.PREEMPTION_GRACE_SECONDS)


class TaskPhase(models.TextChoices):
    PENDING = "PENDING"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


class Task(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="tasks")
    index = models.PositiveIntegerField()
    name = models.CharField(max_length=200, unique=True, help_text="Deterministic: job-<id>-<index>")
    node = models.CharField(max_length=200, blank=True)
    gpu_indices = models.JSONField(default=list, blank=True)
    gpu_milli = models.PositiveIntegerField(default=0)
    gpu_memory_mib = models.PositiveIntegerField(default=0)
    phase = models.CharField(max_length=10, choices=TaskPhase.choices, default=TaskPhase.PENDING)
    exit_code = models.IntegerField(null=True, blank=True)
    message = models.TextField(blank=True)
    placement_reason = models.TextField(blank=True)
    predicted_slowdown = models.FloatField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job_id", "index"]
        constraints = [models.UniqueConstraint(fields=["job", "index"], name="unique_task_index")]

    def __str__(self) -> str:
        return self.name


class JobEvent(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    from_status = models.CharField(max_length=12, blank=True)
    to_status = models.CharField(max_length=12)
    actor = models.CharField(max_length=150, help_text="username, or 'scheduler' / 'system'")
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.job_id}: {self.from_status} -> {self.to_status}"


class SoloProfile(models.Model):
    """A job configuration's solo profile on one GPU model: the interference model's per-job inputs.

    Keyed by the image reference and a hash of the command line (``jobs.profiling_services``), so every
    job started from the same image with the same command gets it as ``JobRequest.profile``. Written
    only by ``solo_profile_record`` from solo-run samples: the node agent's, the local backend's own
    NVML sampling, or the simulated backend's ground truth (``jobs.solo_sampling``). ``gpu_util`` and
    ``mem_util`` are empty (None) when the sampler measured none (the simulated backend: Gavel has no
    utilisations), so that they reach the interference model as missing, not as 0 %.
    """

    image = models.CharField(max_length=300, help_text="Image reference, e.g. ghcr.io/acme/pytorch:2.4")
    command_hash = models.CharField(max_length=64, help_text="sha256 of the shell-quoted command line")
    command = models.TextField(help_text="The command line the hash was taken of")
    gpu_model = models.CharField(max_length=100, blank=True, help_text="As NVML names it")
    gpu_util = models.FloatField(
        null=True, blank=True, help_text="Mean SM utilisation alone, %; empty: not measured"
    )
    mem_util = models.FloatField(
        null=True,
        blank=True,
        help_text="Mean memory-controller (bandwidth) utilisation alone, %; empty: not measured",
    )
    gpu_memory_mib = models.FloatField(help_text="Peak GPU memory of the job alone, MiB")
    solo_throughput = models.FloatField(null=True, blank=True, help_text="Reported throughput alone")
    batch_size = models.FloatField(null=True, blank=True)
    amp = models.BooleanField(null=True, blank=True, help_text="Mixed precision")
    model_family = models.CharField(max_length=100, blank=True)
    samples = models.PositiveIntegerField(help_text="Steady-state samples aggregated so far")
    measured_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["image", "command_hash", "gpu_model"]
        constraints = [
            models.UniqueConstraint(fields=["image", "command_hash", "gpu_model"], name="unique_solo_profile")
        ]

    def __str__(self) -> str:
        return f"{self.image} {self.command[:60]} on {self.gpu_model or 'any GPU'}"


class ColocationMeasurement(models.Model):
    """Two jobs measured while sharing one GPU (issue 21): each one's throughput while sharing against
    its solo throughput, beside what the interference model predicted when they were placed.

    Written only by ``jobs.colocation.colocation_record``. A configuration is (image, command hash),
    the key of ``SoloProfile``; ``norm_*`` = throughput while sharing / solo throughput, as measured.
    """

    job_a = models.ForeignKey(Job, null=True, on_delete=models.SET_NULL, related_name="+")
    job_b = models.ForeignKey(Job, null=True, on_delete=models.SET_NULL, related_name="+")
    image_a = models.CharField(max_length=300)
    command_hash_a = models.CharField(max_length=64)
    image_b = models.CharField(max_length=300)
    command_hash_b = models.CharField(max_length=64)
    gpu_model = models.CharField(max_length=100, blank=True, help_text="As NVML names it")
    node = models.CharField(max_length=200, blank=True)
    gpu_index = models.IntegerField(null=True, blank=True)
    share_a_milli = models.PositiveIntegerField(help_text="Milli-GPU of job A on the shared GPU")
    share_b_milli = models.PositiveIntegerField(help_text="Milli-GPU of job B on the shared GPU")
    throughput_a = models.FloatField(help_text="Reported throughput of A while sharing")
    throughput_b = models.FloatField(help_text="Reported throughput of B while sharing")
    solo_throughput_a = models.FloatField()
    solo_throughput_b = models.FloatField()
    norm_a = models.FloatField(help_text="Measured normalised throughput of A (1 = no interference)")
    norm_b = models.FloatField(help_text="Measured normalised throughput of B")
    predicted_a = models.FloatField(null=True, blank=True, help_text="Predicted at placement time")
    predicted_b = models.FloatField(null=True, blank=True, help_text="Predicted at placement time")
    measured_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-measured_at", "-id"]
        indexes = [models.Index(fields=["image_a", "command_hash_a", "image_b", "command_hash_b"])]

    def __str__(self) -> str:
        return f"{self.image_a} x {self.image_b} on {self.gpu_model or 'a GPU'}: {self.norm_a:.2f}/{self.norm_b:.2f}"
