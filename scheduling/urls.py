from django.urls import path

from . import views

app_name = "scheduling"
urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("jobs/", views.job_list, name="job-list"),
    path("jobs/new/", views.job_submit, name="job-submit"),
    path("jobs/<int:pk>/", views.job_detail, name="job-detail"),
    path("jobs/<int:pk>/cancel/", views.job_cancel, name="job-cancel"),
    path("cluster/", views.cluster_overview, name="cluster"),
    path("queue/", views.queue, name="queue"),
    path("inventory/", views.inventory, name="inventory"),
    path("inventory/nodes/<str:name>/", views.node_detail, name="node-detail"),
    path("inventory/nodes/<str:name>/action/", views.node_action, name="node-action"),
]
