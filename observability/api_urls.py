"""Routes of the observability API (mounted under /api/v1/); trailing slashes are optional."""

from django.urls import re_path

from observability.api import ClusterHistoryView, UsageView

urlpatterns: list = [
    re_path(r"^cluster/history/?$", ClusterHistoryView.as_view(), name="cluster-history"),
    re_path(r"^usage/?$", UsageView.as_view(), name="usage"),
]
