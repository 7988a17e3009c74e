from django.urls import path
from rest_framework.routers import DefaultRouter

from .logs import JobLogView
from .views import FairShareView, JobReportView, JobViewSet, QueueView, QuotaUsageView, TaskTypeViewSet

router = DefaultRouter()
router.register("jobs", JobViewSet, basename="job")
router.register("task-types", TaskTypeViewSet, basename="tasktype")

urlpatterns = [
    path("quotas/", QuotaUsageView.as_view(), name="quota-usage"),
    path("jobs/<int:pk>/report/", JobReportView.as_view(), name="job-report"),
    path("jobs/<int:pk>/log/", JobLogView.as_view(), name="job-log"),
    path("queue/", QueueView.as_view(), name="queue"),
    path("fair-share/", FairShareView.as_view(), name="fair-share"),
    *router.urls,
]
