"""Every change of what an account may do leaves one audit record naming who did it, with before and after: the
superuser, staff and active flags (the Django admin, a shell, createsuperuser), groups and permissions, API
tokens created and revoked. Platform admins and auditors read these records; tenant admins do not."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from accounts import tokens
from accounts.models import ApiToken, RevocationReason
from audit import log
from audit.models import AuditAction, AuditRecord
from tenants.models import PlatformRole
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)
User = get_user_model()
FLAGS = ("is_superuser", "is_staff", "is_active")


@pytest.fixture
def since(users):
    """The world's seeding wrote records already (its admin is a superuser); count from here."""
    return AuditRecord.objects.order_by("-seq").values_list("seq", flat=True).first() or 0


def records(action, since):
    return list(AuditRecord.objects.filter(action=action, seq__gt=since).order_by("seq"))


def flags(**values):
    return {"is_superuser": False, "is_staff": False, "is_active": True, **values}


def session(user, client_class=APIClient):
    client = client_class()
    client.force_login(user)
    return client


def admin_session(user):
    """The Django admin's pages take form posts, not the API client's JSON."""
    return session(user, Client)


def admin_change(client, user, **changes):
    """The Django admin's change form of ``user``, posted as the page would, with ``changes``."""
    data = {"username": user.username, "first_name": user.first_name, "last_name": user.last_name,
            "email": user.email, "date_joined_0": user.date_joined.strftime("%Y-%m-%d"),
            "date_joined_1": user.date_joined.strftime("%H:%M:%S"), "last_login_0": "", "last_login_1": "",
            "groups": [g.pk for g in user.groups.all()], "user_permissions": [], "_save": "Save"}
    data.update({flag: "on" for flag in FLAGS if getattr(user, flag)})
    for key, value in changes.items():
        if key in FLAGS:
            data.pop(key, None) if not value else data.__setitem__(key, "on")
        else:
            data[key] = value
    response = client.post(f"/admin/auth/user/{user.pk}/change/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors


def test_the_django_admin_granting_superuser_and_a_group_is_audited_with_its_actor(users, since):
    admin, bob = users["admin"], users["bob"]
    operators = Group.objects.create(name="operators")
    admin_change(admin_session(admin), bob, is_superuser=True, is_staff=True, groups=[operators.pk])
    [grant] = records(AuditAction.USER_PRIVILEGE_CHANGE, since)
    assert grant.actor == admin and grant.object_type == "auth.user" and grant.object_id == str(bob.pk)
    assert grant.before == flags() and grant.after == flags(is_superuser=True, is_staff=True)
    assert grant.tenant is None and grant.object_repr == "bob"
    [joined] = records(AuditAction.USER_GROUPS_CHANGE, since)
    assert joined.actor == admin and joined.before == {"groups": []} and joined.after == {"groups": ["operators"]}

    bob.refresh_from_db()
    admin_change(admin_session(admin), bob)  # saved again, nothing changed: no record
    assert len(records(AuditAction.USER_PRIVILEGE_CHANGE, since)) == 1
    assert len(records(AuditAction.USER_GROUPS_CHANGE, since)) == 1
    assert log.verify().ok


def test_flags_changed_from_a_shell_and_createsuperuser_are_audited(users, since, monkeypatch):
    erin = users["erin"]
    erin.is_staff = True
    erin.save()
    erin.is_active = False
    erin.save(update_fields=["is_active"])
    erin.last_login = erin.date_joined
    erin.save(update_fields=["last_login"])  # every sign-in saves this: no flag, no record
    staff, disabled = records(AuditAction.USER_PRIVILEGE_CHANGE, since)
    assert staff.actor is None and staff.actor_name == ""  # a shell: no request, "the portal"
    assert staff.before == flags() and staff.after == flags(is_staff=True)
    assert disabled.before == flags(is_staff=True) and disabled.after == flags(is_staff=True, is_active=False)

    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "a-long-enough-passphrase-for-root")
    call_command("createsuperuser", interactive=False, username="root", email="root@test.gpuportal.local",
                 verbosity=0)
    created = records(AuditAction.USER_PRIVILEGE_CHANGE, since)[-1]
    assert created.object_repr == "root" and created.before is None
    assert created.after == flags(is_superuser=True, is_staff=True)
    User.objects.create_user("plain", "plain@test.gpuportal.local", PASSWORD)  # no privilege: no record
    assert len(records(AuditAction.USER_PRIVILEGE_CHANGE, since)) == 3


