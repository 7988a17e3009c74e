"""Token endpoints of the REST API.

* ``POST /api/auth/token/`` (username, password; optional name, days): signs in and issues a named,
  expiring token. Failed sign-ins count towards the lockout like the login page's.
* ``GET/POST /api/tokens/``, ``GET/DELETE /api/tokens/{id}/``, ``POST /api/tokens/{id}/revoke/``: the
  caller's own tokens (session or token authentication). Revoking keeps the token listed as revoked; deleting
  revokes it and forgets it (a 404 afterwards).

Answers that carry a secret have ``Cache-Control: no-store``."""

from django.contrib.auth import authenticate
from django.utils.cache import add_never_cache_headers
from django.utils.translation import gettext as _
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import exceptions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import tokens
from accounts.authentication import ApiTokenAuthentication
from accounts.models import ApiToken
from gpuportal.web.api import RequestSerializer, TextPattern, text_field, whole_number_field


class TokenAuthenticationScheme(OpenApiAuthenticationExtension):
    """The schema's word for ``authentication.ApiTokenAuthentication``: a bearer token."""

    target_class = "accounts.authentication.ApiTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": (
            "An API token: Authorization: Bearer gpt_... (the keyword Token works too). Get one from "
            "POST /api/auth/token/ or the token page; it expires, and can be revoked.")}


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


class NewTokenRequestSerializer(RequestSerializer):
    """A token's name and lifetime; the longest lifetime is the ``API_TOKENS`` setting's, read when asked."""

    name = text_field(tokens.NAME_MAX_LENGTH, help_text="What uses it, e.g. \"CI pipeline\".")

    def get_fields(self):
        fields = super().get_fields()
        conf = tokens.token_settings()
        fields["days"] = whole_number_field(1, conf["MAX_DAYS"], required=False, allow_null=True, help_text=(
            f"How long it is valid; {conf['DEFAULT_DAYS']} days when left out."))
        return fields


class SignInSerializer(RequestSerializer):
    username = text_field(150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False, style={"input_type": "password"},
                                     validators=[TextPattern(blank=True, message="")])
    name = text_field(tokens.NAME_MAX_LENGTH, required=False, help_text="The new token's name; \"API sign-in\" "
                                                                      "when left out.")

    def get_fields(self):
        fields = super().get_fields()
        fields["days"] = NewTokenRequestSerializer().get_fields()["days"]
        return fields


class ApiTokenViewSet(viewsets.ReadOnlyModelViewSet):
    """The caller's API tokens, newest first; another user's token is 404."""

    queryset = ApiToken.objects.none()  # the schema's model; get_queryset gives the caller's
    serializer_class = ApiTokenSerializer
    pagination_class = None
    filter_backends: list = []
    lookup_value_regex = r"[0-9]+"

    def get_queryset(self):
        return ApiToken.objects.filter(user=self.request.user)

    @extend_schema(request=NewTokenRequestSerializer, responses={201: NewTokenSerializer})
    def create(self, request):
        """A new token, for a signed-in session only: a token never mints another, so a stolen one cannot
        outlive its own expiry or revocation by issuing itself a fresh one (``/api/auth/token/`` takes the
        password instead)."""
        if isinstance(request.successful_authenticator, ApiTokenAuthentication):
            raise exceptions.PermissionDenied(_(
                "An API token cannot create another token: sign in with your password (the Tokens page, or "
                "gpuportal login)."))
        body = NewTokenRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        name, days = tokens.clean_request(body.validated_data)
        return _created(*tokens.issue(request.user, name, days))

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request, pk=None):
        """Revoke the token and forget it: it stops working at once and is no longer listed."""
        token = self.get_object()
        tokens.revoke(token)
        token.delete()
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

    error_descriptions = {"400": "The body does not match the schema, or the username and password do not sign "
                                 "in (non_field_errors)."}

    @extend_schema(request=SignInSerializer, responses={200: NewTokenSerializer}, examples=[
        OpenApiExample("Sign in from a laptop", request_only=True, value={
            "username": "alice", "password": "demo", "name": "laptop", "days": 30})])
    def post(self, request):
        body = SignInSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        name, days = tokens.clean_request({"name": body.validated_data.get("name") or _("API sign-in"),
                                           "days": body.validated_data.get("days")})
        # The Django request, not DRF's wrapper: axes marks a locked-out request on it for its middleware.
        user = authenticate(request._request, username=body.validated_data["username"],
                            password=body.validated_data["password"])
        if user is None or not user.is_active:
            raise exceptions.ValidationError({"non_field_errors": [_("Unable to log in with these credentials.")]})
        response = _created(*tokens.issue(user, name, days, actor=user))  # the request itself signs in no one
        response.status_code = status.HTTP_200_OK
        return response
