import json

from django.contrib.auth.models import Group, User
from django.http import HttpResponse, HttpResponseForbidden
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt

from tests.directory.oidc_provider.settings import STATE


@csrf_exempt
def set_groups(request):
    """Test-only hook: the tests change a person's groups here, as a directory administrator would."""
    setup = json.loads((STATE / "setup.json").read_text())
    if request.method != "POST" or request.headers.get("X-Test-Secret") != setup["test_secret"]:
        return HttpResponseForbidden()
    body = json.loads(request.body)
    user = User.objects.get(username=body["username"])
    user.groups.set([Group.objects.get_or_create(name=name)[0] for name in body["groups"]])
    return HttpResponse("ok")


urlpatterns = [
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("test/groups/", set_groups),
]
