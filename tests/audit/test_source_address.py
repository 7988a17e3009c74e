"""The recorded source address: REMOTE_ADDR, or X-Forwarded-For only through a configured trusted proxy."""

import ipaddress

import pytest

from audit.models import AuditAction, AuditRecord
from fleet.models import Node
from gpuportal.web.clients import client_address

PROXIES = [ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("fd00::/8")]


@pytest.mark.parametrize("remote, forwarded, expected", [
    ("203.0.113.5", "1.2.3.4", "203.0.113.5"),  # forged by a client talking to us directly
    ("10.0.0.2", "6.6.6.6, 198.51.100.7", "198.51.100.7"),  # the client prepended 6.6.6.6 itself
    ("10.0.0.2", "6.6.6.6, 198.51.100.7, 10.1.2.3", "198.51.100.7"),  # two proxies of ours
    ("10.0.0.2", "", "10.0.0.2"),
    ("10.0.0.2", "not-an-address, 10.4.4.4", "10.4.4.4"),
    ("fd00::1", "2001:db8::7", "2001:db8::7"),
])
def test_forwarded_for_is_believed_only_from_trusted_proxies(settings, remote, forwarded, expected):
    settings.TRUSTED_PROXIES = PROXIES
    assert client_address({"REMOTE_ADDR": remote, "HTTP_X_FORWARDED_FOR": forwarded}) == expected


def test_without_trusted_proxies_the_header_is_ignored(settings):
    settings.TRUSTED_PROXIES = []
    assert client_address({"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "1.2.3.4"}) == "10.0.0.2"


@pytest.mark.django_db(transaction=True)
def test_recorded_address_of_a_request(client, users, settings):
    settings.TRUSTED_PROXIES = PROXIES
    client.login(username="admin", password="demo")
    node = Node.objects.first()
    for state, remote, expected in (("cordoned", "198.51.100.9", "198.51.100.9"),  # forged header: ignored
                                    ("draining", "10.0.0.2", "192.0.2.44")):  # from our proxy: believed
        response = client.post(f"/inventory/nodes/{node.name}/action/", {"action": state, "reason": "fan",
                                                                          "confirm": "1"},
                               REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR="192.0.2.44")
        assert response.status_code == 302
        assert AuditRecord.objects.filter(action=AuditAction.NODE_ADMIN).latest("seq").source_address == expected
