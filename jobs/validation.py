"""The one validation path of a job submission: the REST API (``POST /api/v1/jobs/`` and
``POST /api/v1/jobs/validate/``), the portal's form and its YAML import all call check_submission.

It reports every problem at once, as ``{field: [message, ...]}``: unknown fields, the input shapes
(jobs.serializers.JobCreateInput), the spec's rules (jobs.specs.validate_job_spec), the explicit GPU
request, the team and the image, and for a dry run what needs the cluster (a request no node could
ever hold). Nothing is stored; jobs.services.job_submit_checked (or job_submit) then queues the job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from django.core.exceptions import ValidationError

from accounts.models import Team
from images.models import JobImage
from jobs import services
from jobs.selectors import resolve_image
from jobs.serializers import INPUT_FIELD_NAMES, JobCreateInput
from jobs.specs import MAX_GPUS, JobSpec, validate_job_spec
from workspaces.spec import with_workspace_defaults

# The words of the explicit GPU request, so a whole-GPU job with "0" is never taken for CPU only.
GPU_REQUEST_RULES = {
    "cpu": "CPU only: leave out gpus (or 0) and gpu_milli.",
    "share": "A share of one GPU: set gpu_milli (1-999) and leave out gpus.",
    "whole": "Whole GPUs: ask for 1 to {max} whole GPUs per replica; for a job without a GPU choose CPU only.",
}


@dataclass(frozen=True)
class CheckedSubmission:
    """What check_submission found: the errors, and when there are none the parts job_submit takes."""

    errors: dict[str, list[str]] = field(default_factory=dict)
    spec: JobSpec | None = None
    team: Team | None = None
    image: JobImage | None = None

    @property
    def ok(self) -> bool:
        return not self.errors

    def normalised(self) -> dict[str, Any]:
        """The spec as it would be stored (defaults filled in, a command string split into words),
        with the team's slug and the image's reference: what the YAML export writes."""
        if self.spec is None:
            return {}
        data = asdict(self.spec)
        if data["gpus"]:
            data["gpu_milli"] = None
        data["team"] = self.team.slug if self.team else None
        data["image"] = self.image.reference if self.image else None
        return data


def _add(errors: dict[str, list[str]], name: str, messages: Any) -> None:
    for message in messages if isinstance(messages, list) else [messages]:
        text = message if isinstance(message, str) else str(message)
        if text not in errors.setdefault(name, []):
            errors[name].append(text)


def _flatten(detail: Any) -> list[str]:
    """DRF's nested error detail (a list, or a dict for a child such as env) as plain messages."""
    if isinstance(detail, dict):
        return [f"{key}: {text}" for key, value in detail.items() for text in _flatten(value)]
    if isinstance(detail, list):
        return [text for item in detail for text in _flatten(item)]
    return [str(detail)]


def _gpu_request_errors(request: str, values: dict[str, Any]) -> dict[str, list[str]]:
    """Whether gpus and gpu_milli say what ``request`` says (the caller skips fields already in error)."""
    gpus = values.get("gpus", 0)
    milli = values.get("gpu_milli")
    whole = GPU_REQUEST_RULES["whole"].format(max=MAX_GPUS)
    errors: dict[str, list[str]] = {}
    if request == "whole":
        if not gpus or gpus < 1:
            errors["gpus"] = [whole]
        if milli is not None:
            errors["gpu_milli"] = [whole]
    elif request == "share":
        if milli is None:
            errors["gpu_milli"] = [GPU_REQUEST_RULES["share"]]
        if gpus:
            errors["gpus"] = [GPU_REQUEST_RULES["share"]]
    elif gpus or milli is not None:
        errors["gpu_request"] = [GPU_REQUEST_RULES["cpu"]]
    return errors


def check_submission(*, user: Any, data: Any, cluster: bool = False) -> CheckedSubmission:
    """Every problem with the submission ``data`` (the JSON body of ``POST /api/v1/jobs/``) for
    ``user``, or the validated parts. Raises PermissionDenied only where job_submit would (a viewer).

    ``cluster``: also what needs the cluster (services.cluster_problems), as a dry run must. The API's
    submit asks for it too and then stores with services.job_submit_checked, so every check runs once;
    a caller that submits with job_submit leaves it out (job_submit asks the backend itself)."""
    if not isinstance(data, Mapping):
        return CheckedSubmission(errors={"non_field_errors": ["Send a JSON object of job fields."]})
    data = with_workspace_defaults(data)
    known = INPUT_FIELD_NAMES
    errors: dict[str, list[str]] = {}
    for key in sorted(str(k) for k in data if k not in known)[:20]:
        _add(errors, key[:100], "Unknown field.")
    shapes = JobCreateInput(data={k: v for k, v in data.items() if k in known})
    values: dict[str, Any] = {}
    if shapes.is_valid():
        values = dict(shapes.validated_data)
    else:
        for name, detail in shapes.errors.items():
            _add(errors, name, _flatten(detail))
        # The fields that passed still go through the spec's rules, so every error shows at once.
        passed = {k: v for k, v in data.items() if k in known and k not in shapes.errors}
        partial = JobCreateInput(data=passed, partial=True)
        partial.is_valid()
        values = dict(getattr(partial, "validated_data", {}) or {})
    team_ref = values.pop("team", None)
    image_ref = values.pop("image", None)
    gpu_request = values.pop("gpu_request", None)
    spec_fields = {k: v for k, v in values.items() if k in JobSpec.field_names()}
    spec = JobSpec(**spec_fields)
    for name, messages in validate_job_spec(spec).items():
        if name not in errors:
            _add(errors, name, messages)
    if gpu_request:
        for name, messages in _gpu_request_errors(gpu_request, spec_fields).items():
            if name not in errors:
                _add(errors, name, messages)
    raw_gpus = data.get("gpus")
    if (
        gpu_request == "whole"
        and isinstance(raw_gpus, int | float)
        and not isinstance(raw_gpus, bool)
        and raw_gpus < 1
    ):
        # "Must be between 0 and 64" would invite a 0, which is not a whole-GPU job.
        errors["gpus"] = [GPU_REQUEST_RULES["whole"].format(max=MAX_GPUS)]

    team: Team | None = None
    if "team" not in errors:
        try:
            team = services.resolve_team(user=user, team=team_ref)
        except ValidationError as exc:
            for name, messages in exc.message_dict.items():
                _add(errors, name, messages)
    image: JobImage | None = None
    if "image" not in errors and image_ref is not None:
        image = resolve_image(image_ref)
        if image is None:
            _add(errors, "image", "Unknown image; see GET /api/v1/images/ for the catalog.")
        elif not image.is_active:
            _add(errors, "image", f"Image {image.reference} is retired; choose an active image.")
    if not errors and cluster and image is not None and team is not None:
        for name, messages in services.cluster_problems(spec=spec, image=image, team=team, user=user).items():
            _add(errors, name, messages)
    if errors:
        return CheckedSubmission(errors=errors)
    return CheckedSubmission(spec=spec, team=team, image=image)
