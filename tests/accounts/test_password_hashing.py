"""Passwords are stored as Argon2id at OWASP's parameters in every profile but the tests' own (which hash with
MD5 for speed); a hash stored before (PBKDF2) still signs in and is rewritten as Argon2id, without counting as a
password change (which would revoke the person's API tokens)."""

import pytest
from django.contrib.auth.hashers import identify_hasher, make_password
from django.test import Client

from accounts import tokens
from gpuportal.settings import security


@pytest.fixture
def portal_hashers(settings):
    settings.PASSWORD_HASHERS = security.PORTAL_PASSWORD_HASHERS


def test_new_passwords_are_argon2id_at_owasp_parameters(alice, portal_hashers):
    alice.set_password("a long passphrase")
    alice.save()
    assert alice.password.startswith("argon2$argon2id$v=19$m=19456,t=2,p=1$")
    assert identify_hasher(alice.password).algorithm == "argon2"


def test_an_older_hash_signs_in_and_is_rewritten_without_revoking_tokens(alice, portal_hashers):
    alice.password = make_password("demo", hasher="pbkdf2_sha256")
    alice.save()
    _, secret = tokens.issue(alice, "ci")
    client = Client()
    response = client.post("/accounts/login/", {"username": "alice", "password": "demo"})
    assert response.status_code == 302
    alice.refresh_from_db()
    assert alice.password.startswith("argon2$argon2id$")
    assert tokens.check(secret) is not None  # a re-hash is not a password change
    assert Client().login(username="alice", password="demo")  # and the new hash signs in


def test_the_demo_and_production_store_argon2id():
    from tests.gpuportal.test_settings import PRODUCTION, run

    show = "import django; django.setup(); from django.conf import settings; print(settings.PASSWORD_HASHERS[0])"
    for env in ({}, PRODUCTION):
        result = run(env, code=show)
        assert result.stdout.split() == ["accounts.hashers.OwaspArgon2idHasher"], result.stderr
