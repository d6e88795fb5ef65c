"""``POST /api/v1/agent/solo-profiles/``: node agents send a solo run's NVML samples (issue 21).

The node agent (``scheduler.agent``; client ``scheduler.agent.publish.post_solo_profile``) samples a
job running alone on one GPU and posts the samples here; ``jobs.profiling_services.solo_profile_record``
turns them into the ``SoloProfile`` the scheduler and the co-location measurements read.

Who may post: a node agent, not a user. It authenticates with ``Authorization: Bearer
<NODE_AGENT_TOKEN>`` (the setting, shared with the node-agent DaemonSet as a Secret); a user's API
token or session is refused, and with the setting empty every post is refused. A node token is one
secret for the whole fleet: it can write profiles and nothing else.

Input errors are 400 in the one error shape with field messages (unknown fields, a non-finite
number, a utilisation outside 0-100, no sample left after the warm-up).
"""

from __future__ import annotations

import hmac
import math
from typing import Any

from django.conf import settings
from django.db import IntegrityError
from drf_spectacular.utils import extend_schema
from rest_framework import authentication, exceptions, serializers, status
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api import StrictInputMixin
from jobs.models import SoloProfile
from jobs.profiling_services import solo_profile_record

MAX_SAMPLES = 20_000


class NodeAgent:
    """The principal a valid node token authenticates (``request.auth``); it is no user."""

    is_authenticated = True


class NodeAgentAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <NODE_AGENT_TOKEN>``, compared in constant time."""

    def authenticate(self, request: Any) -> tuple[Any, NodeAgent] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != b"bearer":
            return None
        expected = str(getattr(settings, "NODE_AGENT_TOKEN", "")).encode()
        if len(header) != 2 or not expected or not hmac.compare_digest(header[1], expected):
            raise exceptions.AuthenticationFailed("Invalid node agent token.")
        agent = NodeAgent()
        return agent, agent

    def authenticate_header(self, request: Any) -> str:
        return "Bearer"


class IsNodeAgent(BasePermission):
    def has_permission(self, request: Any, view: Any) -> bool:
        return isinstance(request.auth, NodeAgent)


class FiniteFloatField(serializers.FloatField):
    def to_internal_value(self, data: Any) -> float:
        value = float(super().to_internal_value(data))
        if not math.isfinite(value):
            raise serializers.ValidationError("A finite number is required.")
        return value


class SampleInput(StrictInputMixin, serializers.Serializer):
    t = FiniteFloatField(min_value=0, help_text="Seconds since the solo run started")
    gpu_util = FiniteFloatField(min_value=0, max_value=100, help_text="SM utilisation, %")
    mem_util = FiniteFloatField(min_value=0, max_value=100, help_text="Memory-controller utilisation, %")
    memory_mib = FiniteFloatField(min_value=0, help_text="GPU memory the job held, MiB")
    throughput = FiniteFloatField(min_value=0, required=False, allow_null=True)


class SoloProfileInput(StrictInputMixin, serializers.Serializer):
    image = serializers.CharField(max_length=512)
    command = serializers.CharField(max_length=8192, help_text="The job's command line, shell-quoted")
    gpu_model = serializers.CharField(max_length=128)
    samples = SampleInput(many=True, allow_empty=False, max_length=MAX_SAMPLES)
    warmup_s = FiniteFloatField(min_value=0, default=10.0)
    batch_size = FiniteFloatField(min_value=0, required=False)
    amp = serializers.BooleanField(required=False)
    model_family = serializers.CharField(max_length=128, required=False, allow_blank=True)


class SoloProfileOutput(serializers.ModelSerializer):
    class Meta:
        model = SoloProfile
        fields = [
            "image",
            "command",
            "gpu_model",
            "samples",
            "gpu_util",
            "mem_util",
            "gpu_memory_mib",
            "solo_throughput",
            "measured_at",
        ]


class SoloProfileView(APIView):
    """Record a node agent's solo-run samples as the configuration's solo profile."""

    authentication_classes = [NodeAgentAuthentication]
    permission_classes = [IsNodeAgent]
    throttle_classes: list[Any] = []  # one fleet-wide principal: a per-user write limit would starve it

    # Left out of the users' API schema: only node agents hold the token (docs/interference.md).
    @extend_schema(exclude=True)
    def post(self, request: Request) -> Response:
        data = SoloProfileInput(data=request.data)
        data.is_valid(raise_exception=True)
        fields: dict[str, Any] = dict(data.validated_data)
        try:
            row = self._record(fields)
        except ValueError as exc:  # no sample after the warm-up
            raise serializers.ValidationError({"samples": [str(exc)]}) from None
        return Response(SoloProfileOutput(row).data, status=status.HTTP_201_CREATED)

    @staticmethod
    def _record(fields: dict[str, Any]) -> SoloProfile:
        try:
            return solo_profile_record(**fields)
        except IntegrityError:
            # Two first recordings of one configuration at once: the other created the row, so this
            # one now merges into it (solo_profile_record's contract).
            return solo_profile_record(**fields)
