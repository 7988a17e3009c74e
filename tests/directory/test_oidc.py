"""OpenID Connect sign-in against a real provider (django-oauth-toolkit, in its own process for this module):
the authorization code flow with PKCE, endpoints from discovery, the groups claim mapped like LDAP groups,
logout at the provider, a provider that cannot be reached, and a browser signing in on the provider's page."""

import base64
import hashlib
import re
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.contrib.auth import get_user_model
from django.test import Client

from audit.models import AuditRecord
from directory import groups
from directory.models import AccountSource, DirectoryAccount
from tenants.models import Membership, PlatformRole, Role
from tests.conftest import launch_chromium, require_chromium
from tests.directory.servers import free_port
from tests.factories import make_tenant

User = get_user_model()
FAILED = "Signing in with Test provider did not succeed."


@pytest.fixture
def lab(oidc_sign_in):
    tenants = {name: make_tenant(name) for name in ("vision", "nlp")}
    groups.add_mapping("vision-researchers", tenant="vision", role=Role.RESEARCHER)
    groups.add_mapping("nlp-researchers", tenant="nlp", role=Role.RESEARCHER)
    groups.add_mapping("portal-managers", platform_role=PlatformRole.Kind.MANAGER)
    return tenants


def provider_sign_in(provider_session: requests.Session, authorize_url: str, username: str, password: str):
    """The person's side at the provider: its login page, then the authorization (consent is skipped for the
    portal); returns the provider's redirect back to the portal."""
    answer = provider_session.get(authorize_url, allow_redirects=False)
    if answer.status_code == 302 and "/accounts/login/" in answer.headers["Location"]:
        login_url = requests.compat.urljoin(authorize_url, answer.headers["Location"])
        form = provider_session.get(login_url)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
        next_url = parse_qs(urlsplit(login_url).query)["next"][0]
        answer = provider_session.post(login_url, data={"csrfmiddlewaretoken": token, "username": username,
                                                        "password": password, "next": next_url},
                                       allow_redirects=False)
        assert answer.status_code == 302, answer.text[:500]
        answer = provider_session.get(requests.compat.urljoin(authorize_url, answer.headers["Location"]),
                                      allow_redirects=False)
    assert answer.status_code == 302, answer.text[:500]
    return answer.headers["Location"]


def sign_in(username: str, password: str, client: Client | None = None, provider_session=None):
    """The whole flow: portal → provider (login page, authorization) → portal's callback."""
    client = client or Client()
    provider_session = provider_session or requests.Session()
    start = client.get("/oidc/authenticate/")
    assert start.status_code == 302
    back = provider_sign_in(provider_session, start["Location"], username, password)
    assert back.startswith("http://testserver/oidc/callback/?"), back
    done = client.get(back.removeprefix("http://testserver"))
    return client, start, done


def roles_of(username):
    return sorted(Membership.objects.filter(user__username=username).values_list("tenant__name", "role"))


@pytest.mark.django_db
def test_code_flow_with_pkce_creates_the_user_with_the_mapped_groups(lab, oidc_sign_in):
    client, start, done = sign_in("olga", "olga-password-1")
    authorize = urlsplit(start["Location"])
    assert f"{authorize.scheme}://{authorize.netloc}{authorize.path}" == f"{oidc_sign_in.issuer}/authorize/"
    query = parse_qs(authorize.query)
    assert query["response_type"] == ["code"] and query["code_challenge_method"] == ["S256"]
    assert set(query["scope"][0].split()) == {"openid", "email", "profile", "groups"}
    assert done.status_code == 302 and done["Location"] == "/", done.content[:300]
    olga = User.objects.get(directory_account__source=AccountSource.OIDC)
    assert (olga.username, olga.email, olga.is_active) == ("olga", "olga@provider.example", True)
    assert not olga.has_usable_password()
    account = DirectoryAccount.objects.get(user=olga)
    assert account.issuer == oidc_sign_in.issuer and account.identifier  # the provider's subject
    assert roles_of("olga") == [("vision", Role.RESEARCHER)]
    assert AuditRecord.objects.filter(actor_name="directory", action="membership.add").count() == 1
    assert client.get("/").status_code == 200
    assert "oidc_id_token" in client.session


@pytest.mark.django_db
def test_the_challenge_is_the_s256_of_the_verifier_the_callback_sends(lab, oidc_sign_in):
    client = Client()
    start = client.get("/oidc/authenticate/")
    state = parse_qs(urlsplit(start["Location"]).query)["state"][0]
    challenge = parse_qs(urlsplit(start["Location"]).query)["code_challenge"][0]
    verifier = client.session["oidc_states"][state]["code_verifier"]
    assert base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode() == challenge
    # A code presented without the session that holds its verifier signs nobody in.
    back = provider_sign_in(requests.Session(), start["Location"], "olga", "olga-password-1")
    stranger = Client()
    assert stranger.get(back.removeprefix("http://testserver")).status_code in (302, 400)
    assert not User.objects.filter(username="olga").exists()


