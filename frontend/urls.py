"""The portal's pages, mounted at the site root by config.urls."""

from django.contrib.auth import views as auth_views
from django.urls import path

from accounts.views import login_throttled
from frontend import views
from frontend import workspaces as workspace_pages

app_name = "frontend"

urlpatterns = [
    path(
        "login/",
        login_throttled(
            auth_views.LoginView.as_view(
                template_name="frontend/login.html", redirect_authenticated_user=True
            ),
            template_name="frontend/login.html",
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", views.dashboard, name="dashboard"),
    path("jobs/", views.job_list, name="jobs"),
    path("jobs/new/", views.job_submit, name="submit"),
    path("jobs/<int:job_id>/", views.job_detail, name="job"),
    path("jobs/<int:job_id>/spec.yaml", views.job_spec_yaml, name="job-spec-yaml"),
    path("workspaces/new/", workspace_pages.workspace_new, name="workspace-new"),
    path("jobs/<int:job_id>/tensorboard/", workspace_pages.tensorboard_new, name="tensorboard"),
    path("teams/", views.team_index, name="teams"),
    path("teams/<int:team_id>/", views.team_detail, name="team"),
    path("images/", views.image_list, name="images"),
    path("usage/", views.usage_index, name="usage"),
    path("teams/<int:team_id>/usage/", views.team_usage, name="team-usage"),
    path("nodes/", views.node_list, name="nodes"),
    path("tokens/", views.token_list, name="tokens"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke_view, name="token-revoke"),
    path("jobs/<int:job_id>/logs.txt", views.job_logs_download, name="job-logs"),
    path("portal/jobs/usage", views.jobs_usage, name="jobs-usage"),
    path("portal/jobs/cancel", views.jobs_bulk_cancel, name="jobs-cancel"),
    path("portal/summary", views.summary, name="summary"),
    path("portal/yaml/parse", views.yaml_parse, name="yaml-parse"),
    path("portal/yaml/dump", views.yaml_dump, name="yaml-dump"),
    path("vendor/<str:name>", views.vendor_uplot, name="uplot"),
    path("favicon.ico", views.favicon, name="favicon"),
]
