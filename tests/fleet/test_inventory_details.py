"""What the inventory and a node's page say of a node is true of that node: InfiniBand only where it has
InfiniBand, GPU UUIDs told apart by their ends (the whole UUID kept), times with their year and time zone."""

import pytest
from django.utils import timezone

from fleet.agents.polling import poll_agents
from fleet.models import GPU, Node
from nodeagent.system import HostSampler, SimulatedHostSampler

pytestmark = pytest.mark.django_db(transaction=True)


def login(client, username="admin"):
    assert client.login(username=username, password="demo")
    return client


def test_infiniband_shows_only_on_nodes_that_have_it(client, users):
    poll_agents()
    poll_agents()  # rates need two samples
    infiniband = Node.objects.get(name="dc1-r1-h100-01")  # network ib-dc1-a
    ethernet = Node.objects.get(name="dc2-r2-l40s-01")  # network eth-dc2
    assert ethernet.readings.latest("at").ib_rx_bytes_per_s is None
    assert infiniband.readings.latest("at").ib_rx_bytes_per_s is not None  # 0 B/s while idle, but measured
    login(client)
    assert "InfiniBand in" in client.get(f"/inventory/nodes/{infiniband.name}/").content.decode()
    eth_page = client.get(f"/inventory/nodes/{ethernet.name}/").content.decode()
    assert "InfiniBand" not in eth_page and "Network in" in eth_page
    inventory = client.get("/inventory/?rack=dc2-r2").content.decode()
    assert "InfiniBand" not in inventory and "network in" in inventory


def test_a_host_without_infiniband_ports_reports_no_infiniband(tmp_path):
    (tmp_path / "sys" / "class" / "net" / "eth0" / "statistics").mkdir(parents=True)
    (tmp_path / "proc").mkdir()
    sampler = HostSampler(proc=tmp_path / "proc", sys=tmp_path / "sys")
    sampler.sample()
    assert sampler.sample()["ib_rx_bytes_per_s"] is None
    assert SimulatedHostSampler(infiniband=False).sample()["ib_rx_bytes_per_s"] is None
    assert SimulatedHostSampler().sample()["ib_rx_bytes_per_s"] > 0


def test_gpu_uuids_are_told_apart_and_times_carry_year_and_zone(client, users, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    node = Node.objects.get(name="dc1-r1-h100-01")
    for gpu in node.gpus.all():  # one vendor's UUIDs share their beginning
        GPU.objects.filter(pk=gpu.pk).update(uuid=f"GPU-5f3e2a10-0000-1111-2222-00000000{gpu.index:04d}")
    Node.objects.filter(pk=node.pk).update(last_seen=timezone.now())
    html = login(client).get(f"/inventory/nodes/{node.name}/").content.decode()
    for index in range(8):
        whole = f"GPU-5f3e2a10-0000-1111-2222-00000000{index:04d}"
        assert f'title="{whole}" data-uuid="{whole}">…{whole[-12:]}</code>' in html
    year = timezone.localtime().strftime("%Y")
    assert f"<dd>{year}-" in html and " CST</dd>" in html  # last seen: with its year and zone
    inventory = client.get("/inventory/?rack=dc1-r1").content.decode()
    assert f"last seen {year}-" in inventory and "CST" in inventory
