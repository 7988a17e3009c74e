"""One API client per cluster (kubeconfig path + context, or the in-cluster service account), and calls
with retries: 5xx, 429 and network errors are retried with exponential backoff; the last error is raised."""

from __future__ import annotations

import threading
import time

import urllib3
from django.conf import settings
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

RETRIABLE_STATUS = (429, 500, 502, 503, 504)
_clients: dict[tuple, client.ApiClient] = {}
_lock = threading.Lock()


class DispatchError(Exception):
    """The cluster refused or did not answer after every retry; the message is the API's."""


def api_client(cluster) -> client.ApiClient:
    key = (cluster.pk, cluster.kubeconfig_path, cluster.kube_context, cluster.in_cluster)
    with _lock:
        if key not in _clients:
            configuration = client.Configuration()
            if cluster.in_cluster:
                config.load_incluster_config(client_configuration=configuration)
            else:
                config.load_kube_config(config_file=cluster.kubeconfig_path or None,
                                        context=cluster.kube_context or None, client_configuration=configuration)
            configuration.connection_pool_maxsize = settings.KUBERNETES["CONNECTIONS"]
            configuration.retries = False  # ours below, with the backoff and the messages we want
            _clients[key] = client.ApiClient(configuration)
        return _clients[key]


def forget_clients() -> None:
    with _lock:
        _clients.clear()


def message_of(exc: Exception) -> str:
    if isinstance(exc, ApiException):
        import json

        try:
            detail = json.loads(exc.body or "{}").get("message", "")
        except ValueError:
            detail = (exc.body or "")[:300]
        return f"{exc.status} {exc.reason}: {detail}".strip().rstrip(":")
    return f"{type(exc).__name__}: {exc}"


def call(fn, *args, retries: int | None = None, **kwargs):
    """``fn(*args, **kwargs)`` with a request timeout, retried on 5xx, 429 and network errors."""
    retries = settings.KUBERNETES["RETRIES"] if retries is None else retries
    backoff = settings.KUBERNETES["BACKOFF_SECONDS"]
    kwargs.setdefault("_request_timeout", settings.KUBERNETES["REQUEST_TIMEOUT_SECONDS"])
    for attempt in range(retries + 1):
        try:
            return fn(*args, **kwargs)
        except ApiException as exc:
            if exc.status not in RETRIABLE_STATUS or attempt == retries:
                raise
        except (urllib3.exceptions.HTTPError, OSError):
            if attempt == retries:
                raise
        time.sleep(backoff * 2 ** attempt)
    raise AssertionError("unreachable")


def _drain(response) -> None:
    """Read an unparsed reply (``_preload_content=False``) and give its connection back to the pool."""
    if hasattr(response, "release_conn"):
        response.data  # noqa: B018 - reading it is the point
        response.release_conn()


def create(fn, *args, **kwargs) -> bool:
    """Create an object; an existing one (409) is an earlier try that succeeded. True when created now."""
    try:
        _drain(call(fn, *args, **kwargs))
        return True
    except ApiException as exc:
        if exc.status == 409:
            return False
        raise


def delete(fn, *args, **kwargs) -> bool:
    """Delete an object; one already gone (404) is fine. True when deleted now."""
    try:
        _drain(call(fn, *args, **kwargs))
        return True
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
