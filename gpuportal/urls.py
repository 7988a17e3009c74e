from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.utils.functional import lazy
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from metering.metrics import metrics

# Error pages inside the site's layout: Django's own 403 and 404 handlers render
# templates/403.html and 404.html; the 500 page renders without the database (gpuportal/views.py).
handler500 = "gpuportal.views.server_error"

urlpatterns = [
    # Browsers that ignore base.html's <link rel="icon"> ask for /favicon.ico: send them to the SVG (not a
    # permanent redirect, so that a later hashed static URL is followed). Resolved at the first request: in
    # production the hashed name comes from collectstatic's manifest, which `check --deploy` runs without.
    path("favicon.ico", RedirectView.as_view(url=lazy(static, str)("favicon.svg"), permanent=False), name="favicon"),
    # Directory sign-in: its login and logout pages come before Django's at the same addresses;
    # OpenID Connect (oidc/) and the group mapping page (directory/groups/).
    path("", include("directory.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("i18n/", include("django.conf.urls.i18n")),
    # Sign-in and API tokens: the token endpoint, the token API and the token page.
    path("api/", include("accounts.api.urls")),  # POST auth/token/, tokens/
    path("account/", include("accounts.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its start-up script as a file: the Content-Security-Policy refuses inline scripts.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/", include("scheduling.api.urls")),
    path("api/", include("fleet.api.urls")),
    path("api/", include("metering.api.urls")),
    path("api/", include("audit.api.urls")),
    path("api/", include("governance.api.urls")),
    path("", include("governance.urls")),
    path("audit/", include("audit.urls")),
    path("metrics", metrics, name="metrics"),
    path("reports/", include("metering.urls")),
    path("acceptance/", include("metering.acceptance.urls")),
    path("", include("fleet.urls")),
    path("", include("scheduling.urls")),
]
