from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.authtoken.views import obtain_auth_token

from metering.metrics import metrics

urlpatterns = [
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("i18n/", include("django.conf.urls.i18n")),
    path("api/auth/token/", obtain_auth_token, name="api-token"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/", include("scheduling.api.urls")),
    path("api/", include("fleet.api.urls")),
    path("api/", include("metering.api.urls")),
    path("api/", include("audit.api.urls")),
    path("api/", include("governance.api.urls")),
    path("", include("governance.urls")),
    path("audit/", include("audit.urls")),
    path("metrics", metrics, name="metrics"),
    path("reports/", include("metering.urls")),
    path("", include("fleet.urls")),
    path("", include("scheduling.urls")),
]
