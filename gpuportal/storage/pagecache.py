"""The busiest reads (the dashboard, the API job list) kept for a few seconds and dropped as soon as the data
under them changes.

Why: 20 people refreshing the dashboard cost 20 renders of the same figures; on a small control-plane host
that CPU is what the scheduler and the API need. Why it stays true: every cached answer is keyed by a *data
generation*, a counter in the shared cache that goes up after every committed change a page shows (a job
created or moving state, the scheduler's queue positions and reasons, quotas, memberships, nodes and GPUs);
the next read after a change misses and renders afresh. What has no hook (a reading that changes a node's
health in bulk, the clock moving relative times along) is bounded by the entry's lifetime,
``settings.PAGE_CACHE["SECONDS"]``.

Answers are kept per session (a page carries that session's CSRF token and the person's name), language and
time zone, and only for successful GETs that showed no one-time message and during whose drawing the generation
did not move (no reader would ask for them). Without a shared cache (the
embedded demo's per-process memory) nothing is kept: a worker's change could not reach the web processes.

The cache is never needed for a correct answer: when it is unreachable (gpuportal.storage.cache answers every operation
as a miss then) pages are rendered afresh and nothing is kept, and a change whose new generation could not be
started neither fails its transaction nor the request that made it.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import NamedTuple

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.http import HttpResponse
from django.utils import timezone, translation
from rest_framework.response import Response

logger = logging.getLogger(__name__)

GENERATION_KEY = "gpuportal:data-generation"


def enabled() -> bool:
    return settings.PAGE_CACHE["SECONDS"] > 0


def generation() -> int | None:
    """The current data generation; None when the cache keeps none (it is unreachable): nothing may be kept."""
    value = cache.get(GENERATION_KEY)
    return _restart() if value is None else value


def _restart() -> int | None:
    """Start an evicted (or never set) counter afresh, unless another process has just done so: theirs wins.
    None when neither was kept: the cache is unreachable, and an answer kept under an invented generation would
    only be junk written to it."""
    fresh = _fresh_start()
    return fresh if cache.add(GENERATION_KEY, fresh, timeout=None) else cache.get(GENERATION_KEY)


def _fresh_start() -> int:
    """A counter that was evicted restarts above every value it can have had (entries of an old generation
    may still be kept), so it starts from the clock in nanoseconds rather than from 1."""
    return time.time_ns()


def data_changed() -> None:
    """Call wherever a write changes what the cached pages show; takes effect when the transaction commits
    (at once outside one), so a reader never caches the old figures under the new generation.

    One new generation per transaction, however many of its writes call this: a job created or moving saves its
    row and an event, notifies its owner and calls this itself, five increments of the shared counter for one
    commit where one tells every reader the same."""
    if not enabled():
        return
    connection = transaction.get_connection()
    # The transaction's commit hooks as Django keeps them (a savepoint's rollback drops those it added): the first
    # change registered the bump, so the search ends near the start of the list.
    if connection.in_atomic_block and any(hook is _bump for _ids, hook, _robust in connection.run_on_commit):
        return
    transaction.on_commit(_bump)


def _bump() -> None:
    """Runs after a commit, among that transaction's other commit hooks: it must not raise, or the hooks after
    it (a pass asked for, a notification) would not run and the caller would see an error for a change that is
    stored."""
    try:
        try:
            cache.incr(GENERATION_KEY)
        except ValueError:  # the counter was evicted or never set (or the cache is unreachable): start afresh
            _restart()
    except Exception:  # the cache is down: entries expire within PAGE_CACHE["SECONDS"] anyway
        logger.warning("Could not bump the page-cache generation; cached pages expire on their own.", exc_info=True)


class _Key(NamedTuple):
    """Where an answer is kept, and the data generation it was looked up under."""

    name: str
    generation: int


def _key(request, name: str) -> _Key | None:
    current = generation()
    if current is None:
        return None
    person = "|".join((request.session.session_key or "", request.COOKIES.get(settings.CSRF_COOKIE_NAME, ""),
                       str(request.user.pk), request.get_full_path(), request.headers.get("Accept", "")))
    digest = hashlib.sha256(person.encode()).hexdigest()[:32]
    return _Key(f"page:{name}:{current}:{translation.get_language()}:{timezone.get_current_timezone_name()}:{digest}",
                current)


def _lookup(request, name: str):
    """(key, kept answer) — (None, None) when nothing may be kept (a message waits to be shown, e.g. after a
    redirect) or the cache is unreachable."""
    if not enabled() or request.method != "GET" or _messages_waiting(request):
        return None, None
    try:
        key = _key(request, name)
        return key, (cache.get(key.name) if key else None)
    except Exception:  # the cache is down: answer as if there were none
        logger.warning("Page cache unavailable; answering %s afresh.", name, exc_info=True)
        return None, None


def _messages_waiting(request) -> bool:
    storage = getattr(request, "_messages", None)
    return storage is not None and bool(len(storage))


def cached_page(request, name: str, render) -> HttpResponse:
    """``render()``'s response, or the one kept for this person, page and data generation."""
    key, kept = _lookup(request, name)
    if kept is not None:
        content, content_type = kept
        return HttpResponse(content, content_type=content_type)
    response = render()
    shown_messages = getattr(request, "_messages", None)
    if (key and response.status_code == 200 and not response.streaming and not response.cookies
            and not getattr(shown_messages, "used", False)):
        _keep(key, (response.content, response["Content-Type"]))
    return response


def cached_api(request, name: str, respond) -> Response:
    """``respond()``'s API answer, or the data kept for this caller, query and data generation; only a 200 is
    kept (a refused filter is answered afresh every time)."""
    key, kept = _lookup(request, name)
    if kept is not None:
        return Response(kept)
    response = respond()
    if key and response.status_code == 200:
        _keep(key, response.data)
    return response


def _keep(key: _Key, value) -> None:
    """Store an answer, unless the data changed while it was drawn: it is kept under the generation it was looked
    up under, which no reader asks for any more (on a busy cluster, where the generation moves many times a second,
    most answers), so storing it would only churn the cache. One that cannot be stored is simply not kept (the page
    was answered already)."""
    try:
        if cache.get(GENERATION_KEY) != key.generation:
            return
        cache.set(key.name, value, settings.PAGE_CACHE["SECONDS"])
    except Exception:
        logger.warning("Page cache unavailable; the answer is not kept.", exc_info=True)


def _changed(sender, **kwargs) -> None:
    if not kwargs.get("raw"):
        data_changed()


def watch(*models) -> None:
    """Every save and delete of ``models`` starts a new data generation (apps call this from ``ready()``:
    the layer below cannot name their models)."""
    for model in models:
        post_save.connect(_changed, sender=model, dispatch_uid=f"pagecache-save-{model._meta.label_lower}")
        post_delete.connect(_changed, sender=model, dispatch_uid=f"pagecache-delete-{model._meta.label_lower}")
