"""LDAP sign-in against a real OpenLDAP server (slapd, started for this module): first sign-in, groups mapped
to memberships, moves between groups at sign-in and by the sync, people disabled or gone losing access and
their API tokens, and what the login page says when the password is wrong or the directory is down."""

import json
import os
import subprocess
import sys
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from audit.models import AuditRecord
from directory import groups
from directory.models import AccountSource, DirectoryAccount, DirectoryGrant
from tenants.memberships import grant_membership
from tenants.models import Membership, PlatformRole, Role
from tests.directory.servers import GROUPS, ROOT, free_port, person_dn
from tests.factories import PASSWORD, make_tenant, make_user

pytestmark = pytest.mark.django_db

User = get_user_model()
WRONG_PASSWORD = "Your username and password didn't match. Please try again."
DIRECTORY_DOWN = "The directory could not be reached, so your password could not be checked."


@pytest.fixture
def lab(ldap_sign_in):
    """Tenants and the mapping: vision-researchers → vision/researcher, nlp-researchers → nlp/researcher,
    portal-managers → platform manager."""
    tenants = {name: make_tenant(name) for name in ("vision", "nlp", "speech")}
    groups.add_mapping(f"cn=vision-researchers,{GROUPS}", tenant="vision", role=Role.RESEARCHER)
    # Typed with spaces and capitals: compared in normal form.
    groups.add_mapping(f"CN=NLP-Researchers, {GROUPS}", tenant="nlp", role=Role.RESEARCHER)
    groups.add_mapping(f"cn=portal-managers,{GROUPS}", platform_role=PlatformRole.Kind.MANAGER)
    return tenants


def sign_in(username, password):
    client = Client()
    response = client.post("/accounts/login/", {"username": username, "password": password})
    return client, response


def roles_of(username):
    return sorted(Membership.objects.filter(user__username=username).values_list("tenant__name", "role"))


def directory_records(username, action):
    return AuditRecord.objects.filter(actor_name="directory", action=action, object_repr__startswith=username)


def test_first_sign_in_creates_the_user_with_the_mapped_memberships(lab, ldap_sign_in):
    assert not User.objects.filter(username="ada").exists()
    client, response = sign_in("ada", "ada-password-1")
    assert response.status_code == 302 and response["Location"] == "/"
    ada = User.objects.get(username="ada")
    assert (ada.first_name, ada.last_name, ada.email, ada.is_active) == ("Ada", "Lovelace", "ada@example.org", True)
    assert not ada.has_usable_password()  # the directory checks the password, not the portal
    assert roles_of("ada") == [("vision", Role.RESEARCHER)]
    account = DirectoryAccount.objects.get(user=ada)
    assert (account.source, account.identifier) == (AccountSource.LDAP, person_dn("ada"))
    assert DirectoryGrant.objects.filter(user=ada, tenant=lab["vision"], role=Role.RESEARCHER).exists()
    assert directory_records("ada", "membership.add").count() == 1
    assert client.get("/").status_code == 200  # signed in

    _client, response = sign_in("linus", "linus-password-1")
    assert response.status_code == 302
    assert list(PlatformRole.objects.filter(user__username="linus").values_list("role", flat=True)) == ["manager"]
    assert roles_of("linus") == []
    assert directory_records("linus", "platform_role.add").count() == 1


def test_moving_between_groups_moves_between_tenants_at_sign_in_and_by_the_sync(lab, ldap_sign_in):
    sign_in("grace", "grace-password-1")
    assert roles_of("grace") == [("nlp", Role.RESEARCHER)]
    # A membership an administrator made by hand is no business of the directory's.
    grace = User.objects.get(username="grace")
    grant_membership(grace, lab["speech"], Role.VIEWER)
    try:
        ldap_sign_in.remove_member("nlp-researchers", "grace")
        ldap_sign_in.add_member("vision-researchers", "grace")
        _client, response = sign_in("grace", "grace-password-1")
        assert response.status_code == 302
        assert roles_of("grace") == [("speech", Role.VIEWER), ("vision", Role.RESEARCHER)]
        assert directory_records("grace", "membership.remove").count() == 1

        ldap_sign_in.remove_member("vision-researchers", "grace")
        ldap_sign_in.add_member("nlp-researchers", "grace")
        call_command("sync_directory", stdout=StringIO())
        assert roles_of("grace") == [("nlp", Role.RESEARCHER), ("speech", Role.VIEWER)]
        assert directory_records("grace", "membership.remove").count() == 2
        assert directory_records("grace", "membership.add").count() == 3
    finally:  # the directory as the other tests expect it
        ldap_sign_in.remove_member("vision-researchers", "grace")
        ldap_sign_in.add_member("nlp-researchers", "grace")


