"""The one error for "the object moved meanwhile": an action that applies to a state the object has just left.

Why a subclass of Django's ValidationError: the pages already show a ValidationError's messages, so they need
nothing new; the API answers it with 409 (``gpuportal.web.api.exception_handler``) instead of the 422 of a rule
broken by the request itself, because retrying the same request cannot succeed until the object changes again.
"""

from django.core.exceptions import ValidationError


class StateConflict(ValidationError):
    """The object is no longer in a state the action applies to (another request, a scheduling pass or an
    executor moved it first); the message names the state it is in now."""
