"""Behind the site's reverse proxy every request arrives from the proxy's address: the sign-in lockout and the
API throttles count per client address by the trusted-proxy rule (``gpuportal.web.clients``), so an attacker cannot
lock the real user out from elsewhere, nor skip a throttle by writing X-Forwarded-For themselves."""

import ipaddress

import pytest
from rest_framework.test import APIClient

from tests.factories import PASSWORD

PROXY = "10.0.0.1"


@pytest.fixture
def behind_proxy(settings):
    settings.TRUSTED_PROXIES = [ipaddress.ip_network(f"{PROXY}/32")]
    settings.AXES_FAILURE_LIMIT = 3


def _login(client, password, client_address):
    return client.post("/accounts/login/", {"username": "alice", "password": password}, REMOTE_ADDR=PROXY,
                       HTTP_X_FORWARDED_FOR=client_address)


def test_failures_from_one_client_do_not_lock_the_user_out_from_another(client, alice, behind_proxy):
    answers = [_login(client, f"wrong{i}", "203.0.113.9").status_code for i in range(3)]
    assert answers == [200, 200, 429]
    assert _login(client, PASSWORD, "203.0.113.9").status_code == 429  # the attacker's address stays locked
    assert _login(client, PASSWORD, "198.51.100.7").status_code == 302  # the real user, elsewhere, signs in


def test_the_anonymous_throttle_cannot_be_skipped_by_writing_x_forwarded_for(db, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"anon": "3/min",
                                                                                     "user": "100/min"}}
    anonymous = APIClient()
    answers = [anonymous.post("/api/auth/token/", {"username": "nobody", "password": "x"}, format="json",
                              REMOTE_ADDR="192.0.2.44", HTTP_X_FORWARDED_FOR=f"198.51.100.{i}").status_code
               for i in range(4)]
    assert answers[-1] == 429, answers
