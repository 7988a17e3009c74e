from django.urls import path

from metering.improvements import views as improvement_views
from metering.reports import views
from metering.review import views as review_views
from metering.whatif import views as whatif_views

app_name = "metering"
urlpatterns = [
    path("", views.report_index, name="index"),
    path("operations/", views.operations_dashboard, name="operations"),
    path("actions/", improvement_views.action_list, name="action-list"),
    path("actions/new/", improvement_views.action_create, name="action-create"),
    path("actions/<int:pk>/", improvement_views.action_edit, name="action-edit"),
    path("what-if/", whatif_views.what_if_index, name="what-if"),
    path("what-if/<int:pk>/", whatif_views.what_if_detail, name="what-if-detail"),
    path("<str:month>/pack.<str:fmt>", review_views.review_pack, name="platform-pack"),
    path("<str:month>/<slug:tenant>/pack.<str:fmt>", review_views.review_pack, name="tenant-pack"),
    path("<str:month>/", views.monthly_report, name="platform-report"),
    path("<str:month>/csv/<slug:table>/", views.report_csv, name="platform-csv"),
    path("<str:month>/regenerate/", views.report_regenerate, name="platform-regenerate"),
    path("<str:month>/<slug:tenant>/", views.monthly_report, name="tenant-report"),
    path("<str:month>/<slug:tenant>/csv/<slug:table>/", views.report_csv, name="tenant-csv"),
    path("<str:month>/<slug:tenant>/regenerate/", views.report_regenerate, name="tenant-regenerate"),
]
