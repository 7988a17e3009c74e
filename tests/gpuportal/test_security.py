"""Security headers in every mode, no inline scripts, and CSV cells a spreadsheet cannot run."""

import csv
import io
import re

import pytest

from audit import log as audit
from audit.models import AuditAction
from gpuportal.text.exports import csv_lines, csv_text, safe_cell

pytestmark = pytest.mark.django_db

INLINE_HANDLER = re.compile(r"\son[a-z]+\s*=", re.IGNORECASE)
SCRIPT_TAG = re.compile(r"<script\b([^>]*)>", re.IGNORECASE)


def inline_scripts(html: str) -> list[str]:
    """Script tags that would execute code written in the page (neither a file nor a JSON data block)."""
    return [attrs for attrs in SCRIPT_TAG.findall(html) if "src=" not in attrs and "application/json" not in attrs]


def test_every_response_carries_the_policy_and_the_headers(client, users):
    client.login(username="alice", password="demo")
    for url in ("/", "/jobs/", "/accounts/login/", "/api/docs/"):
        response = client.get(url)
        policy = response["Content-Security-Policy"]
        for directive in ("default-src 'self'", "script-src 'self'", "object-src 'none'", "frame-ancestors 'none'",
                          "base-uri 'self'"):
            assert directive in policy, (url, policy)
        assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]
        assert response["X-Frame-Options"] == "DENY" and response["X-Content-Type-Options"] == "nosniff"
        assert response["Referrer-Policy"] == "same-origin"


def test_pages_and_the_api_docs_run_no_inline_code(client, users):
    client.login(username="dave", password="demo")
    for url in ("/", "/jobs/", "/queue/", "/reports/", "/reports/operations/", "/api/docs/", "/cluster/"):
        html = client.get(url).content.decode()
        assert inline_scripts(html) == [], url
        assert not INLINE_HANDLER.search(html), url
    script = client.get("/api/docs/?script=")
    assert script.status_code == 200 and script["Content-Type"].startswith("application/javascript")
    assert "SwaggerUIBundle" in script.content.decode()


@pytest.mark.parametrize(("value", "written"), [
    ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"),
    ("+1", "'+1"), ("-1+2", "'-1+2"), ("@SUM(A1)", "'@SUM(A1)"),
    ("\tcmd", "'\tcmd"), ("\rcmd", "'\rcmd"), ("vision", "vision"), ("", ""), (-3, -3), (2.5, 2.5), (None, None),
    ({"a": "=b"}, "{'a': '=b'}"),
])
def test_a_cell_that_a_spreadsheet_would_run_gets_a_quote(value, written):
    assert safe_cell(value) == written


def test_both_writers_escape_header_and_rows():
    text = csv_text(["name", "=h"], [["=1+1", 4]])
    assert list(csv.reader(io.StringIO(text))) == [["name", "'=h"], ["'=1+1", "4"]]
    streamed = "".join(csv_lines(["name"], [["@x"], ["ok"]]))
    assert list(csv.reader(io.StringIO(streamed))) == [["name"], ["'@x"], ["ok"]]


def test_audit_csv_export_escapes_formulas(client, users):
    audit.record(AuditAction.REPORT_REGENERATE, reason="=cmd|' /C calc'!A0", actor=users["admin"],
                 object_type="report", object_id="1", object_repr="-2+3")
    client.login(username="admin", password="demo")
    response = client.get("/audit/?format=csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    [row] = [r for r in rows if r["action"] == AuditAction.REPORT_REGENERATE]
    assert row["reason"] == "'=cmd|' /C calc'!A0" and row["object_repr"] == "'-2+3"
    assert all(not value.startswith(("=", "+", "-", "@", "\t", "\r")) for r in rows for value in r.values())
