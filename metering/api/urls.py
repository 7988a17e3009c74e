from django.urls import path

from metering.api.views import GpuPriceView, MonthlyReportView, WhatIfDetailView, WhatIfListView

urlpatterns = [
    path("reports/monthly/<str:month>/", MonthlyReportView.as_view(), name="monthly-report"),
    path("prices/", GpuPriceView.as_view(), name="gpu-prices"),
    path("what-if/", WhatIfListView.as_view(), name="what-if-list"),
    path("what-if/<int:pk>/", WhatIfDetailView.as_view(), name="what-if-detail"),
]