def test_a_person_disabled_in_the_directory_loses_access_and_their_api_token(lab, ldap_sign_in):
    token = APIClient().post("/api/auth/token/", {"username": "hedy", "password": "hedy-password-1", "name": "ci"},
                             format="json").json()["token"]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    quotas = api.get("/api/quotas/")
    assert quotas.status_code == 200
    browser, _response = sign_in("hedy", "hedy-password-1")
    assert browser.get("/").status_code == 200
    try:
        ldap_sign_in.set_disabled("hedy", True)
        call_command("sync_directory", stdout=StringIO())
        hedy = User.objects.get(username="hedy")
        assert not hedy.is_active and DirectoryAccount.objects.get(user=hedy).disabled_by_directory
        assert roles_of("hedy") == []
        assert api.get("/api/quotas/").status_code == 401
        assert browser.get("/").status_code == 302  # the session ends at the next request
        assert directory_records("hedy", "user.deactivate").count() == 1
        # The right password no longer signs in, and the page says no more than for a wrong one.
        _client, response = sign_in("hedy", "hedy-password-1")
        assert response.status_code == 200 and WRONG_PASSWORD in response.content.decode()

        ldap_sign_in.set_disabled("hedy", False)  # enabled again: the directory had disabled them, it enables
        call_command("sync_directory", stdout=StringIO())
        assert User.objects.get(username="hedy").is_active and roles_of("hedy") == [("vision", Role.RESEARCHER)]
        assert api.get("/api/quotas/").status_code == 200
    finally:
        ldap_sign_in.set_disabled("hedy", False)


def test_a_person_removed_from_the_directory_loses_access_and_their_api_token(lab, ldap_sign_in):
    token = APIClient().post("/api/auth/token/", {"username": "ivan", "password": "ivan-password-1", "name": "ci"},
                             format="json").json()["token"]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert api.get("/api/quotas/").status_code == 200 and roles_of("ivan") == [("vision", Role.RESEARCHER)]
    local = make_user("local-lee", lab["speech"])  # never signed in through the directory: never visited
    ldap_sign_in.delete_person("ivan")  # the module's last use of ivan
    call_command("sync_directory", stdout=StringIO())
    assert not User.objects.get(username="ivan").is_active and roles_of("ivan") == []
    assert api.get("/api/quotas/").status_code == 401
    local.refresh_from_db()
    assert local.is_active and roles_of("local-lee") == [("speech", Role.RESEARCHER)]


def test_a_disabled_person_cannot_sign_in_even_the_first_time(lab, ldap_sign_in):
    _client, response = sign_in("mallory", "mallory-password-1")
    assert response.status_code == 200 and WRONG_PASSWORD in response.content.decode()
    assert not User.objects.get(username="mallory").is_active and roles_of("mallory") == []


def test_a_wrong_password_and_an_unknown_user_get_the_same_answer(lab, ldap_sign_in):
    answers = [sign_in("ada", "not-her-password")[1], sign_in("nobody-at-all", "whatever-password")[1]]
    for response in answers:
        page = response.content.decode()
        assert response.status_code == 200 and WRONG_PASSWORD in page and "Traceback" not in page
    assert _error_paragraph(answers[0]) == _error_paragraph(answers[1])
    assert not User.objects.filter(username="nobody-at-all").exists()


def _error_paragraph(response) -> str:
    page = response.content.decode()
    start = page.index('id="login-error"')
    return page[start:page.index("</p>", start)]


def test_an_unreachable_directory_is_said_so_on_the_login_page_and_the_sync_changes_nothing(lab, ldap_sign_in,
                                                                                             settings):
    sign_in("ada", "ada-password-1")
    make_user("alice", lab["vision"])  # a local account (the demo's)
    settings.DIRECTORY = {**settings.DIRECTORY, "LDAP": ldap_sign_in.settings(URI=f"ldap://127.0.0.1:{free_port()}")}
    answers = [sign_in("ada", "ada-password-1")[1], sign_in("nobody-at-all", "whatever-password")[1]]
    for response in answers:
        page = response.content.decode()
        assert response.status_code == 200 and DIRECTORY_DOWN in page and "Traceback" not in page
    assert _error_paragraph(answers[0]) == _error_paragraph(answers[1])
    # Local accounts still sign in while the directory is down.
    assert sign_in("alice", PASSWORD)[1].status_code == 302
    with pytest.raises(CommandError, match="nothing was changed"):
        call_command("sync_directory")
    assert User.objects.get(username="ada").is_active and roles_of("ada") == [("vision", Role.RESEARCHER)]


def test_local_sign_in_switched_off_leaves_platform_admins_a_way_in(lab, ldap_sign_in, settings):
    make_user("alice", lab["vision"])
    make_user("admin", None, [PlatformRole.Kind.PLATFORM_ADMIN])
    settings.DIRECTORY = {**settings.DIRECTORY, "LOCAL_LOGIN": False}
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS[:-1], "directory.local.BreakGlassBackend"]
    assert sign_in("alice", PASSWORD)[1].status_code == 200
    assert sign_in("admin", PASSWORD)[1].status_code == 302
    assert sign_in("ada", "ada-password-1")[1].status_code == 302  # the directory's people are not affected


