from django.urls import path
from rest_framework.routers import DefaultRouter

from governance.api.views import NotificationList, PriorityRequestViewSet

router = DefaultRouter()
router.register("priority-requests", PriorityRequestViewSet, basename="priority-request")

urlpatterns = [path("notifications/", NotificationList.as_view(), name="notifications"), *router.urls]
