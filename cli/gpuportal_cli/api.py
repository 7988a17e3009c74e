"""The portal's REST API over ``urllib``: JSON in and out, ``Authorization: Token …``, and every failure
turned into a ``CliError`` with a message a researcher can act on and an exit code a script can test."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from urllib.error import HTTPError, URLError
from urllib.parse import urlencode, urlsplit
from urllib.request import HTTPRedirectHandler, Request, build_opener

from . import __version__
from .config import TOKEN_VARIABLE
from .errors import CliError, ExitCode
from .i18n import accept_language
from .i18n import gettext_ as _

#: Keys of DRF error bodies that are about the whole request rather than one field.
GENERAL_KEYS = ("detail", "non_field_errors", "__all__")


class _NoRedirect(HTTPRedirectHandler):
    """A redirect means a wrong URL (``http`` for ``https``, a missing prefix): say so instead of following
    it, which would turn a POST into a GET and send the token to wherever it points."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = build_opener(_NoRedirect)


def error_lines(detail, field: str = "") -> list[str]:
    """DRF's error body as lines ``field: message`` (nested fields joined with dots)."""
    if isinstance(detail, dict):
        lines = []
        for key, value in detail.items():
            name = field if key in GENERAL_KEYS else (f"{field}.{key}" if field else str(key))
            lines += error_lines(value, name)
        return lines
    if isinstance(detail, list):
        return [line for item in detail for line in error_lines(item, field)]
    return [f"{field}: {detail}" if field else str(detail)]


