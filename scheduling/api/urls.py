from django.urls import path
from rest_framework.routers import DefaultRouter

from .views import JobViewSet, QuotaUsageView, TaskTypeViewSet

router = DefaultRouter()
router.register("jobs", JobViewSet, basename="job")
router.register("task-types", TaskTypeViewSet, basename="tasktype")

urlpatterns = [path("quotas/", QuotaUsageView.as_view(), name="quota-usage"), *router.urls]
