"""Root URLs: admin, the OpenAPI schema and Swagger UI, REST API v1, and the browser portal.

Everything under /api/ answers in the API's one error shape, also for paths no route matches
(``config.api.api_not_found``) and for errors raised outside DRF views (the handlers below)."""

from importlib.util import find_spec

from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from accounts.views import login_throttled
from config.api import api_not_found
from observability.views import metrics_view

handler400 = "config.api.handler400"
handler403 = "config.api.handler403"
handler404 = "config.api.handler404"
handler500 = "config.api.handler500"

urlpatterns = [
    # Before admin.site.urls, so that the admin's login shares the API's lockout.
    path("admin/login/", login_throttled(admin.site.login), name="admin-login"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves its start-up script from a URL of its own: no inline script for the CSP.
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="schema", template_name="config/swagger_ui.html"),
        name="swagger-ui",
    ),
    path("metrics", metrics_view, name="metrics"),
    path("api/v1/", include("config.api_urls")),
    re_path(r"^api(?:/.*)?$", api_not_found),
]

# The portal's pages are another part of the tree; mount them once they exist.
if find_spec("frontend.urls") is not None:
    urlpatterns.append(path("", include("frontend.urls")))
