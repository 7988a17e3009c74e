"""Asset view, task view ("what can I run now") and node detail."""

import pytest

from fleet import queries
from fleet.agents.polling import poll_agents
from fleet.models import GPU, AdminState, Health, Node
from scheduling.jobs import submission
from tests.conftest import job_payload

pytestmark = pytest.mark.django_db(transaction=True)


def login(client, username):
    assert client.login(username=username, password="demo")
    return client


def test_asset_view_shows_tree_readings_and_holders_without_leaking_tenants(client, users):
    job = submission.submit_job(users["alice"], job_payload(gpu_model="L40S", gpus_per_node=8))
    node = job.allocations.first().gpu.node
    poll_agents()
    poll_agents()
    html = login(client, "alice").get("/inventory/").content.decode()
    for text in ("Cluster sim", "Datacenter dc1", "Rack dc2-r2", node.name, "driver 550.90.07", "<svg class=\"spark\""):
        assert text in html, text
    assert f'href="/jobs/{job.pk}/">#{job.pk}</a> vision' in html
    bob_html = login(client, "bob").get("/inventory/").content.decode()
    assert f"#{job.pk}</a>" not in bob_html and "in use by another tenant" in bob_html
    filtered = login(client, "bob").get("/inventory/?rack=dc2-r2").content.decode()
    assert "dc2-r2-l40s-01" in filtered and "dc1-r1-h100-01" not in filtered


def test_task_view_largest_job_per_node_rack_and_cluster(client, users):
    submission.submit_job(users["alice"], job_payload(gpu_model="A100", gpus_per_node=8))  # fills one A100 node
    submission.submit_job(users["alice"], job_payload(gpu_model="A100", gpus_per_node=3))  # 5 left on another
    rows = {c.gpu_model: c for c in queries.capacity_summary()}
    a100 = rows["A100"]
    assert (a100.free, a100.gpus, a100.largest_on_node) == (21, 32, 8)
    assert a100.largest_in_rack == 16 and a100.largest_in_rack_where == "dc2-r1"
    assert a100.largest_in_cluster == 16  # two whole nodes; 3 x 5 = 15 would be less
    html = login(client, "bob").get("/cluster/").content.decode()
    assert '<td class="nums free">21 / 32</td>' in html


def test_capacity_counts_unhealthy_and_cordoned_gpus_and_lists_nodes_in_order(users):
    job = submission.submit_job(users["alice"], job_payload(gpu_model="A100", gpus_per_node=3))
    nodes = list(Node.objects.filter(gpu_model="A100"))  # the fleet page's order: cluster, datacenter, rack, name
    held_gpus = {a.gpu for a in job.allocations.select_related("gpu__node")}
    held = next(iter(held_gpus)).node
    cordoned, sick = [n for n in nodes if n != held][:2]
    Node.objects.filter(pk=cordoned.pk).update(admin_state=AdminState.CORDONED)
    Node.objects.filter(pk=sick.pk).update(health=Health.UNHEALTHY)
    GPU.objects.filter(node=held, index=7).update(health=Health.UNHEALTHY)
    a100 = {c.gpu_model: c for c in queries.capacity_summary()}["A100"]
    assert (a100.nodes, a100.schedulable_nodes, a100.gpus, a100.allocated) == (4, 2, 32, 3)
    assert (a100.unhealthy, a100.unavailable, a100.free) == (9, 8, 4 + 8)  # the held node's 4 left, a whole node
    listed = {c.gpu_model: c for c in queries.capacity_summary(with_nodes=True)}["A100"]
    assert [row["node"] for row in listed.node_rows] == nodes
    row = next(r for r in listed.node_rows if r["node"] == held)
    assert [g.index for g in row["gpus"]] == list(range(8)) and row["taken"] == 3 and row["free"] == 4
    assert row["busy"] == {g.pk for g in held_gpus}


def test_largest_gang_arithmetic():
    assert queries.largest_gang([8, 5, 0, 8]) == 16
    assert queries.largest_gang([5, 5, 5, 2]) == 15
    assert queries.largest_gang([]) == 0


def test_node_detail_events_and_admin_actions(client, users):
    node = Node.objects.get(name="dc1-r1-h100-01")
    login(client, "alice")
    html = client.get(f"/inventory/nodes/{node.name}/").content.decode()
    assert "Nothing has happened to this node yet." in html and "Issue agent token" not in html
    assert client.post(f"/inventory/nodes/{node.name}/action/", {"action": "cordoned"}).status_code == 403

    login(client, "admin")
    asked = client.post(f"/inventory/nodes/{node.name}/action/", {"action": "cordoned", "reason": "BMC alarm"})
    assert asked.status_code == 200 and "No job runs on this node" in asked.content.decode()  # the confirm step
    response = client.post(f"/inventory/nodes/{node.name}/action/",
                           {"action": "cordoned", "reason": "BMC alarm", "confirm": "1"})
    assert response.status_code == 302
    node.refresh_from_db()
    assert node.admin_state == "cordoned"
    token_page = client.post(f"/inventory/nodes/{node.name}/action/", {"action": "issue_token"}).content.decode()
    node.refresh_from_db()
    from fleet.agents.tokens import token_for

    assert token_for(node) in token_page and node.agent_token_version == 1
    html = client.get(f"/inventory/nodes/{node.name}/").content.decode()
    assert "BMC alarm" in html and "Agent token version 1 issued" in html and token_for(node) not in html


def test_nodes_api_lists_inventory(api):
    body = api("bob").get("/api/nodes/?gpu_model=H100").json()
    assert body["count"] == 4
    first = body["results"][0]
    assert {"name", "health", "admin_state", "schedulable", "gpus", "rack"} <= set(first)
    assert "agent_token_hash" not in first and "agent_url" not in first
