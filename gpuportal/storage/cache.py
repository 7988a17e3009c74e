"""The shared cache (Redis) as a speed-up the portal can lose: when it stalls or is down, every operation answers
as a miss within a short timeout and the request goes on without it.

Why: the API throttles, the sessions (``cached_db``) and the page cache read the cache on most requests, and a
Redis that stopped answering (a failover, a ``CLIENT PAUSE``, a full network queue) made those requests fail
with a 500. Nothing the cache holds is needed for a correct answer: a throttle that cannot read its history
lets the request through, a session is read from the database, a page is rendered afresh.

How:

* Short socket timeouts (``GPUPORTAL_CACHE_TIMEOUT`` in the settings) bound what one operation can cost.
* After a failure this process leaves the cache alone for ``RETRY_SECONDS`` (every operation a miss at once):
  a request touches the cache half a dozen times, and a stalled cache should cost it one timeout, not six.
* A write that failed or was skipped may leave an older value in the cache: a session someone signed out of
  would still be found there once the cache is back. Those keys are deleted first thing when the cache
  answers again. Deleting a cache entry is always safe (the next read takes the database's value); what stays
  open is a process that ends before the cache comes back.
* Every failure that reached Redis is logged and counted (``gpuportal_cache_failures_total`` per operation).
  Skipped operations are not: with the pause above, a process counts about one failure per ``RETRY_SECONDS``
  during an outage, so the count (a database write) stays cheap and still measures how long it lasted.
"""

from __future__ import annotations

import logging
import threading
import time

import redis
from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache, RedisCacheClient

logger = logging.getLogger(__name__)

#: Seconds a connection attempt or a reply may take when the settings give none: Redis answers in well under a
#: millisecond, so this is an outage, not a slow answer.
DEFAULT_SOCKET_TIMEOUT = 0.25
#: Seconds a process leaves the cache alone after a failure, when the settings give none.
DEFAULT_RETRY_SECONDS = 1.0
#: Keys whose write could not be made, remembered for deletion; beyond this the oldest are forgotten (logged).
MAX_STALE_KEYS = 10_000

#: What redis-py raises when the server cannot be reached or does not answer in time (and any refusal by it).
ERRORS = (redis.RedisError, OSError)


class _Health:
    """One process's view of one cache server: until when it is left alone, and the keys to delete first."""

    def __init__(self):
        self.lock = threading.Lock()
        self.down_until = 0.0
        self.stale: dict[str, None] = {}  # an ordered set

    def mark_stale(self, keys) -> None:
        with self.lock:
            for key in keys:
                self.stale[key] = None
            overflow = len(self.stale) - MAX_STALE_KEYS
            for key in list(self.stale)[:max(overflow, 0)]:
                del self.stale[key]
        if overflow > 0:
            logger.error("Forgot %d shared-cache keys to delete after the outage; they expire on their own.",
                         overflow)

    def take_stale(self) -> list[str]:
        with self.lock:
            keys, self.stale = list(self.stale), {}
        return keys


_HEALTH: dict[str, _Health] = {}
_HEALTH_LOCK = threading.Lock()


def _health_of(servers) -> _Health:
    """Shared by every thread of the process (Django makes a cache object per thread)."""
    with _HEALTH_LOCK:
        return _HEALTH.setdefault(",".join(servers), _Health())


def _count(operation: str, error: Exception, retry_seconds: float) -> None:
    logger.warning("The shared cache failed (%s: %s); going on without it for %g s.", operation, error,
                   retry_seconds)
    from gpuportal.observability import telemetry  # not at import: the cache backend is loaded before the apps may be

    telemetry.guarded(lambda: telemetry.increment("gpuportal_cache_failures_total", operation=operation))


class _FAILED:
    """What an operation answers when it failed, where ``None`` is an answer of its own."""


class ResilientRedisCacheClient(RedisCacheClient):
    """Django's Redis client whose every operation answers as a miss when Redis cannot (see the module)."""

    def __init__(self, servers, retry_seconds: float = DEFAULT_RETRY_SECONDS, **options):
        options.setdefault("socket_timeout", DEFAULT_SOCKET_TIMEOUT)
        options.setdefault("socket_connect_timeout", DEFAULT_SOCKET_TIMEOUT)
        super().__init__(servers, **options)
        self._retry_seconds = retry_seconds
        self._health = _health_of(servers)

    def _run(self, operation: str, miss, written, call, *args):
        """``call(*args)``, or ``miss`` when the cache is down; ``written``: the keys it would change."""
        health = self._health
        if time.monotonic() < health.down_until:
            health.mark_stale(written)
            return miss
        stale = health.take_stale()
        try:
            if stale:
                try:
                    super().delete_many(stale)
                except ERRORS:
                    health.mark_stale(stale)
                    raise
            return call(*args)
        except ERRORS as error:
            health.down_until = time.monotonic() + self._retry_seconds
            health.mark_stale(written)
            _count(operation, error, self._retry_seconds)
            return miss

    def add(self, key, value, timeout):
        return self._run("add", False, [key], super().add, key, value, timeout)

    def get(self, key, default):
        return self._run("get", default, (), super().get, key, default)

    def set(self, key, value, timeout):
        self._run("set", None, [key], super().set, key, value, timeout)

    def touch(self, key, timeout):
        return self._run("touch", False, (), super().touch, key, timeout)

    def delete(self, key):
        return self._run("delete", False, [key], super().delete, key)

    def get_many(self, keys):
        return self._run("get_many", {}, (), super().get_many, keys)

    def has_key(self, key):
        return self._run("has_key", False, (), super().has_key, key)

    def incr(self, key, delta):
        value = self._run("incr", _FAILED, [key], super().incr, key, delta)
        if value is _FAILED:  # Django's answer for a key the cache does not have, which callers handle
            raise ValueError(f"Key '{key}' not found (the shared cache is unavailable).")
        return value

    def set_many(self, data, timeout):
        """The keys that could not be written (Django's contract for ``set_many``), none when all were."""
        failed = self._run("set_many", _FAILED, list(data), super().set_many, data, timeout)
        return list(data) if failed is _FAILED else []

    def delete_many(self, keys):
        self._run("delete_many", None, list(keys), super().delete_many, keys)

    def clear(self):
        return self._run("clear", False, (), super().clear)


class ResilientRedisCache(RedisCache):
    """``django.core.cache.backends.redis.RedisCache`` that degrades to a miss instead of raising.

    Settings: ``OPTIONS`` as for Django's (``socket_timeout`` and ``socket_connect_timeout`` default to
    ``DEFAULT_SOCKET_TIMEOUT``), and ``RETRY_SECONDS``, how long a process leaves the cache alone after a
    failure."""

    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = ResilientRedisCacheClient
        self._options = {**self._options,
                         "retry_seconds": float(params.get("RETRY_SECONDS", DEFAULT_RETRY_SECONDS))}

    def set_many(self, data, timeout=DEFAULT_TIMEOUT, version=None):
        if not data:
            return []
        made = {self.make_and_validate_key(key, version=version): key for key in data}
        failed = self._cache.set_many({key: data[original] for key, original in made.items()},
                                      self.get_backend_timeout(timeout))
        return [made[key] for key in failed]
