"""Input and output shapes of the jobs API. Declarative only: the rules live in jobs.specs and
jobs.services, which the browser form and the CLI share; bounds come from jobs.specs."""

from __future__ import annotations

import copy
import dataclasses
import shlex
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api import StrictInputMixin
from jobs import selectors, specs
from jobs.models import FAILURE_CHOICES, Job, JobEvent, JobKind, Task, WorkspaceApp
from jobs.representation import PlannedRepresentation


@extend_schema_field({"oneOf": [{"type": "integer"}, {"type": "string", "maxLength": 200}]})
class ReferenceField(serializers.Field):
    """An id (integer) or a name (string): a team slug, or an image ``name:tag``."""

    default_error_messages = {"invalid": "Give an integer id or a name (at most 200 characters)."}

    def to_internal_value(self, data: Any) -> int | str:
        if isinstance(data, int) and not isinstance(data, bool):
            return data
        if isinstance(data, str) and 0 < len(data.strip()) <= 200:
            return data.strip()
        self.fail("invalid")
        raise AssertionError  # unreachable: fail() raises

    def to_representation(self, value: Any) -> Any:
        return value


@extend_schema_field(
    {
        "oneOf": [
            {"type": "array", "items": {"type": "string"}, "minItems": 1},
            {"type": "string", "description": "split like a POSIX shell (shlex)"},
        ]
    }
)
class CommandField(serializers.Field):
    """A list of strings, or one string split the way a POSIX shell would (``shlex.split``), so
    ``"python train.py --lr 0.1"`` is accepted from curl. No shell runs the result: no globbing, no
    variable expansion; quoting only groups words."""

    default_error_messages = {
        "invalid": "Give a list of strings or one command line string.",
        "unbalanced": "The command line has unbalanced quotes: {error}.",
        "too_long": f"The command line may have at most {specs.MAX_ARG * 4} characters.",
    }

    def to_internal_value(self, data: Any) -> list[str]:
        if isinstance(data, str):
            if len(data) > specs.MAX_ARG * 4:
                self.fail("too_long")
            try:
                return shlex.split(data)
            except ValueError as exc:
                self.fail("unbalanced", error=str(exc))
        if isinstance(data, list) and all(isinstance(item, str) for item in data):
            return data
        self.fail("invalid")
        raise AssertionError  # unreachable

    def to_representation(self, value: Any) -> Any:
        return value


def _strings(max_items: int, max_len: int, **kwargs: Any) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.CharField(max_length=max_len, allow_blank=True, trim_whitespace=False),
        max_length=max_items,
        **kwargs,
    )


def _bounds_messages(kwargs: dict[str, Any], invalid: str) -> dict[str, str]:
    # One message for both bounds, the same words as jobs.specs uses, so the form, the YAML import and
    # the API say "Must be between 0 and 64." instead of DRF's "greater than or equal to 0".
    between = f"Must be between {kwargs.get('min_value')} and {kwargs.get('max_value')}."
    return {"min_value": between, "max_value": between, "invalid": invalid}


def _int(field_class: type[serializers.IntegerField] = serializers.IntegerField, **kwargs: Any) -> Any:
    return field_class(error_messages=_bounds_messages(kwargs, "A valid integer is required."), **kwargs)


def _number(**kwargs: Any) -> serializers.FloatField:
    return serializers.FloatField(error_messages=_bounds_messages(kwargs, "A number is required."), **kwargs)


