from django.urls import path

from . import acceptance_views

app_name = "acceptance"
urlpatterns = [
    path("", acceptance_views.checklist, name="checklist"),
]
