"""Mail about jobs and requests, through a real SMTP server the tests start (aiosmtpd on this machine): opt-in per
user and per job (Slurm's --mail-type), one mail per event however often the news arrives, in the reader's
language, with the reason, the efficiency summary and a link; a relay that refuses or is down costs retries,
never the job's change."""

from __future__ import annotations

import email
import email.policy
import socket
from datetime import timedelta

import pytest
from aiosmtpd.controller import Controller
from django.utils import timezone

from accounts.models import Preference
from fleet.models import GpuReading
from governance import services
from governance.models import MailDelivery, Notification, NotificationPreference, PriorityRequest
from governance.notifications import mail
from governance.tasks import send_mail
from scheduling import lifecycle
from scheduling.jobs.efficiency import efficiency_of
from scheduling.jobs.mailtypes import parse_mail_type
from scheduling.models import Job, JobStatus, TaskType
from scheduling.signals import job_status_changed
from tenants.models import Project
from tests.conftest import job_payload
from tests.metering.helpers import gpus_of, hold

pytestmark = pytest.mark.django_db(transaction=True)

#: This helper's ports for SMTP servers the tests start.
PORTS = range(18200, 18250)


class Inbox:
    """What the SMTP server received; ``refuse`` makes it answer "451 try again later" that many times first."""

    def __init__(self):
        self.messages: list[email.message.EmailMessage] = []
        self.refuse = 0

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
        if self.refuse:
            self.refuse -= 1
            return "451 4.3.0 Try again later"
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        message["X-Envelope-To"] = ",".join(envelope.rcpt_tos)
        self.messages.append(message)
        return "250 OK"

    def to(self, address: str) -> list:
        return [m for m in self.messages if address in m["X-Envelope-To"]]


def _free_port() -> int:
    for port in PORTS:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise RuntimeError("no free port in this test's range")


@pytest.fixture
def smtp(settings):
    """A real SMTP server on 127.0.0.1, and the portal's mail settings pointing at it."""
    inbox, port = Inbox(), _free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", port, 5
    settings.MAIL = {"RETRIES": 3, "RETRY_SECONDS": 0}
    yield inbox
    controller.stop()


def _ran_and_failed(owner, mail_type: str, gpus=4, used=1) -> Job:
    """A job that held ``gpus`` A100s for two hours, ``used`` of them at 90 %, and has just failed."""
    project = Project.objects.get(tenant__name="vision", name="detection")
    task_type = TaskType.objects.get(code="research")
    start = timezone.now() - timedelta(hours=2)
    job = lifecycle.create_job(
        status=JobStatus.QUEUED, reason="test", tenant=project.tenant, project=project, owner=owner,
        task_type=task_type, gpu_model="A100", name="sweep", gpus_per_node=gpus, node_count=1, image="img",
        max_runtime_minutes=600, priority=task_type.priority, submitted_at=start,
        mail_type=parse_mail_type(mail_type))
    held = gpus_of("dc1-r3-a100-01", gpus)
    hold(job, held, start)
    lifecycle.transition(job, JobStatus.DISPATCHING, "sent", at=start)
    lifecycle.transition(job, JobStatus.RUNNING, "running", at=start)  # hours ago: history, not news
    GpuReading.objects.bulk_create(
        GpuReading(gpu=gpu, at=start + timedelta(minutes=5 * step), utilization_pct=90 if i < used else 0,
                   memory_used_mb=40_000 if i < used else 300)
        for step in range(24) for i, gpu in enumerate(held))
    lifecycle.transition(Job.objects.get(pk=job.pk), JobStatus.FAILED, "ended", failure_category="out_of_memory",
                         failure_message="CUDA out of memory at step 812")
    return Job.objects.get(pk=job.pk)


