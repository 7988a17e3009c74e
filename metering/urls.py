from django.urls import path

from . import views

app_name = "metering"
urlpatterns = [
    path("", views.report_index, name="index"),
    path("operations/", views.operations_dashboard, name="operations"),
    path("<str:month>/", views.monthly_report, name="platform-report"),
    path("<str:month>/csv/<slug:table>/", views.report_csv, name="platform-csv"),
    path("<str:month>/regenerate/", views.report_regenerate, name="platform-regenerate"),
    path("<str:month>/<slug:tenant>/", views.monthly_report, name="tenant-report"),
    path("<str:month>/<slug:tenant>/csv/<slug:table>/", views.report_csv, name="tenant-csv"),
    path("<str:month>/<slug:tenant>/regenerate/", views.report_regenerate, name="tenant-regenerate"),
]
