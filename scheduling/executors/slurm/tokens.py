"""Short-lived per-user tokens for slurmrestd, signed the way slurmctld checks them (HS256 with the cluster's
``jwt_hs256.key``), or the one token a site gave the portal in a file.

A token is a password for a cluster account: it is never logged, never put into an exception's message or an
event, and kept only in this process's memory."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from pathlib import Path

from django.conf import settings

#: A cached token is made anew this long before it expires, so that no request carries one about to lapse.
RENEW_BEFORE_SECONDS = 60

_cache: dict[tuple, tuple[str, float]] = {}
_lock = threading.Lock()


class TokenError(Exception):
    """The cluster gives the portal no way to act as this user (no key, no token, or a token of another user)."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def sign(key: bytes, user: str, now: float, lifespan: int) -> str:
    """An HS256 JWT with the claims slurmctld reads: ``sun`` (the user name), ``iat`` and ``exp``."""
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = _b64(json.dumps({"sun": user, "iat": int(now), "exp": int(now) + lifespan},
                             separators=(",", ":")).encode())
    signature = hmac.new(key, f"{header}.{claims}".encode(), hashlib.sha256).digest()
    return f"{header}.{claims}.{_b64(signature)}"


def token_user(cluster) -> str:
    """Whom a token file speaks for (its ``sun`` claim), "" when it cannot be read."""
    try:
        payload = Path(cluster.slurm_token_file).read_text().strip().split(".")[1]
        return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))).get("sun", "")
    except (OSError, IndexError, ValueError):
        return ""


def token_for(cluster, user: str) -> str:
    """The token to send as ``user``: signed with the cluster's key (cached per cluster and user until a minute
    before it expires), or the content of its token file, which serves only the user it was made for."""
    if cluster.slurm_jwt_key_file:
        lifespan = int(settings.SLURM["TOKEN_SECONDS"])
        key = (cluster.pk, cluster.slurm_jwt_key_file, user)
        now = time.time()
        with _lock:
            cached = _cache.get(key)
            if cached and cached[1] - RENEW_BEFORE_SECONDS > now:
                return cached[0]
        try:
            secret = Path(cluster.slurm_jwt_key_file).read_bytes()
        except OSError as exc:
            raise TokenError(f"the JWT key file of cluster {cluster.name} cannot be read ({exc.strerror})") from None
        token = sign(secret, user, now, lifespan)
        with _lock:
            _cache[key] = (token, now + lifespan)
        return token
    if cluster.slurm_token_file:
        owner = token_user(cluster)
        if owner and owner != user:
            raise TokenError(f"the token file of cluster {cluster.name} is for {owner}, not {user}")
        try:
            return Path(cluster.slurm_token_file).read_text().strip()
        except OSError as exc:
            raise TokenError(f"the token file of cluster {cluster.name} cannot be read ({exc.strerror})") from None
    raise TokenError(f"cluster {cluster.name} has neither a JWT key file nor a token file")


def forget(cluster=None) -> None:
    """Drop cached tokens (of one cluster, or all): after its key changed."""
    with _lock:
        for key in [key for key in _cache if cluster is None or key[0] == cluster.pk]:
            del _cache[key]
