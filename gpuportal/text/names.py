"""Names the portal gives things outside itself, where two different names of ours must not become one.

Why here, at the bottom: a Kubernetes namespace is named after its tenant (``scheduling``'s manifests), and a
tenant is refused at creation when its name would map to another tenant's namespace (``tenants``): both must
apply the very same mapping, or "ml_lab" and "ml-lab" would share one namespace and see each other's pods.
"""

from __future__ import annotations

import re


def dns_label(text: str, limit: int = 63) -> str:
    """``text`` as a DNS label (RFC 1123: lower-case letters, digits and hyphens, at most 63 characters)."""
    label = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return label[:limit].rstrip("-") or "x"
