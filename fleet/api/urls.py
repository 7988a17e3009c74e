from django.urls import path
from rest_framework.routers import DefaultRouter

from fleet.api.views import AgentRegistrationView, NodeViewSet

router = DefaultRouter()
router.register("nodes", NodeViewSet, basename="node")

urlpatterns = [
    path("agents/register/", AgentRegistrationView.as_view(), name="agent-register"),
    *router.urls,
]
