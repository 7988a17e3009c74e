"""Who may do what: the named predicates of ``tenants.access`` and the one decorator for platform admins' views."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.test import RequestFactory

from tenants import access, roles
from tenants.models import PlatformRole, Role
from tenants.roles import SUBMITTING_ROLES, PlatformRoleKind
from tests.factories import make_tenant, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def people():
    vision, nlp = make_tenant("vision"), make_tenant("nlp")
    return {
        "vision": vision, "nlp": nlp,
        "root": make_user("root-user", roles=()),
        "platform": make_user("platform", roles=(PlatformRoleKind.PLATFORM_ADMIN,)),
        "manager": make_user("manager", roles=(PlatformRoleKind.MANAGER,)),
        "auditor": make_user("auditor", roles=(PlatformRoleKind.AUDITOR,)),
        "tenant_admin": make_user("tenant-admin", vision, roles=(Role.TENANT_ADMIN,)),
        "approver": make_user("approver", vision, roles=(Role.APPROVER,)),
        "researcher": make_user("researcher", vision),
        "viewer": make_user("viewer", vision, roles=(Role.VIEWER,)),
    }


def test_the_models_store_the_roles_of_roles_py():
    assert Role is roles.Role and PlatformRole.Kind is PlatformRoleKind
    assert {Role.RESEARCHER, Role.APPROVER, Role.TENANT_ADMIN} == SUBMITTING_ROLES


def test_platform_roles(people):
    people["root"].is_superuser = True
    assert access.is_platform_admin(people["root"]) and access.is_platform_admin(people["platform"])
    assert not any(access.is_platform_admin(people[name]) for name in ("manager", "auditor", "tenant_admin"))
    assert access.sees_all_tenants(people["manager"]) and not access.sees_all_tenants(people["auditor"])
    assert access.reads_whole_audit_log(people["auditor"]) and not access.reads_whole_audit_log(people["manager"])
    assert not access.is_platform_admin(AnonymousUser()) and access.member_tenant_ids(AnonymousUser()) == []


def test_tenant_roles(people):
    vision, nlp = people["vision"].pk, people["nlp"].pk
    assert access.is_tenant_admin(people["tenant_admin"], vision)
    assert not access.is_tenant_admin(people["tenant_admin"], nlp)
    assert not access.is_tenant_admin(people["tenant_admin"], None)  # the platform's own things
    assert access.can_manage_tenant(people["platform"], nlp) and access.can_manage_tenant(people["platform"], None)
    assert not access.can_manage_tenant(people["approver"], vision)
    assert access.admin_tenant_ids(people["tenant_admin"]) == [vision]
    assert [access.can_submit(people[name], vision) for name in ("researcher", "approver", "viewer", "manager")] == [
        True, True, False, False]


def test_who_manages_a_job(people):
    vision, owner = people["vision"].pk, people["researcher"]
    assert access.can_manage_job(owner, vision, owner.pk)
    assert not access.can_manage_job(people["approver"], vision, owner.pk)
    assert access.can_manage_job(people["tenant_admin"], vision, owner.pk)
    assert access.can_manage_job(people["platform"], vision, owner.pk)
    assert not access.can_manage_job(people["viewer"], vision, people["viewer"].pk)  # no longer a submitter


def test_who_decides_a_request(people):
    vision, nlp = people["vision"].pk, people["nlp"].pk
    assert access.can_decide(people["approver"], vision, platform_wide=False)
    assert not access.can_decide(people["approver"], vision, platform_wide=True)
    assert not access.can_decide(people["approver"], nlp, platform_wide=False)
    assert not access.can_decide(people["tenant_admin"], vision, platform_wide=False)
    assert access.can_decide(people["platform"], nlp, platform_wide=True)


def test_roles_are_read_once_per_user_object(people, django_assert_num_queries):
    user = people["approver"]
    access.forget(user)
    with django_assert_num_queries(2):  # platform roles, memberships
        access.for_user(user)
        access.can_decide(user, people["vision"].pk, platform_wide=False)
        access.is_platform_admin(user)


def _view(request, pk):
    return f"done {pk}"


def test_the_platform_admin_decorator(people):
    factory = RequestFactory()
    plain, told = access.platform_admin_required(_view), access.platform_admin_required(message="Admins only.")(_view)
    assert plain.__name__ == "_view"
    admin_request = factory.get("/")
    admin_request.user = people["platform"]
    assert plain(admin_request, pk=3) == told(admin_request, pk=3) == "done 3"
    for name in ("manager", "tenant_admin"):
        request = factory.get("/")
        request.user = people[name]
        with pytest.raises(PermissionDenied) as refused:
            plain(request, pk=3)
        assert refused.value.args == ()  # the error page's general sentence
        with pytest.raises(PermissionDenied, match="Admins only."):
            told(request, pk=3)
