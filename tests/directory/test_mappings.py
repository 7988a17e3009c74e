"""The group mapping: its normal form, the page platform admins edit it on, and ``manage.py map_group``. No
directory server is needed: sign-in against the real ones is in test_ldap.py and test_oidc.py."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from audit.models import AuditAction, AuditRecord
from directory import groups
from directory.groups import access_for_groups, normalize_group
from directory.models import GroupMapping
from tenants.models import PlatformRole, Role
from tests.factories import PASSWORD, make_tenant, make_user

pytestmark = pytest.mark.django_db

VISION_DN = "cn=vision-researchers,ou=groups,dc=example,dc=org"


@pytest.fixture
def tenants():
    return {name: make_tenant(name) for name in ("vision", "nlp")}


def client_for(user):
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


@pytest.fixture
def admin_client(tenants):
    return client_for(make_user("admin", None, [PlatformRole.Kind.PLATFORM_ADMIN]))


def test_groups_are_compared_in_normal_form():
    assert normalize_group("CN=Vision-Researchers, OU=Groups,  dc=example,dc=org ") == VISION_DN
    assert normalize_group(VISION_DN) == VISION_DN
    assert normalize_group(" Vision-Researchers ") == "vision-researchers"  # a groups-claim value
    assert normalize_group("/lab/vision") == "/lab/vision"
    assert normalize_group("Team=Vision, Lab") == "team=vision, lab"  # looks like a DN, is not one


def test_a_set_of_groups_grants_what_their_mappings_say(tenants):
    groups.add_mapping(VISION_DN, tenant="vision", role=Role.RESEARCHER)
    groups.add_mapping(VISION_DN, tenant="vision", role=Role.APPROVER)
    groups.add_mapping("portal-auditors", platform_role=PlatformRole.Kind.AUDITOR)
    granted = access_for_groups(["CN=Vision-Researchers,ou=groups,dc=example,dc=org", "Portal-Auditors", "other"])
    assert granted.memberships == {(tenants["vision"].pk, Role.RESEARCHER), (tenants["vision"].pk, Role.APPROVER)}
    assert granted.platform_roles == {PlatformRole.Kind.AUDITOR}
    assert access_for_groups(["other"]).memberships == frozenset()


def test_platform_admins_list_add_and_remove_mappings(admin_client):
    page = admin_client.get("/directory/groups/")
    assert page.status_code == 200 and "No group is mapped yet." in page.content.decode()
    answer = admin_client.post("/directory/groups/", {"group": VISION_DN, "tenant": "vision", "role": "researcher"})
    assert answer.status_code == 302 and answer["Location"] == "/directory/groups/"
    answer = admin_client.post("/directory/groups/", {"group": "portal-managers", "platform_role": "manager"})
    assert answer.status_code == 302
    page = admin_client.get("/directory/groups/").content.decode()
    assert VISION_DN in page and "portal-managers" in page and "Manager (all tenants, read-only)" in page
    mapping = GroupMapping.objects.get(group="portal-managers")
    assert admin_client.post(f"/directory/groups/{mapping.pk}/remove/").status_code == 302
    assert list(GroupMapping.objects.values_list("group", flat=True)) == [VISION_DN]
    assert admin_client.get(f"/directory/groups/{mapping.pk}/remove/").status_code == 405


@pytest.mark.parametrize(("form", "field", "message"), [
    ({"group": "", "tenant": "vision", "role": "researcher"}, "group", "This field is required."),
    ({"group": "   ", "tenant": "vision", "role": "researcher"}, "group", "This field is required."),
    ({"group": "g", "tenant": "", "role": "researcher"}, "tenant", "Give a tenant"),
    ({"group": "g", "tenant": "vision", "role": ""}, "role", "Choose a role"),
    ({"group": "g", "tenant": "vision", "role": "researcher", "platform_role": "manager"}, "platform_role",
     "not both"),
    ({"group": "g", "tenant": "nowhere", "role": "researcher"}, "tenant", "Select a valid choice"),
    ({"group": "g", "platform_role": "emperor"}, "platform_role", "Select a valid choice"),
    ({"group": "g" * 501, "platform_role": "manager"}, "group", "at most 500 characters"),
])
def test_a_refused_mapping_is_a_400_that_keeps_what_was_typed(admin_client, form, field, message):
    answer = admin_client.post("/directory/groups/", form)
    page = answer.content.decode()
    assert answer.status_code == 400 and message in page and f'id="error-{field}"' in page
    if form["group"].strip():
        assert f'value="{form["group"]}"' in page
    assert not GroupMapping.objects.exists()


def test_the_same_mapping_twice_is_refused(admin_client):
    form = {"group": VISION_DN, "tenant": "vision", "role": "researcher"}
    assert admin_client.post("/directory/groups/", form).status_code == 302
    again = admin_client.post("/directory/groups/", {**form, "group": VISION_DN.upper()})
    assert again.status_code == 400 and "already mapped" in again.content.decode()
    assert GroupMapping.objects.count() == 1


def test_only_platform_admins_see_the_page(tenants):
    researcher = client_for(make_user("alice", tenants["vision"], [Role.TENANT_ADMIN]))
    assert researcher.get("/directory/groups/").status_code == 403
    assert researcher.post("/directory/groups/", {"group": "g", "platform_role": "manager"}).status_code == 403
    assert Client().get("/directory/groups/").status_code == 302  # to the login page
    assert not GroupMapping.objects.exists()


def test_map_group_command(tenants):
    out = StringIO()
    call_command("map_group", VISION_DN, "--tenant", "vision", "--role", "researcher", stdout=out)
    call_command("map_group", "portal-auditors", "--platform-role", "auditor", stdout=out)
    assert "Mapped" in out.getvalue()
    assert set(GroupMapping.objects.values_list("group_key", "tenant__name", "role", "platform_role")) == {
        (VISION_DN, "vision", "researcher", ""), ("portal-auditors", None, "", "auditor")}
    with pytest.raises(CommandError, match="There is no tenant named nowhere"):
        call_command("map_group", "g", "--tenant", "nowhere", "--role", "researcher")
    with pytest.raises(CommandError, match="platform_role: Unknown platform role"):
        call_command("map_group", "g", "--platform-role", "emperor")
    listing = StringIO()
    call_command("map_group", "--list", stdout=listing)
    assert VISION_DN in listing.getvalue() and "portal-auditors" in listing.getvalue()
    call_command("map_group", "CN=Vision-Researchers, ou=groups,dc=example,dc=org", "--tenant", "vision", "--role",
                 "researcher", "--remove", stdout=out)
    assert list(GroupMapping.objects.values_list("group", flat=True)) == ["portal-auditors"]
    with pytest.raises(CommandError, match="no such mapping"):
        call_command("map_group", VISION_DN, "--tenant", "vision", "--role", "researcher", "--remove")


def mapping_records():
    return list(AuditRecord.objects.filter(action=AuditAction.DIRECTORY_MAPPING_CHANGE).order_by("seq").values_list(
        "actor_name", "before", "after"))


def test_every_change_of_a_mapping_is_audited_whoever_makes_it(admin_client, tenants):
    """A mapping decides who becomes a tenant member or a platform admin: adding, changing and removing one is
    an audit record with what it was and what it became, from the page (its admin), a command or code."""
    vision = tenants["vision"].pk
    admin_client.post("/directory/groups/", {"group": VISION_DN, "tenant": "vision", "role": "researcher"})
    mapping = GroupMapping.objects.get()
    mapping.role = Role.APPROVER
    mapping.save()
    call_command("map_group", "portal-admins", "--platform-role", "platform_admin", stdout=StringIO())
    call_command("map_group", "portal-admins", "--platform-role", "platform_admin", "--remove", stdout=StringIO())
    admin_client.post(f"/directory/groups/{mapping.pk}/remove/")
    researcher = {"group": VISION_DN, "tenant": vision, "role": "researcher", "platform_role": ""}
    approver = {**researcher, "role": "approver"}
    admins = {"group": "portal-admins", "tenant": None, "role": "", "platform_role": "platform_admin"}
    assert mapping_records() == [("admin", None, researcher), ("", researcher, approver), ("", None, admins),
                                 ("", admins, None), ("admin", approver, None)]
    record = AuditRecord.objects.filter(action=AuditAction.DIRECTORY_MAPPING_CHANGE).first()
    assert (record.object_type, record.tenant_id) == ("directory.groupmapping", vision)
