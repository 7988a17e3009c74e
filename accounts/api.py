"""Token endpoints of the REST API.

* ``POST /api/auth/token/`` (username, password; optional name, days): signs in and issues a named,
  expiring token. Failed sign-ins count towards the lockout like the login page's.
* ``GET/POST /api/tokens/``, ``GET/DELETE /api/tokens/{id}/``, ``POST /api/tokens/{id}/revoke/``: the
  caller's own tokens (session or token authentication).

Answers that carry a secret have ``Cache-Control: no-store``."""

from django.contrib.auth import authenticate
from django.utils.cache import add_never_cache_headers
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import exceptions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from . import tokens
from .models import ApiToken


class ApiTokenSerializer(serializers.ModelSerializer):
    state = serializers.CharField(read_only=True)

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at",
                  "revoked_reason", "state"]
        read_only_fields = fields


class NewTokenSerializer(ApiTokenSerializer):
    """The token as created: the only answer that ever contains ``token``, the secret."""

    token = serializers.CharField(read_only=True)

    class Meta(ApiTokenSerializer.Meta):
        fields = ["token", *ApiTokenSerializer.Meta.fields]
        read_only_fields = fields


def _created(token, secret) -> Response:
    token.token = secret
    response = Response(NewTokenSerializer(token).data, status=status.HTTP_201_CREATED)
    add_never_cache_headers(response)
    return response


NEW_TOKEN_REQUEST = inline_serializer("NewTokenRequest", {
    "name": serializers.CharField(), "days": serializers.IntegerField(required=False)})


class ApiTokenViewSet(viewsets.ReadOnlyModelViewSet):
    """The caller's API tokens, newest first; another user's token is 404."""

    serializer_class = ApiTokenSerializer
    pagination_class = None

    def get_queryset(self):
        return ApiToken.objects.filter(user=self.request.user)

    @extend_schema(request=NEW_TOKEN_REQUEST, responses={201: NewTokenSerializer})
    def create(self, request):
        name, days = tokens.clean_request(request.data)
        return _created(*tokens.issue(request.user, name, days))

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request, pk=None):
        tokens.revoke(self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses={200: ApiTokenSerializer})
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        token = self.get_object()
        tokens.revoke(token)
        return Response(ApiTokenSerializer(token).data)


class ObtainTokenView(APIView):
    """Username and password in, a new token out (``{"token": …}``, plus its name, prefix and expiry)."""

    permission_classes = [AllowAny]
    authentication_classes = []

    @extend_schema(request=inline_serializer("ObtainTokenRequest", {
        "username": serializers.CharField(), "password": serializers.CharField(),
        "name": serializers.CharField(required=False), "days": serializers.IntegerField(required=False)}),
        responses={200: NewTokenSerializer})
    def post(self, request):
        errors = {field: [_("This field is required.")] for field in ("username", "password")
                  if not isinstance(request.data.get(field), str) or not request.data.get(field)}
        if errors:
            raise exceptions.ValidationError(errors)
        name, days = tokens.clean_request({"name": request.data.get("name") or _("API sign-in"),
                                           "days": request.data.get("days")})
        # The Django request, not DRF's wrapper: axes marks a locked-out request on it for its middleware.
        user = authenticate(request._request, username=request.data["username"], password=request.data["password"])
        if user is None or not user.is_active:
            raise exceptions.ValidationError({"non_field_errors": [_("Unable to log in with these credentials.")]})
        response = _created(*tokens.issue(user, name, days))
        response.status_code = status.HTTP_200_OK
        return response
