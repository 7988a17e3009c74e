from django.urls import path
from rest_framework.routers import SimpleRouter

from accounts.api.views import ApiTokenViewSet, ObtainTokenView

router = SimpleRouter()
router.register("tokens", ApiTokenViewSet, basename="api-tokens")

urlpatterns = [
    path("auth/token/", ObtainTokenView.as_view(), name="api-token"),
    *router.urls,
]
