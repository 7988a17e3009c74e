"""Job-scoped tokens for progress reports: HMAC of the job id and attempt, valid while that attempt runs.

The token reaches the pods as a Secret in the tenant's namespace; it works for its own job only, and once
the job ends (or the next attempt starts) it no longer matches anything. Nothing is stored.
"""

from __future__ import annotations

import hashlib
import hmac

from django.conf import settings


def token_for(job) -> str:
    message = f"gpuportal-job:{job.pk}:{job.retry_count}".encode()
    return hmac.new(settings.SECRET_KEY.encode(), message, hashlib.sha256).hexdigest()


def verify(job, token: str) -> bool:
    return (not job.is_terminal) and bool(token) and hmac.compare_digest(token_for(job), token)


def notebook_token(job) -> str:
    """The secret a notebook server of this attempt takes (Jupyter's ``--ServerApp.token``): known only to the
    portal's proxy and to the server; no user sees it, so the only way in is through the portal's sign-in."""
    message = f"gpuportal-notebook:{job.pk}:{job.retry_count}".encode()
    return hmac.new(settings.SECRET_KEY.encode(), message, hashlib.sha256).hexdigest()
