"""Failed sign-ins lock the username and address out, on the login page and on the token endpoint."""

import pytest
from rest_framework.test import APIClient

from tests.factories import PASSWORD, make_user


@pytest.fixture(autouse=True)
def low_limit(settings):
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = 0.25  # hours


def test_login_page_locks_after_failures_and_refuses_the_right_password(client, alice):
    answers = [client.post("/accounts/login/", {"username": "alice", "password": f"wrong{i}"}).status_code
               for i in range(3)]
    assert answers == [200, 200, 429]
    locked = client.post("/accounts/login/", {"username": "alice", "password": PASSWORD})
    assert locked.status_code == 429
    assert "Too many failed sign-ins" in locked.content.decode()
    assert locked["Retry-After"] == "900"
    assert "_auth_user_id" not in client.session
    # The lock is per username and address: another account from the same address still signs in.
    make_user("bob")
    assert client.post("/accounts/login/", {"username": "bob", "password": PASSWORD}).status_code == 302


def test_token_endpoint_locks_after_failures_with_a_json_answer(alice):
    anonymous = APIClient()
    answers = [anonymous.post("/api/auth/token/", {"username": "alice", "password": "nope"}, format="json")
               for _ in range(3)]
    assert [a.status_code for a in answers] == [400, 400, 429]
    locked = anonymous.post("/api/auth/token/", {"username": "alice", "password": PASSWORD}, format="json")
    assert locked.status_code == 429
    assert "token" not in locked.json()
    assert "try again in 15 minutes" in locked.json()["detail"]
    assert not alice.api_tokens.exists()


def test_a_success_before_the_limit_resets_the_count(client, alice):
    for _ in range(2):
        client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert client.post("/accounts/login/", {"username": "alice", "password": PASSWORD}).status_code == 302
    client.logout()
    for _ in range(2):
        assert client.post("/accounts/login/", {"username": "alice", "password": "wrong"}).status_code == 200


def test_test_client_login_still_works_without_a_request(client, alice):
    """``client.login()`` authenticates without an HTTP request: the lockout backend lets it through."""
    assert client.login(username="alice", password=PASSWORD)
    assert not client.login(username="alice", password="wrong")
