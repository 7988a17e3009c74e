"""Mail for a notification: written once per event and recipient, sent by a Celery task through the site's relay.

``prepare`` stores a ``MailDelivery`` (subject and body already in the recipient's language) unless one exists for
the same event and recipient, and queues ``governance.tasks.send_mail`` once the transaction commits; ``deliver``
is that task's work. A delivery is sent at most once: the row is locked while it is sent and marked sent in the
same transaction, so a task delivered twice, or retried after the relay took the message, finds it sent and stops.
The relay being down costs retries (``settings.MAIL``); a delivery whose task was lost (the broker down, a worker
gone) is queued again by the beat (``resend_unsent``). Without a worker (the embedded demo) a delivery is tried
once, where its event happened, and left to that sweep.
"""

from __future__ import annotations

import logging
import smtplib
from datetime import timedelta

from django.conf import settings
from django.core.mail import EmailMessage, get_connection
from django.db import IntegrityError, transaction
from django.utils import timezone

from governance.models import MailDelivery, Notification
from scheduling import triggers

logger = logging.getLogger(__name__)

#: The task that sends one delivery (``governance/tasks.py``), queued by name.
SEND_MAIL = "governance.tasks.send_mail"


class MailNotSent(Exception):
    """The relay refused the message or could not be reached: the task tries again later."""


def prepare(event: str, user, subject: str, body: str, notification: Notification | None = None) -> bool:
    """Store the delivery of ``event`` to ``user`` and queue it; False when it was stored before (nothing queued)."""
    try:
        with transaction.atomic():
            delivery, created = MailDelivery.objects.get_or_create(event=event[:120], recipient=user, defaults={
                "address": user.email, "subject": " ".join(subject.split())[:250],  # a header: one line
                "body": body, "notification": notification})
    except IntegrityError:  # the same event prepared at the same moment elsewhere: that one is sent
        return False
    if created:
        transaction.on_commit(lambda: triggers.send(SEND_MAIL, delivery.pk))
    return created


def deliver(delivery_id: int) -> str:
    """Send one delivery unless it was sent: ``sent``, ``already`` or ``gone``; ``MailNotSent`` when the relay
    failed (the row keeps the error and the count of tries)."""
    error = ""
    with transaction.atomic():
        delivery = MailDelivery.objects.select_for_update().filter(pk=delivery_id).first()
        if delivery is None:
            return "gone"
        if delivery.sent_at is not None:
            return "already"
        delivery.tries += 1
        try:
            connection = get_connection(timeout=settings.EMAIL_TIMEOUT)
            EmailMessage(delivery.subject, delivery.body, settings.DEFAULT_FROM_EMAIL, [delivery.address],
                         connection=connection).send()
        except (smtplib.SMTPException, OSError) as exc:
            error = f"{type(exc).__name__}: {exc}"[:1000]
            delivery.last_error = error
            delivery.save(update_fields=["tries", "last_error"])
        except ValueError as exc:  # a message no relay can take (a header Django refuses): never tried again
            delivery.tries = max(delivery.tries, settings.MAIL["RETRIES"] + 1)
            delivery.last_error = f"{type(exc).__name__}: {exc}"[:1000]
            delivery.save(update_fields=["tries", "last_error"])
            logger.error("mail %s to %s cannot be sent: %s", delivery.event, delivery.address, exc)
            return "refused"
        else:
            delivery.sent_at, delivery.last_error = timezone.now(), ""
            delivery.save(update_fields=["tries", "sent_at", "last_error"])
            if delivery.notification_id:
                Notification.objects.filter(pk=delivery.notification_id).update(emailed=True)
    if error:
        logger.warning("mail %s to %s not sent (try %d): %s", delivery.event, delivery.address, delivery.tries, error)
        raise MailNotSent(error)
    return "sent"


def resend_unsent(now=None) -> int:
    """Queue again the deliveries still unsent with tries left, older than a few retry intervals: a message the
    broker did not take, or a task lost with its worker (sending twice is impossible: ``deliver`` checks). Those
    whose tries ran out keep their error for the admins to read."""
    now = now or timezone.now()
    mail = settings.MAIL
    stale = now - timedelta(seconds=mail["RETRY_SECONDS"] * 2 ** min(mail["RETRIES"], 6))
    ids = list(MailDelivery.objects.filter(sent_at__isnull=True, tries__lte=mail["RETRIES"], created__lt=stale)
               .values_list("pk", flat=True)[:500])
    for delivery_id in ids:
        triggers.send(SEND_MAIL, delivery_id)
    return len(ids)
