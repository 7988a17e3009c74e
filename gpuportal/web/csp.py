"""The Content-Security-Policy header on every response.

Why a header and no inline code: a script an attacker manages to inject into a page (a job name, an audit
reason) does not run when the browser only executes scripts loaded from the site's own files. The policy is
one dictionary in ``settings.CONTENT_SECURITY_POLICY``; a view that needs another may set the header itself,
and this middleware leaves it alone.
"""

from __future__ import annotations

from django.conf import settings

HEADER = "Content-Security-Policy"


def policy_text(policy: dict[str, str]) -> str:
    """``{"default-src": "'self'"}`` -> ``"default-src 'self'"`` (directives in the dictionary's order)."""
    return "; ".join(f"{directive} {sources}".strip() for directive, sources in policy.items())


class ContentSecurityPolicyMiddleware:
    """Adds the configured policy to every response that has none yet (HTML, API, static files alike)."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.header = policy_text(settings.CONTENT_SECURITY_POLICY)

    def __call__(self, request):
        response = self.get_response(request)
        if self.header and HEADER not in response:
            response[HEADER] = self.header
        return response
