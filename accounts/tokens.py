"""Issue, check and revoke API tokens: the one place that knows a token's format and how it is stored.

A token is ``gpt_`` and 43 random URL-safe characters (256 bits from ``secrets``). Only its SHA-256 and its
first 12 characters are stored: a fast hash is enough because the secret is random and long (nothing to
brute-force, unlike a password), and it keeps every API request to one indexed lookup. The secret is
returned once, to whoever created it, and never again.

Every token created and every one revoked is announced (``token_issued``, ``tokens_revoked``) inside the
transaction that writes it: the audit log records them there (audit sits above accounts, so this module names
no listener), and a token is never created or revoked without its record.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone
from django.utils.translation import gettext as _

from accounts.models import ApiToken, RevocationReason
from gpuportal.web.validation import whole_number

TOKEN_PREFIX = "gpt_"
PREFIX_LENGTH = 12
NAME_MAX_LENGTH = 100

#: A token was created: ``token``, ``actor`` (who created it; None: the request's user, else nobody).
token_issued = Signal()
#: Tokens were revoked: ``revoked`` (the rows, revoked now), ``reason`` (a ``RevocationReason``), ``actor``.
tokens_revoked = Signal()


def token_settings() -> dict:
    """The ``API_TOKENS`` settings with their defaults, read at call time so tests may change them."""
    return {"DEFAULT_DAYS": 90, "MAX_DAYS": 365, "LAST_USED_RESOLUTION_SECONDS": 60,
            **getattr(settings, "API_TOKENS", {})}


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def clean_request(data: dict) -> tuple[str, int]:
    """The name and lifetime in days asked for, or a ValidationError naming each bad field and its limit."""
    conf = token_settings()
    errors: dict = {}
    name = str(data.get("name") or "").strip()
    if not name:
        errors["name"] = _("Name is required.")
    elif len(name) > NAME_MAX_LENGTH:
        errors["name"] = _("Name must be at most %(max)d characters (got %(n)d).") % {
            "max": NAME_MAX_LENGTH, "n": len(name)}
    days = conf["DEFAULT_DAYS"] if data.get("days") in (None, "") else whole_number(
        errors, data, "days", 1, conf["MAX_DAYS"], _("Days"))
    if errors:
        raise ValidationError(errors)
    return name, days


def issue(user, name: str, days: int | None = None, actor=None) -> tuple[ApiToken, str]:
    """Create a token for ``user``; returns the stored row and the secret, which is not kept anywhere.
    ``actor``: who asks, where the request has no signed-in user (a password exchanged for a token)."""
    name, days = clean_request({"name": name, "days": days})
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        token = ApiToken.objects.create(user=user, name=name, prefix=secret[:PREFIX_LENGTH], digest=digest(secret),
                                        expires_at=timezone.now() + timedelta(days=days))
        token_issued.send(sender=ApiToken, token=token, actor=actor)
    return token, secret


def check(secret: str) -> ApiToken | None:
    """The usable token this secret belongs to (not revoked, not expired, active user), else None.

    ``last_used_at`` is written at most once per ``LAST_USED_RESOLUTION_SECONDS`` so that a busy client
    does not turn every read into a write."""
    if not secret.startswith(TOKEN_PREFIX) or len(secret) > 200:
        return None
    token = ApiToken.objects.select_related("user").filter(digest=digest(secret)).first()
    now = timezone.now()
    if token is None or token.revoked_at is not None or token.expires_at <= now or not token.user.is_active:
        return None
    resolution = timedelta(seconds=token_settings()["LAST_USED_RESOLUTION_SECONDS"])
    if token.last_used_at is None or now - token.last_used_at >= resolution:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def revoke(token: ApiToken, reason: str = RevocationReason.USER, actor=None) -> bool:
    """Revoke one token at once (the next request with it is refused); False if it was already revoked."""
    with transaction.atomic():
        changed = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now(), revoked_reason=reason)
        token.refresh_from_db(fields=["revoked_at", "revoked_reason"])
        if changed:
            tokens_revoked.send(sender=ApiToken, revoked=[token], reason=reason, actor=actor)
    return bool(changed)


def revoke_all(user, reason: str, actor=None) -> int:
    """Revoke every token of ``user`` that is not revoked yet; returns how many."""
    with transaction.atomic():
        # Locked, so that the rows announced are exactly the rows this call revokes.
        revoked = list(ApiToken.objects.select_for_update(of=("self",)).select_related("user").filter(
            user=user, revoked_at__isnull=True))
        now = timezone.now()
        ApiToken.objects.filter(pk__in=[t.pk for t in revoked]).update(revoked_at=now, revoked_reason=reason)
        for token in revoked:
            token.revoked_at, token.revoked_reason = now, reason
        if revoked:
            tokens_revoked.send(sender=ApiToken, revoked=revoked, reason=reason, actor=actor)
        return len(revoked)
