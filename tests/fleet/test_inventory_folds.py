"""The inventory folds each node's GPUs, unfolded where the node or one of its GPUs has a problem
."""

import re

import pytest

from fleet.models import GPU, AdminState, Health, Node

pytestmark = pytest.mark.django_db(transaction=True)


def folds(html: str) -> dict[str, bool]:
    """``{node name: its GPU table is unfolded}`` from the inventory page."""
    return {name: bool(is_open) for name, is_open in
            re.findall(r'data-node="([^"]+)">.*?<details class="node-gpus"( open)?>', html, re.DOTALL)}


def test_nodes_fold_their_gpus_unless_something_is_wrong(client, users):
    GPU.objects.filter(node__name="dc1-r1-h100-01", index=3).update(health=Health.SUSPECT)
    Node.objects.filter(name="dc1-r1-h100-02").update(admin_state=AdminState.CORDONED)
    Node.objects.filter(name="dc1-r2-h100-03").update(health=Health.UNHEALTHY)
    assert client.login(username="alice", password="demo")
    html = client.get("/inventory/").content.decode()
    unfolded = folds(html)
    assert len(unfolded) == Node.objects.count()
    assert {name for name, is_open in unfolded.items() if is_open} == {
        "dc1-r1-h100-01", "dc1-r1-h100-02", "dc1-r2-h100-03"}
    assert html.count("needs attention") == 3 and "8 GPUs" in html
