"""Root URLs: admin, the OpenAPI schema and Swagger UI, REST API v1, and the browser portal."""

from importlib.util import find_spec

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/v1/", include("config.api_urls")),
]

# The portal's pages are another part of the tree; mount them once they exist.
if find_spec("frontend.urls") is not None:
    urlpatterns.append(path("", include("frontend.urls")))
