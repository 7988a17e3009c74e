from django.urls import path

from metering.acceptance import views as acceptance_views

app_name = "acceptance"
urlpatterns = [
    path("", acceptance_views.checklist, name="checklist"),
    path("notes/", acceptance_views.note_add, name="note-add"),
    path("notes/<int:pk>/screenshot/", acceptance_views.screenshot, name="screenshot"),
]
