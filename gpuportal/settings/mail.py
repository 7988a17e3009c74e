"""Mail through the site's SMTP relay: Django's mail settings, each from the environment, and how the portal sends.

The demo prints mail on the console (``EMAIL_BACKEND``); production names its relay (``EMAIL_HOST``, ``EMAIL_PORT``,
an account and TLS when the relay wants them). Mail is sent by a Celery task (``governance.tasks.send_mail``), so a
relay that is slow or down never holds up a scheduling pass or a page: the task tries again ``RETRIES`` times,
waiting ``RETRY_SECONDS``, then twice as long each time."""

from gpuportal.settings.environment import env_bool, env_float, env_int, env_str

EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)  # STARTTLS, usually on port 587
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)  # TLS from the first byte, usually on port 465
EMAIL_TIMEOUT = env_float("EMAIL_TIMEOUT", 10)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "gpuportal@localhost")

MAIL = {
    "RETRIES": env_int("GPUPORTAL_MAIL_RETRIES", 5),
    "RETRY_SECONDS": env_float("GPUPORTAL_MAIL_RETRY_SECONDS", 30),
}
