"""Which addresses the portal may contact agents at: inside ``AGENTS["NETWORKS"]``, never link-local, loopback
only when a configured network is itself loopback.

The portal sends a node's token to its agent at every poll, and shows what the agent answered, so an agent URL
must not lead anywhere else (the cloud metadata service, the portal's own host). Registration checks the URL
with ``address_problem`` for every address its host resolves to; the poller checks again at every poll, because
a host name may resolve elsewhere by then (DNS rebinding), and connects only to the address it checked.
"""

from __future__ import annotations

import ipaddress
import socket

from django.conf import settings
from django.utils.translation import gettext as _


def agent_networks() -> list:
    """``AGENTS["NETWORKS"]`` parsed; a typo in the setting must fail loudly, not accept everything."""
    return [ipaddress.ip_network(text, strict=False) for text in settings.AGENTS["NETWORKS"]]


def resolve(host: str) -> list:
    """Every address ``host`` stands for (the literal, or all that DNS gives, in its order, once each),
    IPv4-mapped ones unwrapped; [] when it does not resolve."""
    try:
        found = [ipaddress.ip_address(host.split("%", 1)[0])]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError):
            return []
        found = [ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in infos]
    return list(dict.fromkeys(getattr(a, "ipv4_mapped", None) or a for a in found))


def address_problem(address, networks: list) -> str:
    """Why the portal must not contact an agent at ``address`` ("" when it may)."""
    if address.is_link_local:  # 169.254.0.0/16 and fe80::/10: the cloud metadata service lives there
        return _("Agent URLs may not point to link-local addresses such as %(address)s "
                 "(169.254.0.0/16, fe80::/10: cloud metadata).") % {"address": address}
    if address.is_loopback and not any(n.is_loopback for n in networks):
        return _("Agent URLs may not point to loopback addresses such as %(address)s unless "
                 "GPUPORTAL_AGENT_NETWORKS includes a loopback network.") % {"address": address}
    if address.is_unspecified or address.is_multicast:
        return _("Agent URLs may not point to %(address)s.") % {"address": address}
    if not any(address in n for n in networks if n.version == address.version):
        return _("The address %(address)s of the agent URL is outside the agent networks "
                 "(GPUPORTAL_AGENT_NETWORKS: %(networks)s).") % {
            "address": address, "networks": ", ".join(str(n) for n in networks) or _("none")}
    return ""
