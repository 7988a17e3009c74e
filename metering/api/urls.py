from django.urls import path

from metering.api.views import GpuPriceView, MonthlyReportView

urlpatterns = [
    path("reports/monthly/<str:month>/", MonthlyReportView.as_view(), name="monthly-report"),
    path("prices/", GpuPriceView.as_view(), name="gpu-prices"),
]
