from django.urls import path

from scheduling.jobs import views
from scheduling.templates import views as template_views
from scheduling.workloads import views as workload_views

app_name = "scheduling"
urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("jobs/", views.job_list, name="job-list"),
    path("jobs/rows/", views.job_list_rows, name="job-list-rows"),
    path("jobs/new/", views.job_submit, name="job-submit"),
    path("jobs/<int:pk>/", views.job_detail, name="job-detail"),
    path("jobs/<int:pk>/cancel/", views.job_cancel, name="job-cancel"),
    path("jobs/<int:pk>/hold/", views.job_hold, {"hold": True}, name="job-hold"),
    path("jobs/<int:pk>/release/", views.job_hold, {"hold": False}, name="job-release"),
    path("jobs/<int:pk>/clear-avoidance/", views.job_clear_avoidance, name="job-clear-avoidance"),
    path("queue/", views.queue, name="queue"),
    path("templates/", template_views.template_list, name="template-list"),
    path("templates/new/", template_views.template_create, name="template-new"),
    path("templates/<int:pk>/", template_views.template_detail, name="template-detail"),
    path("templates/<int:pk>/versions/new/", template_views.template_version_new, name="template-version-new"),
    path("templates/<int:pk>/archive/", template_views.template_archive, name="template-archive"),
    path("jobs/<int:pk>/open/<path:path>", workload_views.notebook_open, name="notebook-open"),
    path("jobs/<int:pk>/open/", workload_views.notebook_open, name="notebook-open-root"),
    path("jobs/<int:pk>/open-auth/", workload_views.notebook_auth, name="notebook-auth"),
    path("jobs/<int:pk>/ports/<slug:name>/<path:path>", workload_views.port_open, name="port-open"),
    path("jobs/<int:pk>/ports/<slug:name>/", workload_views.port_open, name="port-open-root"),
    path("services/<int:pk>/", workload_views.service_detail, name="service-detail"),
    path("services/<int:pk>/endpoint/<path:path>", workload_views.service_endpoint, name="service-endpoint"),
    path("services/<int:pk>/endpoint/", workload_views.service_endpoint, name="service-endpoint-root"),
    path("services/<int:pk>/auth/", workload_views.service_auth, name="service-auth"),
    path("services/<int:pk>/<str:action>/", workload_views.service_action, name="service-action"),
    path("arrays/<int:pk>/", workload_views.array_detail, name="array-detail"),
    path("arrays/<int:pk>/cancel/", workload_views.array_cancel, name="array-cancel"),
]
