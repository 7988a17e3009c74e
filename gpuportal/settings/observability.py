"""Logs and metrics: what the portal tells its operators, and who may scrape /metrics."""

from gpuportal.settings.environment import env_list, env_str


def logging_config(log_format: str) -> dict:
    """JSON lines on stdout (``json``), each with the request id, user and tenant (gpuportal.observability.logs), or
    plain text, where runserver already prints one line per request. Each profile chooses the format
    (``GPUPORTAL_LOG_FORMAT`` overrides it)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"context": {"()": "gpuportal.observability.logs.ContextFilter"}},
        "formatters": {"json": {"()": "gpuportal.observability.logs.JsonFormatter"}},
        "handlers": {"console": {"class": "logging.StreamHandler", "stream": "ext://sys.stdout",
                                 "filters": ["context"], **({"formatter": "json"} if log_format == "json" else {})}},
        "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
        "loggers": {"django.db.backends": {"level": "WARNING"}, "celery.app.trace": {"level": "WARNING"},
                    "kombu": {"level": "WARNING"},
                    "gpuportal.request": {"level": "INFO" if log_format == "json" else "WARNING"}},
    }


# /metrics: with a token set, scrapers send "Authorization: Bearer <token>"; without one, only the listed
# addresses may scrape.
METRICS = {
    "TOKEN": env_str("GPUPORTAL_METRICS_TOKEN"),
    "ALLOWED_IPS": env_list("GPUPORTAL_METRICS_ALLOWED_IPS", "127.0.0.1,::1"),
}
