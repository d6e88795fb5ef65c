"""REST views of jobs and the cluster. Thin: parse input, call one selector or service, shape output.

Every job query goes through jobs.selectors.jobs_for_user, so a job of another team is a 404; what a
member may change is decided by jobs.services (viewers get 403).
"""

from __future__ import annotations

from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api import ErrorSerializer
from jobs import log_stream, selectors, services, specs, validation
from jobs.filters import JobFilter
from jobs.models import Job
from jobs.representation import KNOWN_KEY
from jobs.serializers import (
    JobCreateInput,
    JobDetailOutput,
    JobEventOutput,
    JobLogsOutput,
    JobOutput,
    JobValidateOutput,
    LogsQuery,
)

# ``since`` as log_stream.parse_offsets reads it: task indexes 0-64, offsets of at most 15 digits.
_TASK = "(" + "|".join(str(i) for i in range(specs.MAX_REPLICAS, -1, -1)) + ")"
# (Blank is accepted: the start.)
_SINCE = rf"^([0-9]{{1,15}}|{_TASK}:[0-9]{{1,15}}(,{_TASK}:[0-9]{{1,15}})*)?$"


# What the answer for a job this request has just queued can say without reading it back: no cycle
# has seen it, so it has no tasks, has never been preempted (its events are the three its submit
# wrote) and holds no quota to borrow (quota is taken at admission). Saves three reads per submit.
def _just_queued() -> dict[str, Any]:
    return {"tasks": [], "preemption_history": [], "borrowed_gpu_milli": 0}  # fresh lists per answer


ERRORS = {400: ErrorSerializer, 401: ErrorSerializer, 403: ErrorSerializer, 404: ErrorSerializer}


