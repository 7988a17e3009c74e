"""Celery task of the directory: the periodic sync (``gpuportal/celery.py`` schedules it every
``DIRECTORY["SYNC_INTERVAL_SECONDS"]``)."""

import logging

from celery import shared_task

from directory.ldap.sync import DirectoryUnavailable, sync_ldap

logger = logging.getLogger(__name__)


@shared_task
def sync_directory() -> dict:
    """Bring everyone who signed in with LDAP in line with the directory. A directory that cannot be read is
    logged and changes nothing; the next tick tries again."""
    try:
        return sync_ldap().as_dict()
    except DirectoryUnavailable as error:
        logger.warning("directory sync skipped: the directory could not be read (%s)", error)
        return {"error": str(error)}
