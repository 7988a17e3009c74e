from django.urls import path

from fleet import views

app_name = "fleet"
urlpatterns = [
    path("cluster/", views.cluster_overview, name="cluster"),
    path("inventory/", views.inventory, name="inventory"),
    path("inventory/nodes/<str:name>/", views.node_detail, name="node-detail"),
    path("inventory/nodes/<str:name>/action/", views.node_action, name="node-action"),
]
