from django.urls import path

from .views import AuditRecordList

urlpatterns = [path("audit/", AuditRecordList.as_view(), name="audit-list")]