def test_a_job_that_asked_for_end_and_fail_mails_once_with_reason_summary_and_link(smtp, users, settings):
    alice = users["alice"]
    job = _ran_and_failed(alice, "END,FAIL")
    [mail] = smtp.to(alice.email)
    assert mail["Subject"] == f"[GPU Portal] Job #{job.pk} sweep failed: Out of memory"
    body = mail.get_content()
    assert "CUDA out of memory at step 812" in body  # the reason
    efficiency = efficiency_of(job)
    assert f"GPU-hours held: {efficiency.gpu_hours_held:.2f}" in body and "Mean GPU utilisation: 22 %" in body
    assert "This job asked for 4 GPUs and used 1 at most: ask for 1." in body  # the hint, where it is clear
    assert f"{settings.PORTAL_URL}/jobs/{job.pk}/" in body  # the link
    delivery = MailDelivery.objects.get(recipient=alice)
    assert delivery.sent_at is not None and delivery.tries == 1
    assert Notification.objects.get(user=alice, kind="job_failed").emailed


def test_the_same_event_is_never_mailed_twice(smtp, users):
    alice = users["alice"]
    job = _ran_and_failed(alice, "FAIL")
    event = Job.objects.get(pk=job.pk).events.filter(to_status=JobStatus.FAILED).get()
    for _ in range(2):  # the news arrives again (a duplicated message), and the task runs again
        job_status_changed.send(sender=Job, jobs=[job], from_status=JobStatus.RUNNING, to_status=JobStatus.FAILED,
                                reasons={}, actor=None, at=event.at)
    delivery = MailDelivery.objects.get(recipient=alice)
    assert send_mail.delay(delivery.pk).get() == "already"
    assert len(smtp.to(alice.email)) == 1 and MailDelivery.objects.count() == 1


def test_mail_is_opt_in_per_user_and_per_job(smtp, users):
    alice, bob = users["alice"], users["bob"]
    quiet = _ran_and_failed(alice, "")  # no mail types and no preference: in the portal only
    assert Notification.objects.filter(user=alice, kind="job_failed").exists()
    assert smtp.to(alice.email) == []
    NotificationPreference.objects.create(user=alice, kind="job_failed", in_app=True, email=True)
    chosen = _ran_and_failed(alice, "")
    assert [f"#{chosen.pk} " in m["Subject"] for m in smtp.to(alice.email)] == [True]
    _ran_and_failed(alice, "NONE")  # the job says no mail, whatever the preference
    _ran_and_failed(alice, "BEGIN")  # it asked for its start only
    assert len(smtp.to(alice.email)) == 1
    assert quiet.pk != chosen.pk and smtp.to(bob.email) == []


def test_each_reader_gets_the_mail_in_their_language(smtp, users):
    alice = users["alice"]
    Preference.objects.create(user=alice, language="zh-hans")
    job = _ran_and_failed(alice, "ALL")
    [mail] = smtp.to(alice.email)
    assert mail["Subject"].strip() == f"[GPU 门户] 作业 #{job.pk} sweep 失败：内存不足"


def _sweep_later(hours: int) -> int:
    """The beat's sweep run ``hours`` from now: what it queued again (each sent at once, tasks run here)."""
    return mail.resend_unsent(now=timezone.now() + timedelta(hours=hours))


def test_a_relay_that_refuses_is_tried_again_and_the_mail_goes_once(smtp, users):
    smtp.refuse = 2
    alice = users["alice"]
    _ran_and_failed(alice, "FAIL")
    delivery = MailDelivery.objects.get(recipient=alice)
    assert delivery.tries == 1 and delivery.sent_at is None  # no worker: one try where the event happened
    assert _sweep_later(1) == 1 and _sweep_later(2) == 1
    assert len(smtp.to(alice.email)) == 1
    delivery.refresh_from_db()
    assert delivery.tries == 3 and delivery.sent_at is not None and delivery.last_error == ""
    assert _sweep_later(3) == 0 and len(smtp.to(alice.email)) == 1  # sent: never again


