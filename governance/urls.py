from django.urls import path

from governance import views

app_name = "governance"
urlpatterns = [
    path("requests/", views.request_list, name="request-list"),
    path("requests/new/", views.request_new, name="request-new"),
    path("requests/<int:pk>/", views.request_detail, name="request-detail"),
    path("requests/<int:pk>/decide/", views.request_decide, name="request-decide"),
    path("reservations/", views.reservations_calendar, name="calendar"),
    path("notifications/", views.notifications, name="notifications"),
]
