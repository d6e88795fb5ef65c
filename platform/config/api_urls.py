"""Routes of REST API v1. Each app contributes its own urls module; trailing slashes are optional."""

from django.urls import include, re_path

from config.health import HealthView
from config.routers import OptionalSlashRouter
from images.api import ImageViewSet

images = OptionalSlashRouter()
images.register("images", ImageViewSet, basename="image")

urlpatterns: list = [
    re_path(r"^health/?$", HealthView.as_view(), name="health"),
    re_path(r"", include("accounts.api_urls")),
    re_path(r"", include("quotas.api_urls")),
    re_path(r"", include("jobs.api_urls")),
    re_path(r"", include("observability.api_urls")),
    *images.urls,
]
