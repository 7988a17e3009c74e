from django.urls import path

from . import views

app_name = "scheduling"
urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("jobs/", views.job_list, name="job-list"),
    path("jobs/new/", views.job_submit, name="job-submit"),
    path("jobs/<int:pk>/", views.job_detail, name="job-detail"),
    path("jobs/<int:pk>/cancel/", views.job_cancel, name="job-cancel"),
    path("jobs/<int:pk>/hold/", views.job_hold, {"hold": True}, name="job-hold"),
    path("jobs/<int:pk>/release/", views.job_hold, {"hold": False}, name="job-release"),
    path("queue/", views.queue, name="queue"),
]
