"""The shared cache (Redis, ``GPUPORTAL_CACHE_URL``): throttle counts, sessions and the page cache.

It is a speed-up, never a dependency (gpuportal/storage/cache.py): an operation that gets no answer within
``GPUPORTAL_CACHE_TIMEOUT`` seconds is a miss (throttles let the request through, sessions come from the
database, pages are rendered afresh), and the process then leaves the cache alone for a second. Without it
each process keeps its own memory cache, which the others do not see."""

from gpuportal.settings.environment import env_float, env_int, env_is_set, env_str

_SHARED = env_is_set("GPUPORTAL_CACHE_URL")
_TIMEOUT = env_float("GPUPORTAL_CACHE_TIMEOUT", 0.25)

CACHES = {"default": {"BACKEND": "gpuportal.storage.cache.ResilientRedisCache",
                      "LOCATION": env_str("GPUPORTAL_CACHE_URL"),
                      "OPTIONS": {"socket_timeout": _TIMEOUT, "socket_connect_timeout": _TIMEOUT},
                      "RETRY_SECONDS": 1.0}} if _SHARED else {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# The dashboard and the API job list are kept this many seconds per session and dropped at once when the data
# under them changes (gpuportal.storage.pagecache): only in the shared cache, which the web processes and the workers
# all see; with a per-process cache nothing is kept.
PAGE_CACHE = {"SECONDS": env_int("GPUPORTAL_PAGE_CACHE_SECONDS", 10) if _SHARED else 0}
# Sessions read through the shared cache, written to both: one query less on every signed-in request.
SESSION_ENGINE = ("django.contrib.sessions.backends.cached_db" if _SHARED
                  else "django.contrib.sessions.backends.db")
