"""Included first by gpuportal/urls.py: the login and logout pages here take the place of Django's at the same
addresses (and names), which must stay un-namespaced ("login", "logout"); the rest is under "directory:"."""

from django.urls import include, path

from directory import views

directory_patterns = [
    path("oidc/authenticate/", views.OIDCSignInView.as_view(), name="oidc-sign-in"),
    path("oidc/callback/", views.OIDCCallbackView.as_view(), name="oidc-callback"),
    path("directory/groups/", views.group_mappings, name="groups"),
    path("directory/groups/<int:pk>/remove/", views.remove_group_mapping, name="group-remove"),
]

urlpatterns = [
    path("accounts/login/", views.SignInView.as_view(), name="login"),
    path("accounts/logout/", views.SignOutView.as_view(), name="logout"),
    path("", include((directory_patterns, "directory"))),
]