@pytest.mark.django_db
def test_the_groups_claim_moves_memberships_at_the_next_sign_in(lab, oidc_sign_in):
    sign_in("pavel", "pavel-password-1")
    assert roles_of("pavel") == [("nlp", Role.RESEARCHER)]
    assert list(PlatformRole.objects.filter(user__username="pavel").values_list("role", flat=True)) == ["manager"]
    oidc_sign_in.set_groups("pavel", ["vision-researchers"])
    try:
        _client, _start, done = sign_in("pavel", "pavel-password-1")
        assert done.status_code == 302 and done["Location"] == "/"
        assert roles_of("pavel") == [("vision", Role.RESEARCHER)]
        assert not PlatformRole.objects.filter(user__username="pavel").exists()
        assert User.objects.filter(username__startswith="pavel").count() == 1  # the same person, by subject
    finally:
        oidc_sign_in.set_groups("pavel", ["nlp-researchers", "portal-managers"])


@pytest.mark.django_db
def test_logout_ends_the_portal_session_and_the_providers(lab, oidc_sign_in):
    provider_session = requests.Session()
    client, _start, _done = sign_in("quinn", "quinn-password-1", provider_session=provider_session)
    id_token = client.session["oidc_id_token"]
    answer = client.post("/accounts/logout/")
    assert answer.status_code == 200 and "no-store" in answer["Cache-Control"]
    provider_url = re.search(r'id="provider-logout" href="([^"]+)"', answer.content.decode()).group(1)
    provider_url = provider_url.replace("&amp;", "&")
    assert f'content="0;url={provider_url.replace("&", "&amp;")}"' in answer.content.decode()  # moves on by itself
    end_session = urlsplit(provider_url)
    assert f"{end_session.scheme}://{end_session.netloc}{end_session.path}" == f"{oidc_sign_in.issuer}/logout/"
    query = parse_qs(end_session.query)
    assert query["id_token_hint"] == [id_token]
    assert query["post_logout_redirect_uri"] == ["http://testserver/accounts/login/"]
    assert client.get("/").status_code == 302  # signed out of the portal
    # At the provider: signed out there too, and sent back to the portal's login page.
    at_provider = provider_session.get(provider_url, allow_redirects=False)
    assert at_provider.status_code == 302 and at_provider.headers["Location"] == "http://testserver/accounts/login/"
    again = provider_session.get(Client().get("/oidc/authenticate/")["Location"], allow_redirects=False)
    assert "/accounts/login/" in again.headers["Location"]  # the provider asks for the password again


@pytest.mark.django_db
def test_the_login_page_offers_the_provider_only_when_configured(lab, settings):
    page = Client().get("/accounts/login/?next=/jobs/").content.decode()
    assert 'href="/oidc/authenticate/?next=/jobs/"' in page and "Sign in with Test provider" in page
    settings.DIRECTORY = {**settings.DIRECTORY, "OIDC": None}
    assert "oidc-sign-in" not in Client().get("/accounts/login/").content.decode()
    assert Client().get("/oidc/authenticate/").status_code == 404


@pytest.mark.django_db
def test_an_unreachable_provider_is_said_so_on_the_login_page(lab, oidc_sign_in, settings):
    settings.DIRECTORY = {**settings.DIRECTORY, "OIDC": oidc_sign_in.settings(
        ISSUER=f"http://127.0.0.1:{free_port()}/o", TIMEOUT_SECONDS=2.0)}
    client = Client()
    answer = client.get("/oidc/authenticate/", follow=True)
    page = answer.content.decode()
    assert answer.status_code == 200 and answer.redirect_chain[-1][0] == "/accounts/login/"
    assert FAILED in page and "Traceback" not in page


@pytest.mark.django_db
def test_a_refused_authorization_comes_back_as_a_message(lab, oidc_sign_in):
    client = Client()
    state = parse_qs(urlsplit(client.get("/oidc/authenticate/")["Location"]).query)["state"][0]
    answer = client.get(f"/oidc/callback/?error=access_denied&state={state}", follow=True)
    assert answer.status_code == 200 and FAILED in answer.content.decode()
    assert not User.objects.filter(directory_account__isnull=False).exists()


@pytest.mark.browser
def test_a_browser_signs_in_on_the_providers_page(transactional_db, live_server, oidc_sign_in, monkeypatch):
    require_chromium()
    from playwright.sync_api import sync_playwright  # only the browser test needs Playwright

    make_tenant("vision")
    groups.add_mapping("vision-researchers", tenant="vision", role=Role.RESEARCHER)
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's loop runs in this thread
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            context = browser.new_context()
            elsewhere = []
            context.on("request", lambda r: elsewhere.append(r.url) if not r.url.startswith(
                (live_server.url, oidc_sign_in.base, "data:", "about:")) else None)
            page = context.new_page()
            page.set_default_timeout(15000)
            page.goto(f"{live_server.url}/accounts/login/")
            page.click("#oidc-sign-in")
            page.wait_for_url(f"{oidc_sign_in.base}/accounts/login/**")
            page.fill("#id_username", "quinn")
            page.fill("#id_password", "quinn-password-1")
            page.click("#provider-sign-in")
            page.wait_for_url(f"{live_server.url}/")
            assert "quinn" in page.inner_text(".who")
            # Log out: the portal, then the provider (RP-initiated logout), then back to the portal's login page.
            page.click(".who button[type=submit]")
            page.wait_for_url(f"{live_server.url}/accounts/login/")
            assert elsewhere == []  # nothing but the portal and the provider
        finally:
            browser.close()
    assert roles_of("quinn") == [("vision", Role.RESEARCHER)]
