"""The directory's own actor: the name every audit record of a change the directory causes carries.

Audit records name their actor by a user (``audit.log.record`` keeps ``actor.get_username()`` as
``actor_name``); records written with no actor read as "the portal" (the scheduler, the reconciler). A
change the directory causes is neither a person's nor the portal's own decision, so it is written as the
system user ``directory``: inactive, without a usable password, refused by both directory backends, so
nobody can ever sign in as it. Membership and platform-role records come from audit's model signals,
which take their actor from the audit context; ``acting_as_directory`` sets it around the directory's
writes.
"""

from __future__ import annotations

from contextlib import contextmanager

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password

from audit import log as audit

#: The username of the directory's actor; no directory account may take it.
DIRECTORY_ACTOR = "directory"


def directory_actor():
    """The system user the directory's audit records name (created, inactive, the first time it is needed)."""
    actor, _created = get_user_model().objects.get_or_create(username=DIRECTORY_ACTOR, defaults={
        "is_active": False, "password": make_password(None), "first_name": "Directory"})
    return actor


@contextmanager
def acting_as_directory(address: str = ""):
    """Audit records written inside name the directory as their actor (and ``address`` as their source)."""
    token = audit.set_context(directory_actor(), address)
    try:
        yield
    finally:
        audit.reset_context(token)
