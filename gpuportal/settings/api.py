"""The REST API: authentication, throttles, the contract its bodies and errors follow, its OpenAPI schema."""

from gpuportal.settings.environment import env_float, env_str


def environment_throttle_rates() -> dict[str, str]:
    """Per client address for anonymous calls, per user otherwise (rates like "60/min", "5000/hour")."""
    return {"anon": env_str("GPUPORTAL_API_THROTTLE_ANON", "60/min"),
            "user": env_str("GPUPORTAL_API_THROTTLE_USER", "6000/min")}


def rest_framework(throttle_rates: dict[str, str]) -> dict:
    """DRF's settings; each profile gives the throttle rates (the tests' stay out of their way)."""
    return {
        "DEFAULT_AUTHENTICATION_CLASSES": [
            "accounts.authentication.ApiTokenAuthentication",  # hashed, expiring, revocable
            "rest_framework.authentication.SessionAuthentication",
        ],
        # Throttles count in the default cache (cache.py): per process unless a shared cache is configured.
        "DEFAULT_THROTTLE_CLASSES": ["accounts.throttles.AnonThrottle", "accounts.throttles.UserThrottle"],
        "DEFAULT_THROTTLE_RATES": throttle_rates,
        "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
        "DEFAULT_PAGINATION_CLASS": "gpuportal.web.api.StandardPagination",
        "PAGE_SIZE": 50,
        "DEFAULT_FILTER_BACKENDS": ["gpuportal.web.validation.ContractFilterBackend"],
        # The API as a contract. Bodies are one JSON object (anything else is a 400 or a 415); the schema
        # lists every error an operation answers; errors are field maps (400, 409, 422) or {"detail"}.
        "DEFAULT_PARSER_CLASSES": ["gpuportal.web.validation.JSONObjectParser"],
        "TEST_REQUEST_DEFAULT_FORMAT": "json",
        "DEFAULT_SCHEMA_CLASS": "gpuportal.web.schema.ContractSchema",
        "EXCEPTION_HANDLER": "gpuportal.web.api.exception_handler",
    }


SPECTACULAR_SETTINGS = {
    "TITLE": "GPU Portal API",
    "DESCRIPTION": "Everything the portal's pages do: jobs, queue positions, wait reasons, quotas.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI's files come from the drf-spectacular-sidecar package, served by the site: no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Request bodies get their own components: read-only fields are not asked for, write limits are shown.
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "gpuportal.web.schema.add_links"],
    "ENUM_NAME_OVERRIDES": {"TopologyEnum": "scheduling.models.Topology",
                            "JobStatusEnum": "scheduling.models.JobStatus",
                            "WorkloadKindEnum": "scheduling.models.WorkloadKind",
                            "WhatIfKindEnum": "metering.models.WhatIfRun.Kind",
                            "WhatIfStatusEnum": "metering.models.WhatIfRun.Status"},
    # A running job reports with its own token (POST /api/jobs/{id}/report/), an agent with its node's.
    "APPEND_COMPONENTS": {"securitySchemes": {
        "jobToken": {"type": "http", "scheme": "bearer", "description": (
            "The job's own token, GPUPORTAL_JOB_TOKEN in its environment; valid while that attempt runs.")},
        "agentToken": {"type": "http", "scheme": "bearer", "description": (
            "The node's agent token (issued on the node's page in the inventory), for POST /api/agents/register/.")}}},
    # `check --deploy` is about the deployment's safety; drf-spectacular would add its notes on the API schema's
    # wording there (they are the schema's business, shown by `manage.py spectacular --validate`).
    "ENABLE_DJANGO_DEPLOY_CHECK": False,
}

# How long an Idempotency-Key is remembered for a creating API call (gpuportal/web/idempotency.py).
IDEMPOTENCY_TTL_HOURS = env_float("GPUPORTAL_IDEMPOTENCY_TTL_HOURS", 24)
