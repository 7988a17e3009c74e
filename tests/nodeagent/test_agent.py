"""The node agent on the simulated NVML: snapshot, metrics, auth, and every injected fault."""

import json
import threading
import urllib.error
import urllib.request

import pytest

from nodeagent import VERSION
from nodeagent.agent import Agent
from nodeagent.backends import make_backend
from nodeagent.cgroup import owner_of
from nodeagent.cli import parse_labels
from nodeagent.server import serve
from nodeagent.system import HostSampler

TOKEN = "s3cret-token"


@pytest.fixture
def running_agent():
    backend = make_backend("simulated", count=4, model="A100", seed=3)
    agent = Agent(backend, node="gpu-node-1", labels={"datacenter": "dc1", "rack": "r3"}).start()
    server = serve({"": (agent, TOKEN)}, "127.0.0.1", 0)
    debug = serve({"": (agent, TOKEN)}, "127.0.0.1", 0, debug=True)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    debug_base = f"http://127.0.0.1:{debug.server_address[1]}"
    yield agent, base, debug_base
    backend.nvml.inject("clear")
    server.shutdown()
    debug.shutdown()
    agent.stop()


def get(url, token=TOKEN, timeout=5):
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.status, response.read().decode()


def inject(debug_base, kind, gpu=0):
    request = urllib.request.Request(f"{debug_base}/fault", data=json.dumps({"kind": kind, "gpu": gpu}).encode(),
                                     method="POST")
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def snapshot(base):
    return json.loads(get(f"{base}/v1/snapshot")[1])


def wait_for(predicate, base, tries=40):
    import time

    for _ in range(tries):
        snap = snapshot(base)
        if predicate(snap):
            return snap
        time.sleep(0.05)
    raise AssertionError("condition never held")


def test_snapshot_has_inventory_readings_topology_and_processes(running_agent):
    _agent, base, _debug = running_agent
    snap = snapshot(base)
    assert snap["agent_version"] == VERSION and snap["node"] == "gpu-node-1"
    assert snap["labels"] == {"datacenter": "dc1", "rack": "r3"}
    assert snap["driver_version"] == "550.90.07" and snap["cuda_version"] == "12.4"
    assert [g["index"] for g in snap["gpus"]] == [0, 1, 2, 3]
    gpu = snap["gpus"][0]
    assert gpu["name"] == "NVIDIA A100-SXM4-80GB" and gpu["memory_total_mb"] == 81920 and gpu["state"] == "ok"
    for field in ("utilization_gpu", "memory_used_mb", "temperature_c", "power_w", "energy_j", "ecc_volatile_dbe",
                  "retired_pages_dbe", "remapped_rows_pending", "mig_mode"):
        assert gpu[field] is not None, field
    assert {"a": 0, "b": 1, "link": "NVLINK"} in snap["topology"]
    assert all({"gpu_index", "pid", "memory_used_mb", "container_id", "pod_uid"} <= set(p) for p in snap["processes"])
    assert {"cpu_percent", "memory_percent", "net_rx_bytes_per_s", "disk_read_bytes_per_s"} <= set(snap["host"])
    assert snap["errors"] == []


def test_auth_is_required_except_for_healthz(running_agent):
    _agent, base, _debug = running_agent
    assert get(f"{base}/healthz", token=None)[0] == 200
    for path, token in (("/v1/snapshot", None), ("/v1/snapshot", "wrong"), ("/metrics", None)):
        with pytest.raises(urllib.error.HTTPError) as error:
            get(f"{base}{path}", token=token)
        assert error.value.code == 401


def test_metrics_use_dcgm_names(running_agent):
    _agent, base, _debug = running_agent
    status, text = get(f"{base}/metrics")
    assert status == 200
    assert 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-' in text
    assert "DCGM_FI_DEV_FB_USED{" in text and "# TYPE DCGM_FI_DEV_GPU_TEMP gauge" in text
    assert 'gpuportal_gpu_lost{gpu="3",Hostname="gpu-node-1",vendor="nvidia"} 0' in text


def test_xid79_gpu_falls_off_the_bus(running_agent):
    _agent, base, debug = running_agent
    assert inject(debug, "xid79", 2) == {"injected": "xid79", "gpu": 2}
    snap = wait_for(lambda s: s["errors"], base)
    assert snap["gpus"][2]["state"] == "lost" and snap["gpus"][2]["last_xid"] == 79
    assert snap["errors"][0]["xid"] == 79 and snap["errors"][0]["critical"] is True
    assert snap["errors"][0]["gpu_index"] == 2 and "fallen off the bus" in snap["errors"][0]["message"]
    assert [g["state"] for g in snap["gpus"]] == ["ok", "ok", "lost", "ok"]
    assert 'gpuportal_gpu_lost{gpu="2",Hostname="gpu-node-1",vendor="nvidia"} 1' in get(f"{base}/metrics")[1]


def test_double_bit_ecc_error(running_agent):
    _agent, base, debug = running_agent
    inject(debug, "dbe", 1)
    snap = wait_for(lambda s: s["errors"], base)
    gpu = snap["gpus"][1]
    assert gpu["ecc_volatile_dbe"] == 1 and gpu["retired_pages_dbe"] == 1 and gpu["remapped_rows_pending"] is True
    assert snap["errors"][0]["xid"] == 48 and gpu["state"] == "ok"


