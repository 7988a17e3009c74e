"""API throttles answer 429 past their rate; the password rules refuse weak passwords."""

import pytest
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from accounts import tokens


@pytest.fixture
def low_rates(settings, clean_cache):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {"anon": "2/min", "user": "3/min"}}


def test_a_user_past_the_rate_gets_429(alice, low_rates):
    _, secret = tokens.issue(alice, "busy")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    answers = [client.get("/api/tokens/").status_code for _ in range(4)]
    assert answers == [200, 200, 200, 429]
    assert "throttled" in client.get("/api/tokens/").json()["detail"]


def test_anonymous_token_requests_are_throttled_per_address(alice, low_rates):
    anonymous = APIClient()
    answers = [anonymous.post("/api/auth/token/", {"username": "alice", "password": "demo"}).status_code
               for _ in range(3)]
    assert answers == [200, 200, 429]


@pytest.mark.parametrize(("password", "reason"), [
    ("erinerin1", "too short"), ("password12345", "too common"), ("384729104857", "entirely numeric"),
    ("alice.example", "too similar"),
])
def test_weak_passwords_are_refused(alice, password, reason):
    alice.email = "alice.example@test.gpuportal.local"
    with pytest.raises(ValidationError) as refused:
        validate_password(password, user=alice)
    assert any(reason in message for message in refused.value.messages)


def test_a_long_uncommon_password_is_accepted(alice):
    assert validate_password("violet-harbour-kite-73", user=alice) is None