@extend_schema_view(
    list=extend_schema(summary="Jobs of your teams", responses={200: JobOutput, 401: ErrorSerializer}),
    retrieve=extend_schema(
        summary="One job with its tasks and placements", responses={200: JobDetailOutput, **ERRORS}
    ),
)
class JobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    filterset_class = JobFilter
    lookup_value_regex = "[0-9]+"
    ordering_fields = ["created_at", "submitted_at", "finished_at", "priority", "status", "name", "id"]
    ordering = ["-created_at", "-id"]
    serializer_class = JobOutput

    def get_queryset(self) -> Any:
        queryset = selectors.jobs_for_user(user=self.request.user)
        if self.action == "retrieve":
            queryset = queryset.prefetch_related("tasks")
        elif self.action == "list":
            queryset = selectors.listed_columns(queryset)
        return queryset

    def get_object(self) -> Job:
        job = selectors.job_for_user(user=self.request.user, job_id=self.kwargs["pk"])
        self.check_object_permissions(self.request, job)
        return job

    def get_serializer_class(self) -> Any:
        return JobDetailOutput if self.action == "retrieve" else JobOutput

    def _output(
        self, job: Job, *, detail: bool = True, code: int = 200, just_queued: bool = False
    ) -> Response:
        """The answer for one job; ``just_queued``: this request has just queued it (_just_queued)."""
        serializer_class = JobDetailOutput if detail else JobOutput
        position = selectors.queue_position(job.pk)  # one COUNT, not a walk of the queue
        context = {
            "request": self.request,
            "queue_positions": {} if position is None else {job.pk: position},
            **selectors.queue_cache_context(etas=job.status == "QUEUED"),
        }
        if just_queued and job.status == "QUEUED":
            context[KNOWN_KEY] = _just_queued()
        return Response(serializer_class(job, context=context).data, status=code)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        assert page is not None  # pagination is always on (settings.REST_FRAMEWORK)
        queued = [job.pk for job in page if job.status == "QUEUED"]
        positions = selectors.queue_positions(queued)
        context = {
            "request": request,
            "queue_positions": positions,
            **selectors.queue_cache_context(etas=bool(queued)),
        }
        data = JobOutput(page, many=True, context=context).data
        return self.get_paginated_response(data)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self._output(self.get_object())

    @extend_schema(
        summary="Submit a job",
        request=JobCreateInput,
        responses={201: JobDetailOutput, 409: ErrorSerializer, **ERRORS},
    )
    def create(self, request: Request) -> Response:
        # One pass of every check (the cluster's included), then the job is stored without a second.
        checked = validation.check_submission(user=request.user, data=request.data, cluster=True)
        if not checked.ok:
            raise ValidationError(checked.errors)
        assert checked.spec is not None and checked.image is not None and checked.team is not None
        job = services.job_submit_checked(
            user=request.user, spec=checked.spec, image=checked.image, team=checked.team
        )
        return self._output(job, code=status.HTTP_201_CREATED, just_queued=True)

    @extend_schema(
        summary="Check a job without submitting it",
        description="The same checks as submitting (every field error at once, in the one error shape); "
        "nothing is stored. 200 answers the normalised spec: defaults filled in, a command string split "
        "into words, the team's slug and the image's reference.",
        request=JobCreateInput,
        responses={200: JobValidateOutput, **ERRORS},
    )
    @action(detail=False, methods=["post"], pagination_class=None, filter_backends=[])
    def validate(self, request: Request) -> Response:
        checked = validation.check_submission(user=request.user, data=request.data, cluster=True)
        if not checked.ok:
            raise ValidationError(checked.errors)
        return Response({"spec": checked.normalised()})

    @extend_schema(
        summary="Cancel a job",
        description="Queued jobs stop at once; admitted or running jobs go to STOPPING while their tasks "
        "are deleted. Cancelling a stopping or stopped job changes nothing; a finished job is a 409.",
        request=None,
        responses={200: JobDetailOutput, 409: ErrorSerializer, **ERRORS},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        job = services.job_cancel(job=self.get_object(), user=request.user)
        return self._output(job)

    @extend_schema(
        summary="Submit a copy of a job",
        request=None,
        responses={201: JobDetailOutput, 409: ErrorSerializer, **ERRORS},
    )
    @action(detail=True, methods=["post"])
    def clone(self, request: Request, pk: str | None = None) -> Response:
        job = services.job_clone(job=self.get_object(), user=request.user)
        return self._output(job, code=status.HTTP_201_CREATED, just_queued=True)

    @extend_schema(
        summary="Every state change of a job", responses={200: JobEventOutput(many=True), **ERRORS}
    )
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def events(self, request: Request, pk: str | None = None) -> Response:
        events = selectors.job_events(job=self.get_object())
        return Response(JobEventOutput(events, many=True).data)

    @extend_schema(
        summary="Output of a job's tasks",
        description="With `follow=1` the answer is a stream of server-sent events (`log`, then `end` "
        "when the job ends, or `timeout` when the request reached its time bound: reconnect with "
        "`since`); see jobs/log_stream.py. Without it, `since` cuts what each task already sent.",
        parameters=[
            # Bounds as log_stream.LogsFollowQuery checks them, so the schema says what is accepted.
            OpenApiParameter(
                "task",
                {"type": "integer", "minimum": 0, "maximum": specs.MAX_REPLICAS},
                description="Only this task index.",
            ),
            OpenApiParameter(
                "since",
                {"type": "string", "maxLength": 8 * (specs.MAX_REPLICAS + 1) * 2, "pattern": _SINCE},
                description="Characters already received: one offset, or index:offset pairs (0:120,1:40).",
            ),
            OpenApiParameter(
                "follow", OpenApiTypes.BOOL, description="Stream new output until the job ends."
            ),
        ],
        responses={
            (200, "application/json"): JobLogsOutput,
            (200, "text/event-stream"): log_stream.EVENT_SCHEMA,
            503: ErrorSerializer,
            **ERRORS,
        },
    )
    @action(
        detail=True,
        methods=["get"],
        pagination_class=None,
        filter_backends=[],
        renderer_classes=log_stream.RENDERERS,
    )
    def logs(self, request: Request, pk: str | None = None) -> Response | StreamingHttpResponse:
        job = self.get_object()
        query = LogsQuery(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        task_index = query.validated_data.get("task")
        params = request.query_params.dict()
        # EventSource resumes through Last-Event-ID, the offsets of the last event it received. It
        # reconnects to the same URL, so the header, sent only on a reconnect, is newer than `since`.
        if request.headers.get("Last-Event-ID"):
            params["since"] = request.headers["Last-Event-ID"]
        follow = log_stream.LogsFollowQuery(data=params)
        follow.is_valid(raise_exception=True)
        since = follow.validated_data.get("since") or {}  # a blank since is validated as ""
        if follow.validated_data["follow"]:
            events = log_stream.follow_events(
                job=job,
                task_index=task_index,
                since=since,
                read_logs=lambda j, i: selectors.job_logs(job=j, task_index=i),
            )
            response = StreamingHttpResponse(events, content_type="text/event-stream; charset=utf-8")
            response["Cache-Control"] = "no-cache"
            response["X-Accel-Buffering"] = "no"  # nginx would otherwise hold the events back
            return response
        tasks = selectors.job_logs(job=job, task_index=task_index)
        return Response({"job": job.pk, "tasks": log_stream.slice_logs(tasks, since)})


class ClusterView(APIView):
    """``GET /api/v1/cluster/``: nodes and GPUs with per-GPU allocation, from the cluster backend."""

    @extend_schema(
        summary="Nodes, GPUs and what runs on each GPU",
        responses={200: OpenApiTypes.OBJECT, 401: ErrorSerializer, 503: ErrorSerializer},
    )
    def get(self, request: Request) -> Response:
        return Response(selectors.cluster_for_user(user=request.user))
