"""DRF authentication with the portal's hashed API tokens (``Authorization: Token <t>`` or ``Bearer <t>``)."""

from django.utils.translation import gettext as _
from rest_framework import authentication, exceptions

from accounts import tokens

KEYWORDS = ("token", "bearer")


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """Checks the token's hash, expiry, revocation and that its user is active.

    Any failure answers the same 401 so that a client cannot tell a revoked token from a made-up one."""

    def authenticate(self, request):
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower().decode("latin-1") not in KEYWORDS:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed(_("Invalid token header: give the scheme and one token."))
        try:
            secret = parts[1].decode("ascii")
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed(_("Invalid, expired or revoked token.")) from exc
        token = tokens.check(secret)
        if token is None:
            raise exceptions.AuthenticationFailed(_("Invalid, expired or revoked token."))
        return token.user, token

    def authenticate_header(self, request):
        # A WWW-Authenticate header makes unauthenticated requests 401 rather than 403.
        return "Token"
