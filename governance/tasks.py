"""Celery tasks of governance: expire undecided requests, reclaim idle GPUs, send mail."""

from celery import shared_task
from django.conf import settings

from governance.notifications import mail
from governance.reclamation import check_idle_jobs as check
from governance.services import expire_due


@shared_task
def expire_requests() -> int:
    return expire_due()


@shared_task
def check_idle_jobs() -> dict:
    return check()


@shared_task
def resend_unsent_mail() -> int:
    return mail.resend_unsent()


@shared_task(bind=True)
def send_mail(self, delivery_id: int) -> str:
    """Send one prepared mail (``governance.notifications.mail``); when the relay fails, try again after
    ``RETRY_SECONDS``, twice as long each time, ``RETRIES`` times, then leave the error on the delivery's row."""
    retries = settings.MAIL["RETRIES"]
    try:
        return mail.deliver(delivery_id)
    except mail.MailNotSent as exc:
        if self.request.is_eager or self.request.retries >= retries:
            return "failed"
        raise self.retry(exc=exc, countdown=settings.MAIL["RETRY_SECONDS"] * 2 ** self.request.retries) from exc