def test_the_sync_task_and_command_report_what_changed(lab, ldap_sign_in):
    from directory.tasks import sync_directory  # the Celery task's body, run here

    sign_in("ada", "ada-password-1")
    groups.add_mapping(f"cn=everyone,{GROUPS}", tenant="speech", role=Role.VIEWER)
    report = sync_directory()
    assert report["added"] >= 1 and report["removed"] == 0 and report["people"] >= 1
    assert ("speech", Role.VIEWER) in roles_of("ada")
    assert DirectoryGrant.objects.filter(user__username="ada", tenant=lab["speech"]).exists()


def test_the_directory_actor_cannot_sign_in(lab, ldap_sign_in):
    sign_in("ada", "ada-password-1")  # creates the actor through the audit records
    actor = User.objects.get(username="directory")
    assert not actor.is_active and not actor.has_usable_password()
    assert sign_in("directory", "anything-at-all")[1].status_code == 200


def test_the_settings_block_reads_the_interface_variables(ldap_sign_in, tmp_path):
    """The GPUPORTAL_LDAP_* / GPUPORTAL_OIDC_* variables, read by gpuportal/settings/directory.py in a fresh process."""
    secret = tmp_path / "client-secret"
    secret.write_text("s3cret\n")
    environment = {**{k: v for k, v in os.environ.items() if not k.startswith("GPUPORTAL_")},
                   **ldap_sign_in.environment(), "GPUPORTAL_OIDC_ISSUER": "https://id.example.org/realms/lab/",
                   "GPUPORTAL_OIDC_CLIENT_ID": "portal", "GPUPORTAL_OIDC_CLIENT_SECRET_FILE": str(secret),
                   "GPUPORTAL_OIDC_GROUPS_CLAIM": "roles", "DJANGO_SETTINGS_MODULE": "gpuportal.settings"}
    script = ("import json; from django.conf import settings as s; "
              "print(json.dumps({'backends': s.AUTHENTICATION_BACKENDS, 'directory': s.DIRECTORY}))")
    answer = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=environment, capture_output=True, text=True,
                            check=True)
    loaded = json.loads(answer.stdout)
    assert loaded["backends"] == [
        "accounts.lockout.LockoutBackend", "directory.ldap.auth.LDAPDirectoryBackend",
        "directory.oidc.auth.OIDCDirectoryBackend", "django.contrib.auth.backends.ModelBackend"]
    assert loaded["directory"]["LDAP"] == ldap_sign_in.settings(CA_FILE=ldap_sign_in.ca_file, START_TLS=True,
                                                                TIMEOUT_SECONDS=5.0)
    assert loaded["directory"]["OIDC"]["ISSUER"] == "https://id.example.org/realms/lab"
    assert (loaded["directory"]["OIDC"]["CLIENT_SECRET"], loaded["directory"]["OIDC"]["GROUPS_CLAIM"]) == (
        "s3cret", "roles")
    environment.update(GPUPORTAL_LOCAL_LOGIN="0", GPUPORTAL_LDAP_URI="", GPUPORTAL_OIDC_ISSUER="")
    answer = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=environment, capture_output=True, text=True,
                            check=True)
    assert json.loads(answer.stdout)["backends"] == ["accounts.lockout.LockoutBackend",
                                                     "directory.local.BreakGlassBackend"]


@pytest.mark.parametrize("transport", ["ldaps", "starttls"])
def test_sign_in_over_tls_checks_the_directory_certificate_against_the_ca_file(lab, ldap_sign_in, settings,
                                                                              transport):
    secure = ldap_sign_in.settings(CA_FILE=ldap_sign_in.ca_file, **(
        {"URI": ldap_sign_in.ldaps_uri} if transport == "ldaps" else {"START_TLS": True}))
    settings.DIRECTORY = {**settings.DIRECTORY, "LDAP": secure}
    assert sign_in("ada", "ada-password-1")[1].status_code == 302
    assert roles_of("ada") == [("vision", Role.RESEARCHER)]
    call_command("sync_directory", stdout=StringIO())  # the sync's own connection uses TLS as well
    # Without the site's CA the certificate is not trusted: no password is sent, and the page says why.
    settings.DIRECTORY = {**settings.DIRECTORY, "LDAP": {**secure, "CA_FILE": ""}}
    response = sign_in("ada", "ada-password-1")[1]
    assert response.status_code == 200 and DIRECTORY_DOWN in response.content.decode()
    with pytest.raises(CommandError, match="nothing was changed"):
        call_command("sync_directory")

