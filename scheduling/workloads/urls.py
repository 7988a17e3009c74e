"""The workload origin's only addresses (``scheduling.workloads.origin`` routes its requests here): notebooks,
services and the named ports of running jobs, at the same paths as on the portal's origin. Nothing else of the
portal answers on this origin, and its errors are plain JSON, without the portal's layout."""

from django.urls import path

from scheduling.workloads import views as workload_views

urlpatterns = [
    path("jobs/<int:pk>/open/<path:path>", workload_views.workload_notebook),
    path("jobs/<int:pk>/open/", workload_views.workload_notebook),
    path("services/<int:pk>/endpoint/<path:path>", workload_views.workload_service),
    path("services/<int:pk>/endpoint/", workload_views.workload_service),
    path("jobs/<int:pk>/ports/<slug:name>/<path:path>", workload_views.workload_port),
    path("jobs/<int:pk>/ports/<slug:name>/", workload_views.workload_port),
]

handler400 = workload_views.workload_bad_request
handler403 = workload_views.workload_forbidden
handler404 = workload_views.workload_not_found
handler500 = workload_views.workload_server_error