class Portal:
    """One portal: its root URL and, once logged in, the token sent with every request."""

    def __init__(self, url: str, token: str = "", token_source: str = "", timeout: float = 30.0):
        self.url = url
        self.token = token
        self.token_source = token_source
        self.timeout = timeout

    # --- requests ---------------------------------------------------------------------------------------

    def get(self, path: str, query: dict | None = None, what: str = ""):
        return self.request("GET", path, query=query, what=what)

    def post(self, path: str, body: dict | None = None, headers: dict | None = None, what: str = ""):
        return self.request("POST", path, body=body if body is not None else {}, headers=headers, what=what)

    def request(self, method: str, path: str, query: dict | None = None, body: dict | None = None,
                headers: dict | None = None, what: str = "", authenticate: bool = True):
        """The decoded JSON answer (None for 204). ``what`` names the object for a 404's message."""
        url = path if path.startswith(("http://", "https://")) else self.url + path  # self.url: http(s) only
        if query:
            url += ("&" if "?" in url else "?") + urlencode(
                {k: v for k, v in query.items() if v not in (None, "", [])}, doseq=True)
        data = None if body is None else json.dumps(body).encode()
        request = Request(url, data=data, method=method, headers={  # noqa: S310 - scheme checked above
            "Accept": "application/json", "Accept-Language": accept_language(),
            "User-Agent": f"gpuportal-cli/{__version__}", **(headers or {})})
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if authenticate and self.token:
            request.add_header("Authorization", f"Token {self.token}")
        try:
            with _OPENER.open(request, timeout=self.timeout) as response:
                return self._decode(response.status, response.headers, response.read(), url)
        except HTTPError as exc:
            raise self._refusal(exc.code, exc.headers, exc.read(), url, what) from None
        except (URLError, http.client.HTTPException, OSError) as exc:
            raise self._unreachable(exc) from None

    def collect(self, path: str, query: dict | None = None, limit: int | None = None) -> dict:
        """Rows of a paginated list, following ``next`` until ``limit`` rows: ``{"count", "results"}``."""
        page = self.get(path, query={**(query or {}), "page_size": min(limit or 500, 500)})
        if not isinstance(page, dict) or "results" not in page:  # an endpoint without pagination
            rows = list(page or [])
            return {"count": len(rows), "results": rows[:limit] if limit else rows}
        rows, count = list(page["results"]), page.get("count", len(page["results"]))
        while page.get("next") and (limit is None or len(rows) < limit):
            page = self.get(page["next"])
            rows += page["results"]
        return {"count": count, "results": rows[:limit] if limit else rows}

    # --- what went wrong --------------------------------------------------------------------------------

    def _decode(self, status: int, headers, raw: bytes, url: str):
        if status == 204 or not raw:
            return None
        if "json" not in (headers.get("Content-Type") or ""):
            raise self._not_an_api(status, headers, url)
        try:
            return json.loads(raw)
        except ValueError:
            raise self._not_an_api(status, headers, url) from None

    def _not_an_api(self, status: int, headers, url: str) -> CliError:
        return CliError(_("%(url)s did not answer like a GPU Portal API (HTTP %(status)s, %(type)s): check the "
                          "portal URL (--url, %(var)s or `gpuportal login --url`): it is the address of the site, "
                          "e.g. https://gpus.example.org.") % {
            "url": url, "status": status, "type": headers.get("Content-Type") or _("no content type"),
            "var": "GPUPORTAL_URL"}, ExitCode.CONNECTION, status=status)

    def _unreachable(self, exc: Exception) -> CliError:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, socket.timeout | TimeoutError):
            reason = _("no answer within %(s)s s") % {"s": self.timeout}
        elif isinstance(reason, ssl.SSLError):
            reason = _("TLS error: %(e)s") % {"e": reason}
        return CliError(_("Cannot reach the portal at %(url)s (%(reason)s). Check the URL (--url, %(var)s or "
                          "`gpuportal login --url`) and your network.") % {
            "url": self.url, "reason": reason, "var": "GPUPORTAL_URL"}, ExitCode.CONNECTION)

    def _refusal(self, status: int, headers, raw: bytes, url: str, what: str) -> CliError:
        try:
            body = json.loads(raw) if "json" in (headers.get("Content-Type") or "") else None
        except ValueError:
            body = None
        if 300 <= status < 400:
            return CliError(_("The portal at %(url)s redirects to %(to)s: use that address as the portal URL.")
                            % {"url": self.url, "to": headers.get("Location", "?")}, ExitCode.CONNECTION, status)
        if body is None and status < 500:
            return self._not_an_api(status, headers, url)
        detail = "; ".join(error_lines(body)) if body is not None else ""
        if status == 401:
            return CliError(self._auth_message(), ExitCode.AUTH, status, body)
        if status == 404:
            thing = what or urlsplit(url).path
            return CliError(_("%(what)s was not found (or is not among what you may see).") % {"what": thing},
                            ExitCode.NOT_FOUND, status, body)
        if status in (400, 422):
            lines = error_lines(body)
            return CliError(_("The portal refused the request (HTTP %(status)s):") % {"status": status}
                            + "".join(f"\n  {line}" for line in lines), ExitCode.REFUSED, status, body)
        if status == 429 and headers.get("Retry-After"):
            detail += " " + _("Try again in %(s)s s.") % {"s": headers["Retry-After"]}
        if status >= 500:
            return CliError(_("The portal failed (HTTP %(status)s)%(detail)s; try again later or tell its "
                              "administrators.") % {"status": status, "detail": f": {detail}" if detail else ""},
                            ExitCode.REFUSED, status, body)
        return CliError(_("The portal refused the request (HTTP %(status)s): %(detail)s")
                        % {"status": status, "detail": detail}, ExitCode.REFUSED, status, body)

    def _auth_message(self) -> str:
        if not self.token:
            return _("Not logged in to %(url)s: run `gpuportal login --url %(url)s`.") % {"url": self.url}
        if self.token_source == "env":
            return _("The token in %(var)s was refused (expired, revoked or unknown): issue a new one on the "
                     "portal's token page or with `gpuportal login`.") % {"var": TOKEN_VARIABLE}
        return _("Your token for %(url)s was refused (expired, revoked or unknown): log in again with "
                 "`gpuportal login`.") % {"url": self.url}