@extend_schema_field(
    {
        "oneOf": [
            {
                "type": "integer",
                "minimum": specs.INT_BOUNDS["priority"][0],
                "maximum": specs.INT_BOUNDS["priority"][1],
            },
            {"type": "string", "enum": ["low", "normal", "high", "urgent"]},
        ]
    }
)
class PriorityField(serializers.IntegerField):
    """An integer priority, or a priority class name (low, normal, high, urgent) for its value."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, str) and data.strip() and not data.strip().lstrip("+-").isdigit():
            from scheduler.policy.priority_class import PRIORITY_CLASSES, priority_value

            try:
                return priority_value(data)
            except ValueError:
                raise serializers.ValidationError(
                    f"An integer or a priority class: {', '.join(PRIORITY_CLASSES)}."
                ) from None
        return int(super().to_internal_value(data))


GPU_REQUESTS = ("cpu", "share", "whole")


def _bounded(
    name: str, field_class: type[serializers.IntegerField] = serializers.IntegerField, **kwargs: Any
) -> serializers.Field:
    """A numeric field of the spec: bounds from ``specs.BOUNDS`` (ints: an integer field, floats: a
    number), optional, default from JobSpec (a None default also allows null)."""
    low, high = specs.BOUNDS[name]
    default = specs.JobSpec.default_of(name)
    kwargs.update(min_value=low, max_value=high, required=False, default=default)
    if default is None:
        kwargs["allow_null"] = True
    return _number(**kwargs) if isinstance(low, float) else _int(field_class, **kwargs)


def _input_fields() -> dict[str, serializers.Field]:
    """JobCreateInput's fields: one per JobSpec field, in its order, each numeric one built from the
    bounds table; the request's parts that are not the spec (team, image, gpu_request) after the
    field they are shown with."""
    shaped: dict[str, serializers.Field] = {
        "name": serializers.CharField(
            max_length=specs.MAX_NAME, required=False, default="", allow_blank=True
        ),
        "command": CommandField(help_text='Argument list, e.g. ["python", "train.py"], or one string.'),
        "args": _strings(specs.MAX_ARGS, specs.MAX_ARG, required=False, default=list),
        "env": serializers.DictField(
            child=serializers.CharField(
                max_length=specs.MAX_ENV_VALUE, allow_blank=True, trim_whitespace=False
            ),
            required=False,
            default=dict,
        ),
        "gpu_models": _strings(specs.MAX_GPU_MODELS, specs.MAX_GPU_MODEL, required=False, default=list),
        "priority": _bounded(
            "priority",
            PriorityField,
            help_text="Higher first; or a class: low (-100), normal (0), high (100), urgent (500, if an "
            "admin allowed you). A higher class may preempt a lower one of the same team.",
        ),
        "preemptible": serializers.BooleanField(
            required=False,
            default=specs.JobSpec.default_of("preemptible"),
            help_text="Whether the scheduler may stop the job for another one.",
        ),
        "allow_sharing": serializers.BooleanField(
            required=False,
            default=specs.JobSpec.default_of("allow_sharing"),
            help_text="A one-GPU job (gpus: 1) that may be packed onto a share of a GPU when the model "
            "predicts it stays within slowdown_tolerance.",
        ),
        "kind": serializers.ChoiceField(
            choices=JobKind.choices,
            required=False,
            default=specs.JobSpec.default_of("kind"),
            help_text="batch, or workspace: a server (JupyterLab, TensorBoard, any HTTP app) opened through "
            "/workspaces/<id>/ and culled when idle; a workspace defaults to 250 milli-GPU, not "
            "preemptible (docs/workspaces.md).",
        ),
        "workspace_app": serializers.ChoiceField(
            choices=WorkspaceApp.choices,
            required=False,
            default=specs.JobSpec.default_of("workspace_app"),
            allow_blank=True,
        ),
    }
    help_texts = {
        "sim_duration_seconds": "Simulated backend only: how long the job runs, in simulated seconds.",
        "min_runtime_seconds": "Each run may not be preempted before it is this old.",
        "preemption_grace_seconds": "Seconds between SIGTERM and SIGKILL when preempted; null = the "
        "platform default.",
    }
    not_spec: dict[str, dict[str, serializers.Field]] = {
        "name": {
            "team": ReferenceField(
                required=False,
                help_text="Team id or slug; may be omitted when you can submit to one team only.",
            ),
            "image": ReferenceField(help_text="Image id or reference (name:tag) from GET /api/v1/images/."),
        },
        "env": {
            "gpu_request": serializers.ChoiceField(
                choices=GPU_REQUESTS,
                required=False,
                help_text="What the job asks for, said explicitly (the form always says it): cpu = no GPU, "
                "share = gpu_milli of one GPU, whole = gpus >= 1 whole GPUs. Checked against gpus and "
                "gpu_milli; not stored.",
            )
        },
    }
    built: dict[str, serializers.Field] = {}
    for name in (spec_field.name for spec_field in dataclasses.fields(specs.JobSpec)):
        if name in shaped:
            built[name] = shaped[name]
        else:  # a numeric field: a spec field that is neither shaped here nor bounded fails at import
            built[name] = _bounded(name, help_text=help_texts.get(name))
        built.update(not_spec.get(name, {}))
    return built


_INPUT_FIELDS = _input_fields()
# The names a submission may use (jobs.validation reads them without building a serializer).
INPUT_FIELD_NAMES = frozenset(name for name, f in _INPUT_FIELDS.items() if not f.read_only)


class JobCreateInput(StrictInputMixin, serializers.Serializer):
    """A job to submit. ``gpus`` (whole GPUs per replica) and ``gpu_milli`` (a share of one GPU per
    replica, 1-999, optionally with ``gpu_memory_mib``) are mutually exclusive; neither = CPU only."""

    def get_fields(self) -> dict[str, serializers.Field]:
        # Generated from JobSpec and specs.BOUNDS instead of declared, so no field is written twice.
        return copy.deepcopy(_INPUT_FIELDS)


class JobValidateOutput(serializers.Serializer):
    spec = serializers.DictField(
        help_text="The spec as it would be submitted: defaults filled in, the command as a list, "
        "team as a slug, image as name:tag."
    )


class TaskOutput(PlannedRepresentation, serializers.ModelSerializer):
    class Meta:
        model = Task
        fields = [
            "index",
            "name",
            "phase",
            "node",
            "gpu_indices",
            "gpu_milli",
            "gpu_memory_mib",
            "predicted_slowdown",
            "placement_reason",
            "exit_code",
            "message",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class JobOutput(PlannedRepresentation, serializers.ModelSerializer):
    # Answers built by jobs.representation's plan of these fields (the fields stay for the schema).

    team_slug = serializers.CharField(source="team.slug", read_only=True)
    user = serializers.CharField(source="user.username", read_only=True)
    image_reference = serializers.CharField(source="image.reference", read_only=True)
    total_gpu_milli = serializers.IntegerField(read_only=True)
    queue_position = serializers.SerializerMethodField(
        help_text="1-based place in the cluster-wide queue while QUEUED, else null."
    )
    # Declared, not derived from the model: "" (not failed) must be in the schema's enum.
    failure_category = serializers.ChoiceField(
        choices=FAILURE_CHOICES, allow_blank=True, read_only=True, help_text="Empty unless FAILED."
    )
    workspace_app = serializers.ChoiceField(
        choices=WorkspaceApp.choices,
        allow_blank=True,
        read_only=True,
        help_text="Empty unless a workspace.",
    )
    queue_order = serializers.SerializerMethodField(
        help_text="While QUEUED: the rule that orders the queue (the policy's, from the last cycle)."
    )
    attained_gpu_seconds = serializers.SerializerMethodField(
        help_text="Attained service: GPU-seconds over all runs including the current one (a shared "
        "GPU counts as one, as in 2D-LAS); kept across preemptions and requeues."
    )
    eta = serializers.SerializerMethodField(
        help_text="While QUEUED: estimated start (the policy run forward over expected run times, "
        "jobs.queue_eta); null when unknown."
    )
    eta_confidence = serializers.SerializerMethodField(
        help_text="high (every time it depends on is a declared limit), medium (some from history), "
        "low (some guessed); null without an estimate."
    )

    class Meta:
        model = Job
        # What was asked for is JobSpec's fields, in its order; the rest is what the platform adds.
        fields = [
            "id",
            "team",
            "team_slug",
            "user",
            "image",
            "image_reference",
            *(spec_field.name for spec_field in dataclasses.fields(specs.JobSpec)),
            "total_gpu_milli",
            "status",
            "pending_reason",
            "queue_position",
            "queue_order",
            "attained_gpu_seconds",
            "eta",
            "eta_confidence",
            "preemptions",
            "migrations",
            "time_lost_seconds",
            "failure_category",
            "failure_message",
            "retries",
            "created_at",
            "submitted_at",
            "started_at",
            "finished_at",
            "updated_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_queue_position(self, job: Job) -> int | None:
        return self.context.get("queue_positions", {}).get(job.pk)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_queue_order(self, job: Job) -> str | None:
        if job.status != "QUEUED":
            return None
        return self.context.get("queue_order") or None

    def _eta(self, job: Job) -> tuple[float | None, str | None]:
        if job.status != "QUEUED":
            return (None, None)
        if "_etas" not in self.context:  # one read per response, shared by the list's items
            from django.core.cache import cache

            from jobs.queue_eta import eta_key

            self.context["_etas"] = cache.get(eta_key()) or {}
        found = self.context["_etas"].get(job.pk)
        return (found[0], found[1]) if found else (None, None)

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_eta(self, job: Job) -> str | None:
        from datetime import UTC, datetime

        start = self._eta(job)[0]
        return None if start is None else datetime.fromtimestamp(start, tz=UTC).isoformat()

    @extend_schema_field(serializers.ChoiceField(choices=["high", "medium", "low"], allow_null=True))
    def get_eta_confidence(self, job: Job) -> str | None:
        return self._eta(job)[1]

    @extend_schema_field(serializers.FloatField())
    def get_attained_gpu_seconds(self, job: Job) -> float:
        return round(selectors.attained_now(job), 3)


class PreemptionOutput(serializers.Serializer):
    at = serializers.DateTimeField(help_text="When the job was asked to stop (SIGTERM).")
    kind = serializers.ChoiceField(choices=["preempted", "migrated"])
    rule = serializers.CharField(help_text="The policy rule that chose it (las-level, priority, drain...).")
    preemptor = serializers.IntegerField(allow_null=True, help_text="The job it was stopped for, if any.")
    reason = serializers.CharField()
    stopped_at = serializers.DateTimeField(allow_null=True, help_text="When its tasks had stopped.")


class JobDetailOutput(JobOutput):
    tasks = TaskOutput(many=True, read_only=True)
    las_level = serializers.SerializerMethodField(
        help_text="2D-LAS level of its attained service under the platform policy (0 = least served; "
        "a lower level is served first); null when the policy has no levels."
    )
    preemption_history = serializers.SerializerMethodField()
    borrowed_gpu_milli = serializers.SerializerMethodField(
        help_text="Milli-GPU it holds beyond its team's guarantee (borrowed idle GPUs; reclaimable when "
        "the lending team needs them); 0 when not borrowing or not admitted."
    )
    priority_class = serializers.SerializerMethodField(help_text="low, normal, high or urgent.")

    class Meta(JobOutput.Meta):
        fields = [
            *JobOutput.Meta.fields, "las_level", "preemption_history", "borrowed_gpu_milli", "priority_class", "tasks",
        ]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(serializers.IntegerField())
    def get_borrowed_gpu_milli(self, job: Job) -> int:
        from quotas.selectors import borrowed_gpu_milli

        return borrowed_gpu_milli(job_id=job.pk)

    @extend_schema_field(serializers.ChoiceField(choices=["low", "normal", "high", "urgent"]))
    def get_priority_class(self, job: Job) -> str:
        from scheduler.policy.priority_class import class_of

        return class_of(job.priority)

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_las_level(self, job: Job) -> int | None:
        return selectors.las_level(selectors.attained_now(job))

    @extend_schema_field(PreemptionOutput(many=True))
    def get_preemption_history(self, job: Job) -> list[dict[str, Any]]:
        return PreemptionOutput(selectors.preemption_history(job=job), many=True).data  # type: ignore[return-value]


class JobEventOutput(serializers.ModelSerializer):
    class Meta:
        model = JobEvent
        fields = ["id", "created_at", "from_status", "to_status", "actor", "reason"]
        read_only_fields = fields


class TaskLogOutput(serializers.Serializer):
    task = serializers.CharField()
    index = serializers.IntegerField()
    phase = serializers.CharField()
    log = serializers.CharField()


class JobLogsOutput(serializers.Serializer):
    job = serializers.IntegerField()
    tasks = TaskLogOutput(many=True)


class LogsQuery(serializers.Serializer):
    """Query parameters of the logs endpoint (others, such as ``format``, belong to DRF)."""

    task = serializers.IntegerField(min_value=0, required=False, help_text="Only this task index.")
