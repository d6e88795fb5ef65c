"""Routes of the jobs API and the cluster view (mounted under /api/v1/). The trailing slash is
optional, so ``curl -X POST .../api/v1/jobs`` works as well as ``.../jobs/``."""

from django.urls import re_path

from config.routers import OptionalSlashRouter
from jobs.agent_api import SoloProfileView
from jobs.api import ClusterView, JobViewSet

router = OptionalSlashRouter()
router.register("jobs", JobViewSet, basename="job")

urlpatterns: list = [
    re_path(r"^cluster/?$", ClusterView.as_view(), name="cluster"),
    re_path(r"^agent/solo-profiles/?$", SoloProfileView.as_view(), name="agent-solo-profiles"),
    *router.urls,
]
