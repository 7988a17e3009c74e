"""Signals other apps listen to (notifications, approvals) without the scheduling app knowing them.

``job_status_changed`` is sent once the transaction that changed the jobs has committed, with
``jobs`` (the Job objects, already in their new state), ``from_status``, ``to_status``, ``reasons`` (by
job id), ``actor`` and ``at`` (when the change happened: back-dated imports are not news).
"""

from django.dispatch import Signal

job_status_changed = Signal()
