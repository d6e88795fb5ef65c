"""The read-only image catalog API: every signed-in user may list and read images."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import viewsets

from config.api import ErrorSerializer
from images.models import JobImage
from images.serializers import ImageOutput


@extend_schema_view(
    list=extend_schema(summary="Job images (active ones; ?all=true includes retired)"),
    retrieve=extend_schema(summary="One job image", responses={200: ImageOutput, 404: ErrorSerializer}),
)
class ImageViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = ImageOutput
    lookup_value_regex = "[0-9]+"
    filterset_fields = ["framework", "is_active"]
    ordering_fields = ["name", "tag", "created_at"]
    ordering = ["name", "tag"]

    def get_queryset(self) -> Any:
        queryset = JobImage.objects.all()
        if self.action == "list" and "is_active" not in self.request.query_params:
            queryset = queryset.filter(is_active=True)
        return queryset
