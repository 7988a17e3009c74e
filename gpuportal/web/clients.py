"""Who is on the other end of a request: the one rule for the client's address.

Why one rule: the audit log records it, the API throttles and the sign-in lockout count per address, and the
readiness probe shows its details only to a local caller. Behind a reverse proxy every request arrives from the
proxy's address; believing ``X-Forwarded-For`` from anyone would let a client forge its address (and so skip a
throttle or lock somebody else out). So ``X-Forwarded-For`` is read only when the peer is one of the
``TRUSTED_PROXIES`` (``GPUPORTAL_TRUSTED_PROXIES``), and then only its right-most address outside that set.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings


def _trusted(address, proxies) -> bool:
    return any(address in network for network in proxies)


def client_address(meta) -> str:
    """The client's address: ``REMOTE_ADDR``, unless that is a trusted proxy, whose ``X-Forwarded-For`` then
    names the client as its right-most address outside the trusted set (each proxy appends its peer, so
    everything left of that may have been written by the client itself and is ignored)."""
    remote = meta.get("REMOTE_ADDR", "") or ""
    proxies = settings.TRUSTED_PROXIES
    try:
        if not proxies or not _trusted(ipaddress.ip_address(remote), proxies):
            return remote
    except ValueError:
        return remote
    nearest = remote
    for hop in reversed([h.strip() for h in meta.get("HTTP_X_FORWARDED_FOR", "").split(",") if h.strip()]):
        try:
            address = ipaddress.ip_address(hop)
        except ValueError:
            return nearest  # not written by a proxy of ours: the nearest trusted hop is all that is known
        if not _trusted(address, proxies):
            return str(address)
        nearest = str(address)
    return nearest


def request_address(request) -> str:
    """``client_address`` of a request (the form django-axes calls: ``AXES_CLIENT_IP_CALLABLE``)."""
    return client_address(request.META)


def is_local(request) -> bool:
    """A caller on this host that no proxy forwarded: a probe or an operator's curl, not a user behind the
    site's reverse proxy (which adds ``X-Forwarded-For``)."""
    if request.META.get("HTTP_X_FORWARDED_FOR"):
        return False
    try:
        return ipaddress.ip_address(client_address(request.META)).is_loopback
    except ValueError:
        return False
