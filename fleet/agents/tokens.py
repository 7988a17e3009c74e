"""Per-node agent tokens.

The portal must present a node's token when it polls the agent, yet the database keeps only a hash. So a
token is derived, not stored: ``HMAC(AGENT_TOKEN_SECRET, "<node>:<version>")``. Issuing a new token bumps
the version (the old one stops working at once) and stores the token's SHA-256, which the registration
endpoint checks. A stolen database reveals neither tokens nor a way to make them.
"""

from __future__ import annotations

import hashlib
import hmac

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from audit import log as audit
from audit.models import AuditAction
from fleet.models import Node, NodeEvent
from gpuportal.text import phrases
from gpuportal.text.phrases import Phrase

PREFIX = "gpa_"


def token_for(node: Node) -> str:
    """The token the agent of ``node`` expects now ("" when none was issued)."""
    if not node.agent_token_version:
        return ""
    digest = hmac.new(settings.AGENT_TOKEN_SECRET.encode(), f"{node.name}:{node.agent_token_version}".encode(),
                      hashlib.sha256).hexdigest()
    return PREFIX + digest


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@transaction.atomic
def issue(node: Node, actor=None) -> str:
    """Issue a new token for ``node`` (revoking the previous one) and return it; it is shown once."""
    node.agent_token_version += 1
    node.agent_token_issued_at = timezone.now()
    token = token_for(node)
    node.agent_token_hash = hash_token(token)
    node.save(update_fields=["agent_token_version", "agent_token_issued_at", "agent_token_hash"])
    issued = Phrase(gettext_noop("Agent token version %(v)d issued; earlier tokens revoked."), {
        "v": node.agent_token_version})
    NodeEvent.objects.create(node=node, at=node.agent_token_issued_at, kind=NodeEvent.Kind.TOKEN,
                             reason=issued, actor=actor, data={"version": node.agent_token_version,
                                                               "fingerprint": node.agent_token_hash[:12],
                                                               **phrases.data_of(issued)})
    audit.record(AuditAction.TOKEN_ISSUE, node, actor=actor, after={
        "version": node.agent_token_version, "fingerprint": node.agent_token_hash[:12]},
        reason=Phrase(gettext_noop("Earlier tokens revoked.")))
    return token


def verify(node: Node, token: str) -> bool:
    return bool(node.agent_token_hash) and hmac.compare_digest(node.agent_token_hash, hash_token(token or ""))
