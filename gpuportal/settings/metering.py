"""Metering, the monthly review pack and governance (requests, idle reclamation, notifications)."""

from gpuportal.settings.environment import env_float, env_int, env_list, env_str

# The currency of GPU prices; how often the rollup of yesterday and today runs.
METERING = {
    "CURRENCY": env_str("GPUPORTAL_CURRENCY", "USD"),
    "ROLLUP_INTERVAL_SECONDS": env_float("GPUPORTAL_ROLLUP_INTERVAL", 3600),
    # What-if runs (docs/metering-and-reports.md, "What-if runs"): the capacity advice sizes each model's addition
    # so that the 95th percentile wait of these task types stays under this many hours in the replayed month.
    "WHAT_IF_TARGET_P95_HOURS": env_float("GPUPORTAL_WHAT_IF_TARGET_P95_HOURS", 1.0),
    "WHAT_IF_PRODUCTION_TASK_TYPES": tuple(t.strip() for t in env_str(
        "GPUPORTAL_WHAT_IF_PRODUCTION_TASK_TYPES", "training,inference").split(",") if t.strip()),
}
# The monthly review pack (metering/review/render/): the font that draws Chinese (and every other text) in the PDF
# and its charts; the image carries Debian's fonts-wqy-microhei there. Missing: the PDF falls back to
# reportlab's built-in STSong-Light for Chinese (charts then lack Chinese glyphs).
REVIEW_PACK = {
    "CJK_FONT": env_str("GPUPORTAL_REVIEW_FONT", "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"),
}
# How long a request waits for a decision; idle reclamation defaults (IdlePolicy rows override them).
GOVERNANCE = {
    "REQUEST_TTL_HOURS": env_float("GPUPORTAL_REQUEST_TTL_HOURS", 72),
    "IDLE_THRESHOLD_PCT": env_int("GPUPORTAL_IDLE_THRESHOLD_PCT", 5),
    "IDLE_MINUTES": env_int("GPUPORTAL_IDLE_MINUTES", 60),
    "IDLE_GRACE_MINUTES": env_int("GPUPORTAL_IDLE_GRACE_MINUTES", 30),
    "IDLE_EXEMPT_TASK_TYPES": env_list("GPUPORTAL_IDLE_EXEMPT", "inference"),
    "IDLE_CHECK_INTERVAL_SECONDS": env_float("GPUPORTAL_IDLE_CHECK_INTERVAL", 300),
    # Older state changes (back-dated imports, the demo's history) are not announced.
    "NOTIFY_MAX_AGE_SECONDS": 900,
}
