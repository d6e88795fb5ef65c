"""Routes of the quotas API (mounted under /api/v1/; trailing slashes optional)."""

from django.urls import re_path

from quotas.api import BudgetGrantView, QuotaDetailView, QuotaListView

urlpatterns: list = [
    re_path(r"^quotas/?$", QuotaListView.as_view(), name="quota-list"),
    re_path(r"^quotas/(?P<team_id>[0-9]+)/?$", QuotaDetailView.as_view(), name="quota-detail"),
    re_path(r"^quotas/(?P<team_id>[0-9]+)/grants/?$", BudgetGrantView.as_view(), name="quota-grant"),
]
