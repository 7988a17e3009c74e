"""Notebooks and services on an origin of their own.

They are served only on ``GPUPORTAL_WORKLOAD_ORIGIN`` (scheme://host[:port]), never on the portal's own origin,
so that nothing a tenant put in a workload runs as the portal (scheduling/workloads/origin.py): a host name of its
own, not the portal's; "https://*.apps.example.org" gives each workload a host of its own (a
wildcard DNS name and certificate). The embedded demo serves them on a second port; production has no default
(without one, notebooks and services cannot be opened). The origin's host joins ALLOWED_HOSTS."""

from urllib.parse import urlsplit

from gpuportal.settings.environment import env_file, env_float, env_int, env_str, misconfigured


def workload_settings(default_origin: str, *, portal_url: str, separate_host: bool) -> dict:
    """``separate_host``: refuse an origin on the portal's own host name (production). The embedded demo serves
    both on 127.0.0.1, on two ports, where no one else's cookies are at stake."""
    workloads = {
        "ORIGIN": env_str("GPUPORTAL_WORKLOAD_ORIGIN", default_origin).rstrip("/"),
        # The sign-in ticket's lifetime (it is good for one use) and the workload cookie's.
        "TICKET_SECONDS": env_int("GPUPORTAL_WORKLOAD_TICKET_SECONDS", 60),
        "COOKIE_MAX_AGE": int(env_float("GPUPORTAL_WORKLOAD_COOKIE_HOURS", 12) * 3600),
        # What an ingress's auth subrequest sends in X-Gpuportal-Ingress-Auth to be given a notebook's token, from
        # a file; empty: no ingress is given one.
        "INGRESS_AUTH_SECRET": env_file("GPUPORTAL_INGRESS_AUTH_SECRET_FILE"),
    }
    if workloads["ORIGIN"]:
        origin = urlsplit(workloads["ORIGIN"])
        if (origin.scheme not in ("http", "https") or not origin.hostname or origin.path or origin.query
                or "*" in origin.hostname.removeprefix("*.")):
            raise misconfigured("GPUPORTAL_WORKLOAD_ORIGIN", "be scheme://host[:port] (http or https, no path), e.g. "
                                "https://apps.portal.example.org or https://*.apps.portal.example.org")
        # Cookies ignore ports: on the portal's host name, the portal's CSRF cookie would be readable there.
        if separate_host and workload_host(workloads).lstrip(".") == (urlsplit(portal_url).hostname or ""):
            raise misconfigured("GPUPORTAL_WORKLOAD_ORIGIN", "have a host name of its own, not the portal's "
                                "(GPUPORTAL_URL)")
    return workloads


def workload_host(workloads: dict) -> str:
    """The ALLOWED_HOSTS entry of the workload origin: its host name, or ".apps.example.org" (each workload's host)
    for a wildcard origin; "" without an origin."""
    return (urlsplit(workloads["ORIGIN"]).hostname or "").removeprefix("*") if workloads["ORIGIN"] else ""


def with_workload_host(hosts: list[str], workloads: dict) -> list[str]:
    """``hosts`` and the workload origin's host, unless it is there already (or "*" allows every host)."""
    host = workload_host(workloads)
    return [*hosts, host] if host and host not in hosts and "*" not in hosts else hosts