def test_a_relay_that_is_down_never_stops_the_job_change(smtp, users, settings):
    settings.EMAIL_PORT = _free_port()  # nobody listens there
    job = _ran_and_failed(users["alice"], "FAIL")
    assert job.status == JobStatus.FAILED
    for hours in range(1, settings.MAIL["RETRIES"] + 1):
        assert _sweep_later(hours) == 1
    assert _sweep_later(99) == 0  # its tries ran out: the error stays for the admins
    delivery = MailDelivery.objects.get(recipient=users["alice"])
    assert delivery.sent_at is None and delivery.tries == settings.MAIL["RETRIES"] + 1
    assert "Connection refused" in delivery.last_error or "Errno" in delivery.last_error
    assert not Notification.objects.get(user=users["alice"], kind="job_failed").emailed


def test_a_subject_is_one_line_whatever_the_job_is_called(smtp, users):
    alice = users["alice"]
    assert mail.prepare("test:one-line", alice, "Job #5 a\nb\r\nc started", "body")
    [sent] = smtp.to(alice.email)
    assert sent["Subject"].strip() == "Job #5 a b c started"


def test_a_decided_request_mails_its_requester_who_asked_for_it(smtp, users):
    from scheduling.jobs import submission

    alice, carol = users["alice"], users["carol"]
    NotificationPreference.objects.create(user=alice, kind="request_decided", in_app=True, email=True)
    job = submission.submit_job(alice, job_payload(gpus_per_node=2, name="long-run"))
    request = services.submit_request(alice, {"kind": "runtime_extension", "job": str(job.pk),
                                              "max_runtime_minutes": "900", "justification": "Fifteen hours."})
    services.decide(carol, PriorityRequest.objects.get(pk=request.pk), True, "Fine.")
    [mail] = smtp.to(alice.email)
    assert mail["Subject"] == f"[GPU Portal] Your request #{request.pk} was approved by carol"
    assert "Fine." in mail.get_content() and f"/requests/{request.pk}/" in mail.get_content()


def test_a_requeue_mails_a_job_that_asked_for_requeues(smtp, users):
    from scheduling.jobs import submission
    from tests.conftest import long_run

    alice = users["alice"]
    job = submission.submit_job(alice, job_payload(gpus_per_node=1, command=long_run(99999), mail_type="requeue"))
    assert Job.objects.get(pk=job.pk).mail_type == "REQUEUE"
    job = Job.objects.get(pk=job.pk)
    if job.status != JobStatus.RUNNING:
        lifecycle.transition(job, JobStatus.RUNNING, "Containers started.")
    lifecycle.transition(Job.objects.get(pk=job.pk), JobStatus.PREEMPTED, "Preempted by a higher priority job.")
    [mail] = smtp.to(alice.email)
    assert mail["Subject"] == f"[GPU Portal] Job #{job.pk} {job.name} was preempted"


def test_a_cancellation_by_someone_else_mails_a_job_that_asked_for_its_end(smtp, users):
    from scheduling.jobs import actions, submission
    from tests.conftest import long_run

    bob = users["bob"]
    mine = submission.submit_job(bob, job_payload(tenant="nlp", project="chat-eval", gpus_per_node=1,
                                                  command=long_run(99999), mail_type="END"))
    theirs = submission.submit_job(bob, job_payload(tenant="nlp", project="chat-eval", gpus_per_node=1,
                                                    command=long_run(99999), mail_type="END", name="theirs"))
    actions.cancel_job(bob, Job.objects.get(pk=mine.pk), "not needed")  # his own doing: nothing to tell him
    actions.cancel_job(users["frank"], Job.objects.get(pk=theirs.pk), "the tenant needs the GPUs")
    [mail] = smtp.to(bob.email)
    assert mail["Subject"] == f"[GPU Portal] Job #{theirs.pk} theirs was cancelled"
    assert "the tenant needs the GPUs" in mail.get_content()
