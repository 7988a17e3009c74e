"""The audit log's key and anchor.

The chain is keyed (HMAC-SHA256) with a key kept outside the database, so whoever owns the tables cannot re-hash
records they changed; its head is appended regularly to a file (and syslog) they cannot rewrite: without heads
exported out of the database, its owner could delete the newest records and put back an older head row (its MAC
is valid) unseen (audit/heads.py)."""

import os

from django.core.exceptions import ImproperlyConfigured

from gpuportal.settings.environment import env_file, env_float, env_int, env_str, misconfigured


def audit_settings(secret_key: str, *, production: bool) -> dict:
    """The audit settings of a profile. Production insists on a key of its own and on an anchor; the embedded
    demo and the tests derive the key from ``secret_key`` and export heads only where told to."""
    key = env_str("GPUPORTAL_AUDIT_KEY") or env_file("GPUPORTAL_AUDIT_KEY_FILE")
    if production and len(key) < 32:
        raise misconfigured("GPUPORTAL_AUDIT_KEY (or GPUPORTAL_AUDIT_KEY_FILE)",
                            "hold at least 32 characters when GPUPORTAL_ENV=production; keep it outside the database")
    audit = {
        "KEY": (key or f"gpuportal-audit:{secret_key}").encode(),
        # Recorded with every keyed record, so that a future key can be introduced without re-hashing the past.
        "KEY_VERSION": env_int("GPUPORTAL_AUDIT_KEY_VERSION", 1),
        # Append-only JSON-lines file of exported chain heads ("" = none); syslog address: "/dev/log" or host:port.
        "HEAD_FILE": env_str("GPUPORTAL_AUDIT_HEAD_FILE"),
        "HEAD_SYSLOG": env_str("GPUPORTAL_AUDIT_HEAD_SYSLOG"),
        "HEAD_EXPORT_INTERVAL_SECONDS": env_float("GPUPORTAL_AUDIT_HEAD_INTERVAL", 300),
    }
    if audit["KEY_VERSION"] < 1:
        raise misconfigured("GPUPORTAL_AUDIT_KEY_VERSION", "be 1 or more (0 marks records written unkeyed)")
    syslog = audit["HEAD_SYSLOG"]
    if syslog and not (syslog.startswith("/") or syslog.rpartition(":")[2].isdigit()):
        raise misconfigured("GPUPORTAL_AUDIT_HEAD_SYSLOG", "be a socket path (/dev/log) or HOST:PORT (UDP)")
    if production and audit["HEAD_FILE"] and not os.path.isabs(audit["HEAD_FILE"]):
        raise misconfigured("GPUPORTAL_AUDIT_HEAD_FILE", "be an absolute path")
    if production and not (audit["HEAD_FILE"] or syslog):
        raise ImproperlyConfigured(
            "GPUPORTAL_AUDIT_HEAD_FILE (an append-only file out of the database owner's reach) or "
            "GPUPORTAL_AUDIT_HEAD_SYSLOG (/dev/log or HOST:PORT of a syslog server) must be set when "
            "GPUPORTAL_ENV=production: the audit chain's head is exported there, so that deleting the newest audit "
            "records shows in manage.py verify_audit")
    return audit
