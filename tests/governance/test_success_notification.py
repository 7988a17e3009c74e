"""A notification for a job that succeeded: opt-in, unlike the other kinds."""

import pytest

from governance.models import Notification, NotificationPreference
from governance.notifications.services import preferences
from scheduling import lifecycle
from scheduling.jobs import submission
from scheduling.models import Job, JobStatus
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


def finish(user, name):
    job = Job.objects.get(pk=submission.submit_job(user, job_payload(name=name, gpus_per_node=1,
                                                                     command=long_run(99999))).pk)
    if job.status == JobStatus.DISPATCHING:
        lifecycle.transition(job, JobStatus.RUNNING, "Containers started.")
    lifecycle.transition(Job.objects.get(pk=job.pk), JobStatus.SUCCEEDED, "Exited with code 0.")
    return job


def test_success_is_announced_only_to_owners_who_asked(users, mailoutbox):
    alice = users["alice"]
    assert preferences(alice)["job_succeeded"] == (False, False)
    assert preferences(alice)["job_failed"] == (True, False)  # in the portal until turned off; mail once chosen
    assert preferences(alice)["request_submitted"] == (True, True)  # an approver's duty is mailed until turned off
    quiet = finish(alice, "quiet")
    assert not Notification.objects.filter(kind="job_succeeded").exists()
    assert not any(f"#{quiet.pk}" in m.subject and "succeeded" in m.subject for m in mailoutbox)

    NotificationPreference.objects.create(user=alice, kind="job_succeeded", in_app=True, email=True)
    job = finish(alice, "announced")
    note = Notification.objects.get(user=alice, kind="job_succeeded")
    assert note.title == f"Job #{job.pk} announced succeeded" and note.url == f"/jobs/{job.pk}/"
    assert note.body == "Exited with code 0." and note.emailed and note.read_at is None
    assert any(m.subject == f"[GPU Portal] Job #{job.pk} announced succeeded" for m in mailoutbox)


def test_preferences_page_offers_success_unchecked(client, users):
    client.login(username="alice", password="demo")
    html = client.get("/notifications/").content.decode()
    assert "My job succeeded" in html
    assert 'name="job_succeeded__app" id="id_job_succeeded__app">' in html  # no "checked"
    assert 'name="job_failed__app" id="id_job_failed__app" checked>' in html
    client.post("/notifications/", {"job_succeeded__app": "on"})
    assert preferences(users["alice"])["job_succeeded"] == (True, False)
