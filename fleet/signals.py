"""What the fleet tells the layers above without knowing them (scheduling listens)."""

from django.dispatch import Signal

#: Sent inside the transaction that stores a poll, once per fault: ``category`` (a ``FaultKind``), ``reason``,
#: ``node`` (a Node), ``gpu_id`` (None for the whole node), ``at`` and ``evidence`` (the agent's words).
hardware_fault = Signal()

#: Sent inside the transaction that changed what the fleet can run (a node cordoned, drained or reactivated):
#: ``node``, ``actor`` and ``job_note`` (a phrase for the timelines of the jobs running on the node; "" for none).
#: Scheduling notes it on those jobs and answers with a pass once the transaction commits.
capacity_changed = Signal()
