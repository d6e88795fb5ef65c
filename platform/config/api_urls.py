"""Routes of REST API v1. Each app contributes its own urls module."""

from django.urls import include, path

urlpatterns: list = [
    path("", include("jobs.api_urls")),
]
