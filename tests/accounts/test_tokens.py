"""API tokens: hashed at rest, named, expiring, revocable at once, several per user, revoked on a password
change (not on logout), and never cached where a secret is shown."""

import hashlib
from datetime import timedelta

from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from accounts import tokens
from accounts.models import ApiToken, RevocationReason
from fleet.models import Cluster
from tenants.models import PlatformRole
from tests.factories import PASSWORD, make_node, make_user


def bearer(secret, scheme="Token"):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{scheme} {secret}")
    return client


def works(secret, scheme="Token"):
    return bearer(secret, scheme).get("/api/tokens/").status_code == 200


def sign_in(username="alice", **extra):
    response = APIClient().post("/api/auth/token/", {"username": username, "password": PASSWORD, **extra},
                                format="json")
    assert response.status_code == 200, response.content
    return response


def test_token_endpoint_issues_a_named_expiring_token_stored_only_as_its_hash(alice):
    response = sign_in(name="ci", days=7)
    body = response.json()
    assert "no-store" in response["Cache-Control"]
    stored = ApiToken.objects.get(user=alice)
    assert (body["name"], body["prefix"], stored.name) == ("ci", stored.prefix, "ci")
    assert stored.digest == hashlib.sha256(body["token"].encode()).hexdigest()
    assert body["token"].startswith(stored.prefix) and len(stored.prefix) < len(body["token"])
    assert all(body["token"] not in str(value) for value in ApiToken.objects.values_list().get())
    assert timedelta(days=6, hours=23) < stored.expires_at - timezone.now() <= timedelta(days=7)
    assert works(body["token"]) and works(body["token"], "Bearer")
    assert ApiToken.objects.get(pk=stored.pk).last_used_at is not None


def test_the_default_lifetime_and_the_maximum_are_enforced(alice, settings):
    settings.API_TOKENS = {"DEFAULT_DAYS": 30, "MAX_DAYS": 60}
    token, _ = tokens.issue(alice, "default")
    assert timedelta(days=29) < token.expires_at - timezone.now() <= timedelta(days=30)
    client = APIClient()
    client.force_authenticate(alice)
    too_long = client.post("/api/tokens/", {"name": "x", "days": 61}, format="json")
    assert too_long.status_code == 400
    assert "at most 60" in too_long.json()["days"][0]
    nameless = client.post("/api/tokens/", {"name": " ", "days": "soon"}, format="json")
    assert nameless.status_code == 400 and set(nameless.json()) == {"name", "days"}


def test_an_expired_token_is_refused(alice):
    token, secret = tokens.issue(alice, "old")
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = bearer(secret).get("/api/tokens/")
    assert response.status_code == 401
    assert response.json()["detail"] == "Invalid, expired or revoked token."


def test_several_tokens_per_user_and_revocation_takes_effect_at_once(alice):
    first, second = sign_in().json()["token"], sign_in().json()["token"]
    client = bearer(first)
    listed = client.get("/api/tokens/").json()
    assert len(listed) == 2 and "token" not in listed[0]
    minted = client.post("/api/tokens/", {"name": "laptop"}, format="json")
    assert minted.status_code == 403 and "sign in with your password" in minted.json()["detail"]
    session = APIClient()
    session.force_login(alice)  # the Tokens page's session, signed in with the password
    created = session.post("/api/tokens/", {"name": "laptop"}, format="json")
    assert created.status_code == 201 and "no-store" in created["Cache-Control"]
    third = created.json()["token"]
    assert works(third)
    second_id = ApiToken.objects.get(digest=tokens.digest(second)).pk
    assert client.delete(f"/api/tokens/{second_id}/").status_code == 204
    assert not works(second) and works(first) and works(third)
    revoked = client.post(f"/api/tokens/{created.json()['id']}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["revoked_reason"] == RevocationReason.USER
    assert not works(third) and works(first)


def test_another_users_token_is_not_found_and_an_inactive_user_is_refused(alice):
    bob = make_user("bob")
    bobs, bob_secret = tokens.issue(bob, "bob's")
    _, alice_secret = tokens.issue(alice, "alice's")
    assert bearer(alice_secret).delete(f"/api/tokens/{bobs.pk}/").status_code == 404
    assert works(bob_secret)
    bob.is_active = False
    bob.save()
    assert not works(bob_secret)


def test_a_password_change_revokes_every_token_but_logout_does_not(client, alice):
    _, kept = tokens.issue(alice, "kept")
    assert client.login(username="alice", password=PASSWORD)
    client.post("/accounts/logout/")
    assert works(kept), "signing out ends the session only; tokens are separate credentials"

    bob = make_user("bob")
    _, bobs = tokens.issue(bob, "bob's")
    _, other = tokens.issue(alice, "other")
    alice.set_password(PASSWORD)  # the same password again, re-hashed: not a change
    alice.save()
    assert works(kept)
    alice.set_password("a-much-longer-passphrase")
    alice.save()
    assert not works(kept) and not works(other) and works(bobs)
    assert set(alice.api_tokens.values_list("revoked_reason", flat=True)) == {RevocationReason.PASSWORD_CHANGED}


def test_the_token_page_shows_a_new_secret_once_and_never_caches_it(client, alice):
    assert client.login(username="alice", password=PASSWORD)
    page = client.get("/account/tokens/")
    assert page.status_code == 200 and "no-store" in page["Cache-Control"]
    created = client.post("/account/tokens/", {"name": "notebook", "days": "10"})
    assert created.status_code == 200 and "no-store" in created["Cache-Control"]
    secret = created.context["new_secret"]
    assert secret in created.content.decode() and works(secret)
    assert secret not in client.get("/account/tokens/").content.decode()
    bad = client.post("/account/tokens/", {"name": "", "days": "9999"})
    assert bad.status_code == 400 and "at most 365" in bad.content.decode()
    token = ApiToken.objects.get(name="notebook")
    assert client.post(f"/account/tokens/{token.pk}/revoke/").status_code == 302
    assert not works(secret)


def test_a_new_agent_token_page_is_not_cached(client, db):
    make_node(Cluster.objects.create(name="sim"), "n1", "A100")
    make_user("admin", roles=[PlatformRole.Kind.PLATFORM_ADMIN])
    assert client.login(username="admin", password=PASSWORD)
    response = client.post("/inventory/nodes/n1/action/", {"action": "issue_token"})
    assert response.status_code == 200 and response.context["new_token"]
    assert "no-store" in response["Cache-Control"]


def test_the_command_creates_lists_and_revokes(alice, capsys):
    call_command("api_token", "create", "--user", "alice", "--name", "cron", "--days", "5")
    secret = capsys.readouterr().out.strip()
    assert works(secret)
    call_command("api_token", "list", "--user", "alice")
    listing = capsys.readouterr().out
    assert "cron" in listing and secret not in listing
    call_command("api_token", "revoke", "--user", "alice", "--prefix", secret[:12])
    assert not works(secret)