def test_group_and_permission_changes_from_either_side_are_audited(users, since):
    alice, bob = users["alice"], users["bob"]
    operators = Group.objects.create(name="operators")
    change_user = Permission.objects.get(codename="change_user")
    operators.user_set.add(alice, bob)  # from the group's side: one record per member
    alice.user_permissions.add(change_user)
    operators.permissions.add(change_user)  # a grant to every member
    operators.user_set.clear()
    changes = records(AuditAction.USER_GROUPS_CHANGE, since)
    summary = [(r.object_repr, r.before, r.after) for r in changes]
    assert summary == [
        ("alice", {"groups": []}, {"groups": ["operators"]}),
        ("bob", {"groups": []}, {"groups": ["operators"]}),
        ("alice", {"permissions": []}, {"permissions": ["auth.change_user"]}),
        ("operators", {"permissions": []}, {"permissions": ["auth.change_user"]}),
        ("alice", {"groups": ["operators"]}, {"groups": []}),
        ("bob", {"groups": ["operators"]}, {"groups": []}),
    ]
    assert changes[3].object_type == "auth.group"
    operators.user_set.add()  # nothing added: nothing to record
    alice.user_permissions.add(change_user)  # already there
    assert len(records(AuditAction.USER_GROUPS_CHANGE, since)) == len(changes)


def test_api_tokens_created_and_revoked_name_who_did_it(users, since):
    alice, admin = users["alice"], users["admin"]
    created = session(alice).post("/api/tokens/", {"name": "laptop"}, format="json")
    assert created.status_code == 201
    secret, token = created.json()["token"], ApiToken.objects.get(pk=created.json()["id"])
    bearer = APIClient()
    bearer.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert bearer.post(f"/api/tokens/{token.pk}/revoke/").status_code == 200  # the token's user, via the token
    signed_in = APIClient().post("/api/auth/token/", {"username": "alice", "password": PASSWORD, "name": "ci"},
                                 format="json")
    assert signed_in.status_code == 200
    tokens.issue(alice, "cron")  # e.g. manage.py api_token create: no request, no actor

    made = records(AuditAction.API_TOKEN_CREATE, since)
    assert [(r.actor, r.after["user"], r.after["name"]) for r in made] == [
        (alice, "alice", "laptop"), (alice, "alice", "ci"), (None, "alice", "cron")]
    assert made[0].object_repr == "alice: laptop" and made[0].tenant is None
    assert made[0].after["prefix"] == token.prefix and secret not in str(made[0].after)
    [revoked] = records(AuditAction.API_TOKEN_REVOKE, since)
    assert revoked.actor == alice and revoked.object_id == str(token.pk)
    assert revoked.before == {"revoked_at": None} and revoked.after["revoked_reason"] == RevocationReason.USER

    ci = ApiToken.objects.get(name="ci")  # the admin's "revoke" action, then the password change revoking the rest
    response = admin_session(admin).post("/admin/accounts/apitoken/", {"action": "revoke", "_selected_action": [ci.pk]})
    assert response.status_code == 302
    alice.set_password("another-long-passphrase")
    alice.save()
    revocations = records(AuditAction.API_TOKEN_REVOKE, since)[1:]
    assert [(r.actor, r.after["revoked_reason"]) for r in revocations] == [
        (admin, RevocationReason.ADMIN), (None, RevocationReason.PASSWORD_CHANGED)]
    assert revocations[1].object_repr == "alice: cron"
    assert tokens.revoke(token) is False and len(records(AuditAction.API_TOKEN_REVOKE, since)) == 3


def test_account_records_are_read_by_platform_admins_and_auditors_not_tenant_admins(users, since):
    bob = users["bob"]
    bob.is_staff = True
    bob.save()
    PlatformRole.objects.create(user=users["erin"], role=PlatformRole.Kind.AUDITOR)
    query = "/api/audit/?action=user.privilege"
    for reader, sees in (("admin", True), ("erin", True), ("frank", False)):
        listed = session(users[reader]).get(query).json()["results"]
        assert any(r["object_repr"] == "bob" for r in listed) is sees, reader