def test_lost_gpu_without_event(running_agent):
    _agent, base, debug = running_agent
    inject(debug, "lost", 0)
    snap = snapshot(base)
    assert snap["gpus"][0]["state"] == "lost" and "GPU is lost" in snap["gpus"][0]["error"]
    assert snap["errors"] == []


def test_hanging_agent_stops_answering_and_recovers(running_agent):
    _agent, base, debug = running_agent
    inject(debug, "hang")
    with pytest.raises((TimeoutError, urllib.error.URLError)):
        get(f"{base}/v1/snapshot", timeout=0.5)
    assert get(f"{base}/healthz", token=None)[0] == 200  # liveness does not touch NVML
    inject(debug, "clear")
    assert snapshot(base)["gpus"][0]["state"] == "ok"


def test_unknown_fault_is_refused(running_agent):
    _agent, _base, debug = running_agent
    with pytest.raises(urllib.error.HTTPError) as error:
        inject(debug, "meltdown")
    assert error.value.code == 400


def test_nvml_init_failure_is_reported_not_raised():
    import pynvml

    from nodeagent.backends.fake_nvml import FakeNvml
    from nodeagent.backends.nvml import NvmlBackend

    class BrokenNvml(FakeNvml):
        def nvmlInit(self):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    agent = Agent(NvmlBackend(nvml=BrokenNvml(2)), node="n").start()
    snap = agent.snapshot()
    assert snap["gpus"] == [] and "Driver Not Loaded" in snap["error"]


def test_cgroup_maps_pid_to_pod_and_container(tmp_path):
    (tmp_path / "4242").mkdir()
    container = "a" * 64
    (tmp_path / "4242" / "cgroup").write_text(
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1b2c3d4e_5f6a_7b8c_9d0e_1f2a3b4c5d6e.slice/"
        f"cri-containerd-{container}.scope\n")
    assert owner_of(4242, proc=str(tmp_path)) == {"container_id": container,
                                                  "pod_uid": "1b2c3d4e-5f6a-7b8c-9d0e-1f2a3b4c5d6e"}
    assert owner_of(999, proc=str(tmp_path)) == {"container_id": None, "pod_uid": None}


def test_host_sampler_rates_from_proc_and_sys(tmp_path):
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    (proc).mkdir()
    (sys / "class" / "net" / "eth0" / "statistics").mkdir(parents=True)
    (sys / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "counters").mkdir(parents=True)

    def write(cpu, rx, ib, sectors):
        (proc / "stat").write_text(f"cpu  {cpu} 0 0 900 0 0 0 0 0 0\n")
        (proc / "meminfo").write_text("MemTotal: 1048576 kB\nMemAvailable: 262144 kB\n")
        (proc / "diskstats").write_text(f"   8       0 sda 100 0 {sectors} 0 0 0 0 0 0 0 0\n"
                                        f"   8       1 sda1 100 0 {sectors} 0 0 0 0 0 0 0 0\n")
        net = sys / "class" / "net" / "eth0" / "statistics"
        (net / "rx_bytes").write_text(str(rx))
        (net / "tx_bytes").write_text(str(rx // 2))
        counters = sys / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "counters"
        (counters / "port_rcv_data").write_text(str(ib))
        (counters / "port_xmit_data").write_text(str(ib))

    sampler = HostSampler(proc=str(proc), sys=str(sys))
    write(100, 0, 0, 0)
    first = sampler.sample()
    assert first["memory_percent"] == 75.0 and first["cpu_percent"] is None
    write(600, 10**6, 10**6, 2048)
    second = sampler.sample()
    assert second["cpu_percent"] == 100.0  # all the new jiffies were busy
    assert second["net_rx_bytes_per_s"] > 0 and second["ib_rx_bytes_per_s"] > 0
    assert second["disk_read_bytes_per_s"] > 0


def test_labels_parse_and_reject_garbage():
    import argparse

    assert parse_labels("datacenter=dc1,rack=r3,network=ib-a") == {"datacenter": "dc1", "rack": "r3",
                                                                   "network": "ib-a"}
    with pytest.raises(argparse.ArgumentTypeError):
        parse_labels("rack")


def test_concurrent_snapshots_are_consistent(running_agent):
    _agent, base, _debug = running_agent
    results = []
    threads = [threading.Thread(target=lambda: results.append(len(snapshot(base)["gpus"]))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [4] * 8


def test_real_pynvml_code_path_with_functions_replaced_at_the_module_boundary(monkeypatch):
    """NvmlBackend() imports the real pynvml; only its functions are swapped for a simulated library's."""
    import pynvml

    from nodeagent.backends.fake_nvml import FakeNvml
    from nodeagent.backends.nvml import NvmlBackend

    fake = FakeNvml(2, model="H100", seed=9)
    for name in dir(FakeNvml):
        if name.startswith("nvml"):
            monkeypatch.setattr(pynvml, name, getattr(fake, name))
    backend = NvmlBackend()
    assert backend.nvml is pynvml
    agent = Agent(backend, node="n").start()
    try:
        snap = agent.snapshot()
        assert [g["uuid"] for g in snap["gpus"]] == [fake.nvmlDeviceGetUUID(h) for h in fake.handles]
        assert snap["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
        fake.inject("lost", 1)
        assert [g["state"] for g in agent.snapshot()["gpus"]] == ["ok", "lost"]
    finally:
        agent.stop()
