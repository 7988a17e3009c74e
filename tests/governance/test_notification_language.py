"""Notifications in the recipient's language: the approver works in English, the requester
reads Chinese; the other way round too."""

import pytest
from django.core import mail
from django.utils import translation
from django.utils.translation import gettext as _

from accounts.models import Preference
from governance import services
from governance.models import Notification, NotificationPreference, PriorityRequest
from scheduling.jobs import submission
from tests.conftest import job_payload

pytestmark = pytest.mark.django_db(transaction=True)

TITLE = "Your request #%(id)d was %(state)s by %(user)s"


def test_each_recipient_reads_the_notification_in_their_language(users, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    users["alice"].email = "alice@example.org"
    users["alice"].save()
    Preference.objects.create(user=users["alice"], language="zh-hans")
    NotificationPreference.objects.create(user=users["alice"], kind="request_decided", in_app=True, email=True)
    job = submission.submit_job(users["alice"], job_payload(gpus_per_node=2, name="long-run"))
    request = services.submit_request(users["alice"], {"kind": "runtime_extension", "job": str(job.pk),
                                                       "max_runtime_minutes": "900",
                                                       "justification": "The sweep needs fifteen hours."})
    with translation.override("en"):  # carol works in English
        services.decide(users["carol"], PriorityRequest.objects.get(pk=request.pk), True, "Fine.")
    with translation.override("zh-hans"):
        expected = _(TITLE) % {"id": request.pk, "state": _("Approved").lower(), "user": "carol"}
        subject = _("[GPU Portal] %(title)s") % {"title": expected}
    english = TITLE % {"id": request.pk, "state": "approved", "user": "carol"}
    assert expected != english, "the zh_Hans catalogue must translate the title"
    notice = Notification.objects.get(user=users["alice"], kind="request_decided")
    assert notice.title == expected
    assert [m.subject for m in mail.outbox if "alice@example.org" in m.to] == [subject]
    # carol has no language of her own: the site's (English), even though alice asked in Chinese
    asked = Notification.objects.get(user=users["carol"], kind="request_submitted")
    assert asked.title.startswith("alice asks: ")
