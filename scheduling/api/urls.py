from django.urls import path
from rest_framework.routers import DefaultRouter

from scheduling.api.batch import JobBatchView
from scheduling.api.efficiency import JobEfficiencyView
from scheduling.api.exports import JobExportView
from scheduling.api.logs import JobLogView
from scheduling.api.templates import JobCloneView, TemplateViewSet
from scheduling.api.views import FairShareView, JobReportView, JobViewSet, QueueView, QuotaUsageView, TaskTypeViewSet
from scheduling.api.workloads import (
    ArrayCancelView,
    ArrayView,
    ServiceRolloutView,
    ServiceScaleView,
    ServiceStopView,
    ServiceView,
)

router = DefaultRouter()
router.register("jobs", JobViewSet, basename="job")
router.register("task-types", TaskTypeViewSet, basename="tasktype")
router.register("templates", TemplateViewSet, basename="template")

urlpatterns = [
    path("quotas/", QuotaUsageView.as_view(), name="quota-usage"),
    path("jobs/batch/", JobBatchView.as_view(), name="job-batch"),
    path("jobs/export/", JobExportView.as_view(), name="job-export"),
    path("jobs/<int:pk>/report/", JobReportView.as_view(), name="job-report"),
    path("jobs/<int:pk>/log/", JobLogView.as_view(), name="job-log"),
    path("jobs/<int:pk>/efficiency/", JobEfficiencyView.as_view(), name="job-efficiency"),
    path("jobs/<int:pk>/clone/", JobCloneView.as_view(), name="job-clone"),
    path("queue/", QueueView.as_view(), name="queue"),
    path("services/<int:pk>/", ServiceView.as_view(), name="service"),
    path("services/<int:pk>/scale/", ServiceScaleView.as_view(), name="service-scale"),
    path("services/<int:pk>/rollout/", ServiceRolloutView.as_view(), name="service-rollout"),
    path("services/<int:pk>/stop/", ServiceStopView.as_view(), name="service-stop"),
    path("arrays/<int:pk>/", ArrayView.as_view(), name="array"),
    path("arrays/<int:pk>/cancel/", ArrayCancelView.as_view(), name="array-cancel"),
    path("fair-share/", FairShareView.as_view(), name="fair-share"),
    *router.urls,
]
