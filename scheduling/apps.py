from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _

from gpuportal.storage import pagecache


class SchedulingConfig(AppConfig):
    name = "scheduling"
    verbose_name = _("Scheduling")

    def ready(self):
        # Models can be imported only once the app registry is ready, so not at the top of this module.
        from django.core.signals import request_finished, request_started

        from audit.changes import audit_values
        from audit.models import AuditAction
        from audit.registry import audit_changes
        from fleet import occupancy, signals
        from scheduling.jobs.occupancy import JobOccupancy, mark_jobs_hit_by_fault, pass_after_capacity_change
        from scheduling.models import PREEMPTION_RULES, Job, JobEvent, JobGroup, Reservation, begin_request, end_request

        occupancy.register(JobOccupancy())
        # A request reads the pass's queue table once, whatever the rows it shows (``models.queue_places``).
        request_started.connect(begin_request, dispatch_uid="scheduling-queue-places-begin")
        request_finished.connect(end_request, dispatch_uid="scheduling-queue-places-end")
        # Every change of a job writes a JobEvent: a note() (a hold, a longer runtime, a new task type — updates
        # that bypass save()) starts a new generation through its event. Writes in bulk (transitions, imports, the
        # pass's queue states) call data_changed themselves. Allocations and queue states are not watched: their
        # changes come with a transition or a pass, and a delete listener would cost the pass Django's fast delete.
        pagecache.watch(Job, JobEvent, JobGroup)
        signals.hardware_fault.connect(mark_jobs_hit_by_fault, dispatch_uid="scheduling-hardware-fault")
        signals.capacity_changed.connect(pass_after_capacity_change, dispatch_uid="scheduling-capacity-changed")
        audit_values(PREEMPTION_RULES)  # the audit log reads a recorded preemption rule in these words too
        audit_changes(Reservation, AuditAction.RESERVATION_CREATE, AuditAction.RESERVATION_CHANGE,
                      AuditAction.RESERVATION_DELETE, ["tenant", "gpu_model", "gpus", "start", "end"])
