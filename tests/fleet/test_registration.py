"""Agent registration: only URLs inside the agent networks (never link-local, loopback only when a loopback
network is configured), never contacted when refused; labels that move a node need an admin."""

import socket

import pytest

from fleet.agents import tokens as agent_tokens
from fleet.models import Cluster, Node


@pytest.fixture
def agent(db, settings, client, monkeypatch):
    settings.AGENTS = {**settings.AGENTS, "NETWORKS": ["10.0.0.0/8"]}
    node = Node.objects.create(cluster=Cluster.objects.create(name="reg"), name="reg-n1", gpu_model="A100",
                               datacenter="dc1", rack="r1", network_domain="ib-a")
    token = agent_tokens.issue(node)

    def refuse_to_connect(*args, **kwargs):
        raise AssertionError("the portal contacted an agent URL while registering it")

    monkeypatch.setattr(socket, "create_connection", refuse_to_connect)

    def register(url, labels=None, auth=f"Bearer {token}"):
        body = {"node": node.name, "url": url, **({"labels": labels} if labels is not None else {})}
        return client.post("/api/agents/register/", body, content_type="application/json", HTTP_AUTHORIZATION=auth)

    register.node = node
    return register


@pytest.mark.parametrize(("url", "rule"), [
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://[fe80::1]:9400", "link-local"),
    ("http://[::ffff:169.254.169.254]:9400", "link-local"),
    ("http://127.0.0.1:9400", "loopback"),
    ("http://localhost:9400", "loopback"),
    ("http://192.168.7.7:9400", "outside the agent networks"),
    ("http://[fd00::7]:9400", "outside the agent networks"),
    ("ftp://10.1.1.1/", "http(s)://host[:port]"),
    ("http://user:secret@10.1.1.1:9400", "without user or password"),
    ("http://10.1.1.1:99999", "Not a valid URL"),
])
def test_urls_outside_the_agent_networks_are_refused(agent, url, rule):
    response = agent(url)
    assert response.status_code == 400, response.content
    assert list(response.json()) == ["url"] and rule in response.json()["url"][0]
    assert Node.objects.get(pk=agent.node.pk).agent_url == ""


def test_link_local_is_refused_even_inside_a_wide_network_and_loopback_needs_its_own(agent, settings):
    settings.AGENTS = {**settings.AGENTS, "NETWORKS": ["0.0.0.0/0", "::/0"]}
    assert "link-local" in agent("http://169.254.169.254/").json()["url"][0]
    assert "loopback" in agent("http://127.0.0.1:9400").json()["url"][0]
    settings.AGENTS = {**settings.AGENTS, "NETWORKS": ["127.0.0.0/8"]}
    assert agent("http://127.0.0.1:9400").status_code == 200


def test_in_network_url_is_accepted_and_a_wrong_token_learns_nothing(agent):
    assert agent("http://169.254.169.254/", auth="Bearer gpa_wrong").status_code == 401  # token first
    response = agent("http://10.20.30.40:9400")
    assert response.status_code == 200, response.content
    assert Node.objects.get(pk=agent.node.pk).agent_url == "http://10.20.30.40:9400"


def test_an_agent_may_fill_empty_labels_but_not_move_the_node(agent):
    Node.objects.filter(pk=agent.node.pk).update(network_domain="")
    before = Node.objects.get(pk=agent.node.pk)
    assert (before.datacenter, before.rack) == ("dc1", "r1")

    same = agent("http://10.0.0.9:9400", {"datacenter": "dc1", "rack": "r1", "network": "ib-new"})
    assert same.status_code == 200, same.content
    node = Node.objects.get(pk=agent.node.pk)
    assert (node.datacenter, node.rack, node.network_domain) == ("dc1", "r1", "ib-new")

    moved = agent("http://10.0.0.10:9400", {"rack": "r9", "datacenter": "dc7"})
    assert moved.status_code == 400
    messages = moved.json()["labels"]
    assert any("rack" in m and "'r1'" in m and "'r9'" in m and "needs an admin" in m for m in messages)
    assert any("datacenter" in m and "'dc7'" in m for m in messages)
    node = Node.objects.get(pk=agent.node.pk)
    assert (node.agent_url, node.rack, node.datacenter) == ("http://10.0.0.9:9400", "r1", "dc1")  # nothing changed
    assert agent("http://10.0.0.10:9400", {"network_domain": "ib-other"}).status_code == 400
