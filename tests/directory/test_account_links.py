"""A directory identity never takes over an account: sign-in (a real slapd, a real OpenID Connect provider, both
started for this module) lands only in the account linked to that identity or in a new one. An existing
account of that name, one linked to another identity, and a superuser's are refused with a message on the
login page and an audit record; a platform admin links accounts explicitly with ``manage.py link_account``."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from audit.models import AuditAction, AuditRecord
from directory import groups
from directory.models import AccountSource, DirectoryAccount
from tenants.models import Membership, Role
from tests.directory.servers import GROUPS, person_dn
from tests.directory.test_oidc import sign_in as oidc_flow
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db

User = get_user_model()
REFUSED = "is not linked to your directory account, so you were not signed in to it"
LOCAL_PASSWORD = "local-password-1"


@pytest.fixture
def vision():
    tenant = make_tenant("vision")
    groups.add_mapping(f"cn=vision-researchers,{GROUPS}", tenant="vision", role=Role.RESEARCHER)
    groups.add_mapping("vision-researchers", tenant="vision", role=Role.RESEARCHER)
    return tenant


def ldap_login(username, password):
    client = Client()
    return client, client.post("/accounts/login/", {"username": username, "password": password})


def signed_in_as(client):
    response = client.get("/")
    return None if response.status_code != 200 else User.objects.get(pk=client.session["_auth_user_id"])


def refusals(username):
    return AuditRecord.objects.filter(action=AuditAction.DIRECTORY_LINK_REFUSED, object_repr=username)


def roles_of(user):
    return sorted(Membership.objects.filter(user=user).values_list("tenant__name", "role"))


# -- LDAP ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("superuser", [True, False], ids=["superuser", "local-account"])
def test_ldap_never_takes_over_a_local_account_of_the_same_name(ldap_sign_in, vision, superuser):
    create = User.objects.create_superuser if superuser else User.objects.create_user
    local = create("ada", "ada@local.example", LOCAL_PASSWORD)

    client, response = ldap_login("ada", "ada-password-1")  # the directory's ada, her directory password
    page = response.content.decode()
    assert response.status_code == 200 and REFUSED in page and "ada" in page
    assert signed_in_as(client) is None
    local.refresh_from_db()  # untouched: not renamed, not re-mailed, not linked, no memberships
    assert (local.first_name, local.email, local.is_superuser) == ("", "ada@local.example", superuser)
    assert not DirectoryAccount.objects.exists() and roles_of(local) == []
    record = refusals("ada").get()
    assert (record.actor_name, record.object_id, record.object_type) == ("directory", str(local.pk), "auth.user")
    assert record.after == {"source": "ldap", "issuer": "", "identifier": person_dn("ada")}
    # The local account's own password still signs its owner in.
    client, response = ldap_login("ada", LOCAL_PASSWORD)
    assert response.status_code == 302 and signed_in_as(client) == local


def test_ldap_does_not_relink_an_account_of_another_identity(ldap_sign_in, vision):
    hedy = User.objects.create_user("hedy", "hedy@provider.example")
    DirectoryAccount.objects.create(user=hedy, source=AccountSource.OIDC, issuer="https://id.example.org",
                                    identifier="subject-of-hedy")
    client, response = ldap_login("hedy", "hedy-password-1")
    assert response.status_code == 200 and REFUSED in response.content.decode() and signed_in_as(client) is None
    account = DirectoryAccount.objects.get(user=hedy)
    assert (account.source, account.identifier) == (AccountSource.OIDC, "subject-of-hedy")
    assert refusals("hedy").count() == 1


def test_ldap_refuses_an_account_made_a_superuser_after_it_was_linked(ldap_sign_in, vision):
    client, _response = ldap_login("ivan", "ivan-password-1")
    ivan = signed_in_as(client)
    assert ivan.username == "ivan" and roles_of(ivan) == [("vision", Role.RESEARCHER)]
    User.objects.filter(pk=ivan.pk).update(is_superuser=True)
    client, response = ldap_login("ivan", "ivan-password-1")
    assert response.status_code == 200 and REFUSED in response.content.decode() and signed_in_as(client) is None
    assert refusals("ivan").get().reason == "the account is a superuser's"


def test_a_platform_admin_links_an_account_and_ldap_sign_in_lands_there(ldap_sign_in, vision):
    grace = User.objects.create_user("grace.hopper", "grace@local.example", LOCAL_PASSWORD)
    out = StringIO()
    call_command("link_account", "grace.hopper", "--source", "ldap", "--identifier",
                 "UID=grace, ou=people,dc=example,dc=org", stdout=out)  # typed loosely: compared in normal form
    assert "Linked grace.hopper" in out.getvalue()
    record = AuditRecord.objects.get(action=AuditAction.DIRECTORY_LINK)
    assert (record.object_id, record.before) == (str(grace.pk), None)
    assert record.after == {"source": "ldap", "issuer": "", "identifier": person_dn("grace")}

    client, response = ldap_login("grace", "grace-password-1")
    assert response.status_code == 302 and signed_in_as(client) == grace
    assert not User.objects.filter(username="grace").exists()  # no second account

    root = User.objects.create_superuser("root", "root@local.example", LOCAL_PASSWORD)
    with pytest.raises(CommandError, match="superuser"):
        call_command("link_account", "root", "--source", "ldap", "--identifier", person_dn("karen"))
    other = User.objects.create_user("someone-else")
    with pytest.raises(CommandError, match="linked to another account"):
        call_command("link_account", "someone-else", "--source", "ldap", "--identifier", person_dn("grace"))
    assert not DirectoryAccount.objects.filter(user__in=[root, other]).exists()
    assert AuditRecord.objects.filter(action=AuditAction.DIRECTORY_LINK).count() == 1


# -- OpenID Connect --------------------------------------------------------------------------------------------

def oidc_refused(client, done):
    """The callback sent the browser back to the login page, which says why; nobody is signed in."""
    assert done.status_code == 302 and done["Location"] == "/accounts/login/", done.content[:300]
    page = client.get("/accounts/login/").content.decode()
    assert REFUSED in page and signed_in_as(client) is None


def test_oidc_refuses_a_taken_name_and_an_admin_links_it(oidc_sign_in, vision):
    pavel = User.objects.create_user("pavel", "pavel@local.example", LOCAL_PASSWORD)
    client, _start, done = oidc_flow("pavel", "pavel-password-1")
    oidc_refused(client, done)
    assert list(User.objects.filter(username__startswith="pavel")) == [pavel]  # no pavel-1a2b3c4d beside it
    assert not DirectoryAccount.objects.exists()
    record = refusals("pavel").get()
    assert (record.after["source"], record.after["issuer"]) == ("oidc", oidc_sign_in.issuer)

    # The refusal names the subject; the admin, who knows it is the same person, links the two.
    call_command("link_account", "pavel", "--source", "oidc", "--identifier", record.after["identifier"],
                 stdout=StringIO())
    client, _start, done = oidc_flow("pavel", "pavel-password-1")
    assert done.status_code == 302 and done["Location"] == "/" and signed_in_as(client) == pavel


def test_oidc_refuses_an_account_made_a_superuser_after_it_was_linked(oidc_sign_in, vision):
    client, _start, done = oidc_flow("quinn", "quinn-password-1")
    quinn = signed_in_as(client)
    assert quinn.username == "quinn" and roles_of(quinn) == [("vision", Role.RESEARCHER)]
    User.objects.filter(pk=quinn.pk).update(is_superuser=True, email="root@local.example")
    client, _start, done = oidc_flow("quinn", "quinn-password-1")
    oidc_refused(client, done)
    assert User.objects.get(pk=quinn.pk).email == "root@local.example"  # not updated from the claims either
    assert refusals("quinn").get().reason == "the account is a superuser's"
