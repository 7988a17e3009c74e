"""A node action's reason longer than the limit is refused on the page (400, the reason kept), never cut."""

import pytest

from fleet.models import AdminState, Node
from fleet.services import MAX_ADMIN_REASON

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_node_reason_too_long_is_refused_and_kept(users, client):
    node = Node.objects.order_by("name").first()
    client.login(username="admin", password="demo")
    reason = "r" * (MAX_ADMIN_REASON + 1)
    refused = client.post(f"/inventory/nodes/{node.name}/action/", {"action": "cordoned", "reason": reason})
    assert refused.status_code == 400
    page = refused.content.decode()
    assert f"At most {MAX_ADMIN_REASON} characters (got {MAX_ADMIN_REASON + 1})" in page and f'value="{reason}"' in page
    node.refresh_from_db()
    assert node.admin_state == AdminState.ACTIVE
    accepted = client.post(f"/inventory/nodes/{node.name}/action/",
                           {"action": "cordoned", "reason": "r" * MAX_ADMIN_REASON})
    assert accepted.status_code == 302
    node.refresh_from_db()
    assert node.admin_state == AdminState.CORDONED
    assert node.events.filter(reason__endswith="r" * MAX_ADMIN_REASON).exists()
