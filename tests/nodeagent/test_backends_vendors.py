"""The AMD, Ascend, Cambricon and Hygon backends, each on its simulated device over the agent's HTTP API
(inventory, readings, faults, auth, metrics), their tools' parsers against sample outputs, and detection."""

import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from nodeagent import cli
from nodeagent.agent import Agent
from nodeagent.backends import NoBackendFound, detect, make_backend
from nodeagent.backends.amd import amd_model
from nodeagent.backends.ascend import AscendBackend
from nodeagent.backends.nvml import nvidia_model
from nodeagent.backends.parsers import cnmon, hy_smi, npu_smi, parse_matrix
from nodeagent.backends.tools import ToolError, command_runner
from nodeagent.server import serve
from nodeagent.system import SimulatedHostSampler

TOKEN = "vendor-t0ken"
ROOT = Path(__file__).resolve().parents[2]
#: backend -> (vendor, resource, model, memory MiB of the simulated model, device word in messages)
VENDORS = {
    "amd": ("amd", "amd.com/gpu", "MI300X", 196592, "GPU"),
    "ascend": ("huawei", "huawei.com/Ascend910", "Ascend910B", 65536, "NPU"),
    "cambricon": ("cambricon", "cambricon.com/mlu", "MLU370-X8", 49152, "MLU"),
    "hygon": ("hygon", "hygon.com/dcu", "K100", 65520, "DCU"),
}


@pytest.fixture(params=sorted(VENDORS))
def vendor_agent(request):
    backend = make_backend(request.param, simulate=4, seed=3)
    agent = Agent(backend, node="mixed-1", host=SimulatedHostSampler(seed=3)).start()
    server = serve({"": (agent, TOKEN)}, "127.0.0.1", 0)
    debug = serve({"": (agent, TOKEN)}, "127.0.0.1", 0, debug=True)
    yield (request.param, f"http://127.0.0.1:{server.server_address[1]}",
           f"http://127.0.0.1:{debug.server_address[1]}")
    backend.inject("clear")
    server.shutdown()
    debug.shutdown()
    agent.stop()


def get(url, token=TOKEN, timeout=5):
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.status, response.read().decode()


def snapshot(base):
    return json.loads(get(f"{base}/v1/snapshot")[1])


def inject(debug, kind, gpu=0):
    request = urllib.request.Request(f"{debug}/fault", data=json.dumps({"kind": kind, "gpu": gpu}).encode(),
                                     method="POST")
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def promtool_check(text: str) -> None:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is missing: run scripts/ensure-services.sh (it installs Debian's prometheus package)")
    result = subprocess.run([path, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout + result.stderr) == (0, ""), text


# --- over the HTTP API -------------------------------------------------------------------------------------

def test_inventory_and_readings_name_vendor_and_model(vendor_agent):
    name, base, _debug = vendor_agent
    vendor, resource, model, memory_mb, _word = VENDORS[name]
    snap = snapshot(base)
    assert (snap["vendor"], snap["resource_name"]) == (vendor, resource)
    assert [g["index"] for g in snap["gpus"]] == [0, 1, 2, 3]
    for gpu in snap["gpus"]:
        assert (gpu["vendor"], gpu["model"], gpu["state"], gpu["memory_total_mb"]) == (vendor, model, "ok", memory_mb)
        for field in ("uuid", "name", "utilization_gpu", "memory_used_mb", "temperature_c", "power_w",
                      "ecc_volatile_dbe", "ecc_volatile_sbe"):
            assert gpu[field] is not None, (name, field)
        assert 0 <= gpu["utilization_gpu"] <= 100 and 0 < gpu["memory_used_mb"] <= memory_mb
    assert len({g["uuid"] for g in snap["gpus"]}) == 4
    assert snap["errors"] == []
    if name in ("amd", "ascend", "hygon"):  # XGMI, HCCS, xGMI between every pair
        link = {"amd": "XGMI", "ascend": "HCCS", "hygon": "XGMI"}[name]
        assert len(snap["topology"]) == 6 and {t["link"] for t in snap["topology"]} == {link}


def test_load_shows_in_utilisation_memory_and_processes(vendor_agent):
    name, base, _debug = vendor_agent
    busy = [g for g in snapshot(base)["gpus"] if g["utilization_gpu"] >= 30]
    idle = [g for g in snapshot(base)["gpus"] if g["utilization_gpu"] <= 1]
    assert busy and idle  # seed 3 gives both
    assert min(g["memory_used_mb"] for g in busy) > max(g["memory_used_mb"] for g in idle)
    if name in ("amd", "ascend"):
        assert {p["gpu_index"] for p in snapshot(base)["processes"]} == {g["index"] for g in busy}


def test_auth_is_required_except_for_healthz(vendor_agent):
    _name, base, _debug = vendor_agent
    assert get(f"{base}/healthz", token=None)[0] == 200
    for path, token in (("/v1/snapshot", None), ("/v1/snapshot", "wrong"), ("/metrics", None), ("/metrics", "x")):
        with pytest.raises(urllib.error.HTTPError) as error:
            get(f"{base}{path}", token=token)
        assert error.value.code == 401


def test_uncorrectable_ecc_error_is_a_critical_error(vendor_agent):
    name, base, debug = vendor_agent
    snapshot(base)  # the reading before the fault
    assert inject(debug, "dbe", 1) == {"injected": "dbe", "gpu": 1}
    snap = snapshot(base)
    gpu = snap["gpus"][1]
    assert gpu["state"] == "ok" and gpu["ecc_volatile_dbe"] == 1
    [error] = snap["errors"]
    assert (error["kind"], error["gpu_index"], error["critical"]) == ("ecc", 1, True)
    assert error["message"] == f"{VENDORS[name][4]} 1: uncorrectable ECC errors rose from 0 to 1"
    assert snapshot(base)["errors"] == [error]  # repeated in later snapshots, not raised again


def test_failed_device_is_lost_with_a_critical_error(vendor_agent):
    name, base, debug = vendor_agent
    snapshot(base)
    inject(debug, "offbus", 2)
    snap = snapshot(base)
    assert [g["state"] for g in snap["gpus"]] == ["ok", "ok", "lost", "ok"]
    lost = snap["gpus"][2]
    assert lost["error"] and lost["vendor"] == VENDORS[name][0] and lost["model"] == VENDORS[name][2]
    faults = [e for e in snap["errors"] if e["kind"] == "device_fault"]
    assert len(faults) == 1 and faults[0]["gpu_index"] == 2 and faults[0]["critical"] is True
    if name == "ascend":  # npu-smi names the alarm behind it
        [alarm] = [e for e in snap["errors"] if e["kind"] == "alarm"]
        assert alarm["code"] == "80E18402" and alarm["critical"] is True and "Critical" in alarm["message"]
        assert lost["health"] == "Critical" and lost["alarm_codes"] == ["80E18402"]
    text = get(f"{base}/metrics")[1]
    assert f'gpuportal_gpu_lost{{gpu="2",Hostname="mixed-1",vendor="{VENDORS[name][0]}"}} 1' in text


def test_lost_device_disappears_without_an_error(vendor_agent):
    _name, base, debug = vendor_agent
    snapshot(base)
    inject(debug, "lost", 0)
    snap = snapshot(base)
    assert [g["state"] for g in snap["gpus"]] == ["lost", "ok", "ok", "ok"]
    assert "no longer listed" in snap["gpus"][0]["error"] or "AMDSMI" in snap["gpus"][0]["error"]
    assert snap["errors"] == []
    inject(debug, "clear")
    assert [g["state"] for g in snapshot(base)["gpus"]] == ["ok"] * 4


def test_alarm_is_a_warning_not_a_failure(vendor_agent):
    name, base, debug = vendor_agent
    snapshot(base)
    inject(debug, "alarm", 3)
    snap = snapshot(base)
    gpu = snap["gpus"][3]
    assert gpu["state"] == "ok" and gpu["ecc_volatile_sbe"] >= 8
    if name == "ascend":
        [alarm] = snap["errors"]
        assert (alarm["kind"], alarm["code"], alarm["critical"]) == ("alarm", "80CB8009", False)
        assert gpu["health"] == "Warning" and gpu["alarm_codes"] == ["80CB8009"]
    else:
        assert snap["errors"] == []


def test_hanging_tool_stops_the_agent_answering_and_recovers(vendor_agent):
    _name, base, debug = vendor_agent
    inject(debug, "hang")
    with pytest.raises((TimeoutError, urllib.error.URLError)):
        get(f"{base}/v1/snapshot", timeout=0.5)
    assert get(f"{base}/healthz", token=None)[0] == 200
    inject(debug, "clear")
    assert snapshot(base)["gpus"][0]["state"] == "ok"


def test_unknown_fault_and_device_are_refused(vendor_agent):
    _name, _base, debug = vendor_agent
    for kind, gpu in (("meltdown", 0), ("dbe", 9)):
        with pytest.raises(urllib.error.HTTPError) as error:
            inject(debug, kind, gpu)
        assert error.value.code == 400


def test_metrics_label_every_device_series_with_the_vendor_and_pass_promtool(vendor_agent):
    name, base, debug = vendor_agent
    vendor = VENDORS[name][0]
    snapshot(base)
    inject(debug, "dbe", 1)
    inject(debug, "offbus", 2)
    status, text = get(f"{base}/metrics")
    assert status == 200
    promtool_check(text)
    device_lines = [line for line in text.splitlines() if line and not line.startswith("#") and 'gpu="' in line]
    assert device_lines and all(f'vendor="{vendor}"' in line for line in device_lines)
    assert 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="' in text and "DCGM_FI_DEV_FB_USED{" in text
    assert any(line.startswith('DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="1"') and line.endswith(" 1")
               for line in device_lines)
    assert f'vendor="{vendor}",model="{VENDORS[name][2]}"}} 1' in text  # gpuportal_gpu_info


def test_nvidia_devices_say_vendor_and_model_too():
    agent = Agent(make_backend("simulated", count=2, model="A100", seed=1), node="n").start()
    try:
        snap = agent.snapshot()
        assert [(g["vendor"], g["model"]) for g in snap["gpus"]] == [("nvidia", "A100")] * 2
        agent.backend.inject("xid79", 1)
        lost = agent.snapshot()["gpus"][1]
        assert (lost["state"], lost["vendor"], lost["model"]) == ("lost", "nvidia", "A100")  # XID comes later
        from nodeagent import metrics

        promtool_check(metrics.render(agent.snapshot()))
    finally:
        agent.backend.inject("clear")
        agent.stop()


def test_old_snapshot_without_vendor_renders_as_nvidia():
    from nodeagent import metrics

    text = metrics.render({"node": "old", "gpus": [{"index": 0, "uuid": "GPU-1", "state": "ok", "utilization_gpu": 5}]})
    assert 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1",Hostname="old",vendor="nvidia"} 5' in text
    promtool_check(text)


# --- the CLI, detection, the real tool path ---------------------------------------------------------------------

def test_cli_runs_a_simulated_ascend_node_with_a_fault(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    process = subprocess.Popen(
        [sys.executable, "-m", "nodeagent", "--backend", "ascend", "--simulate", "2", "--port", "0",
         "--token-file", str(token_file), "--node-name", "npu-7", "--fault", "offbus:1"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith("READY port="), process.stderr.read() if process.poll() is not None else line
        snap = snapshot(f"http://127.0.0.1:{line.strip().split('=')[1]}")
        assert snap["vendor"] == "huawei" and [g["model"] for g in snap["gpus"]] == ["Ascend910B"] * 2
        assert [g["state"] for g in snap["gpus"]] == ["ok", "lost"]
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_cli_without_any_vendor_tool_says_so(tmp_path, monkeypatch, capsys):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)

    def nothing():
        raise NoBackendFound("no accelerator found: none of npu-smi (tool) is present")

    monkeypatch.setattr(cli, "detect", nothing)
    assert cli.main(["--token-file", str(token_file), "--port", "0"]) == 2
    assert "no accelerator found" in capsys.readouterr().err


def test_cli_amd_without_amdsmi_is_a_clear_error(tmp_path, capsys):
    if importlib.util.find_spec("amdsmi") is not None:
        pytest.fail("this test expects amdsmi to be absent")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    assert cli.main(["--backend", "amd", "--token-file", str(token_file), "--port", "0"]) == 2
    assert "amd backend needs its vendor's Python library" in capsys.readouterr().err
    assert "amdsmi" not in sys.modules  # building the simulation or importing the module never needed it


def test_detection_follows_what_the_node_has():
    def probes(tools=(), modules=(), libraries=()):
        return {"which": lambda n: f"/usr/bin/{n}" if n in tools else None,
                "has_module": lambda n: n in modules, "has_library": lambda n: n in libraries}

    assert detect(**probes(tools={"npu-smi"})) == "ascend"
    assert detect(**probes(tools={"cnmon", "nvidia-smi"})) == "cambricon"
    assert detect(**probes(tools={"hy-smi"}, modules={"amdsmi"})) == "hygon"  # DCU nodes may carry ROCm libs
    assert detect(**probes(modules={"amdsmi", "pynvml"})) == "amd"
    assert detect(**probes(modules={"pynvml"}, libraries={"nvidia-ml"})) == "nvidia"
    assert detect(**probes(tools={"nvidia-smi"})) == "nvidia"
    with pytest.raises(NoBackendFound) as error:
        detect(**probes(modules={"pynvml"}))  # the agent's own dependency is no sign of a GPU
    assert "--backend" in str(error.value) and "npu-smi" in str(error.value)


def test_real_runner_spawns_the_tool_and_bounds_it(tmp_path, monkeypatch):
    """The backend's own subprocess path: an ``npu-smi`` on PATH that prints a captured table."""
    tool = tmp_path / "npu-smi"
    tool.write_text(f"#!/bin/sh\ncase \"$*\" in\n  info) cat '{tmp_path}/info.txt';;\n  *) exec sleep 5;;\nesac\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "info.txt").write_text(NPU_SMI_INFO)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    run = command_runner("npu-smi", timeout=0.5)
    assert npu_smi.parse_info(run(["info"]))[0]["name"] == "910B3"
    with pytest.raises(ToolError, match="did not answer within 0.5 s"):
        run(["info", "-t", "topo"])
    backend = AscendBackend(runner=run)
    backend.start()
    gpus = backend.gpus()  # the detail queries time out: listed but unreadable
    assert [g["state"] for g in gpus] == ["lost", "lost"] and gpus[0]["model"] == "Ascend910B"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    missing = AscendBackend(runner=command_runner("npu-smi"))
    missing.start()
    assert "npu-smi is not on PATH" in missing.init_error and missing.gpus() == []


# --- parsers against sample outputs -------------------------------------------------------------------------------

NPU_SMI_INFO = """\
+------------------------------------------------------------------------------------------------+
| npu-smi 23.0.rc3                 Version: 23.0.rc3                                             |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B3               | OK            | 93.6        40                0    / 0             |
| 0                         | 0000:C1:00.0  | 12          0    / 0          3161 / 65536         |
+===========================+===============+====================================================+
| 1     910B3               | Alarm         | NA          NA                0    / 0             |
| 0                         | 0000:01:00.0  | NA          0    / 0          NA   / NA            |
+===========================+===============+====================================================+
+---------------------------+---------------+----------------------------------------------------+
| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
| 0       0                 | 23145         | python3.9                | 3021                    |
+===========================+===============+====================================================+
| No running processes found in NPU 1                                                            |
+===========================+===============+====================================================+
"""

NPU_SMI_DUO = """\
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip  Device              | Bus-Id        | AICore(%)   Memory-Usage(MB)                       |
+===========================+===============+====================================================+
| 8     310P3               | OK            | 53.8        47                0    / 0             |
| 0                         | 0000:82:00.0  | 0           1675 / 44280                           |
| 1                         | 0000:82:00.0  | 3           1404 / 43693                           |
+===========================+===============+====================================================+
"""


def test_npu_smi_info_table():
    chips = npu_smi.parse_info(NPU_SMI_INFO)
    assert chips[0] == {"npu": 0, "name": "910B3", "health": "OK", "power_w": 93.6, "temperature_c": 40, "chip": 0,
                        "bus_id": "0000:C1:00.0", "aicore_percent": 12, "memory_used_mb": 0, "memory_total_mb": 0,
                        "hbm_used_mb": 3161, "hbm_total_mb": 65536}
    assert chips[1]["health"] == "Alarm" and chips[1]["power_w"] is None and chips[1]["hbm_total_mb"] is None
    assert npu_smi.parse_processes(NPU_SMI_INFO) == [{"npu": 0, "chip": 0, "pid": 23145, "name": "python3.9",
                                                      "memory_mb": 3021}]
    duo = npu_smi.parse_info(NPU_SMI_DUO)  # a card with two chips: a device each
    assert [(c["npu"], c["chip"], c["memory_total_mb"], c["hbm_total_mb"]) for c in duo] == [
        (8, 0, 44280, None), (8, 1, 43693, None)]


def test_npu_smi_detail_queries_and_models():
    health = npu_smi.parse_health("        Health Status                  : Alarm\n"
                                  "        Error Code                     : 80E01801 80C98000\n"
                                  "        Error Information              : node type=HBM, event state=ECC\n")
    assert health == {"health": "Alarm", "codes": ["80E01801", "80C98000"], "text": "node type=HBM, event state=ECC"}
    assert npu_smi.parse_health("        Health Status : OK\n        Error Code : NA\n")["codes"] == []
    ecc = npu_smi.parse_ecc("        HBM Single Bit Error Count               : 4\n"
                            "        HBM Double Bit Error Count               : 1\n"
                            "        HBM Double Bit Isolated Pages Count      : 2\n")
    assert ecc == {"sbe": 4, "dbe": 1, "dbe_pages": 2}
    assert [npu_smi.ascend_model(n) for n in ("910B3", "910B", "910", "310P3", "Ascend910B4")] == [
        "Ascend910B", "Ascend910B", "Ascend910", "Ascend310P", "Ascend910B"]


def test_topology_matrices():
    text = ("           NPU0       NPU1       NPU2       CPU Affinity\n"
            "NPU0       X          HCCS       SYS        0-23\n"
            "NPU1       HCCS       X          PIX        24-47\n"
            "NPU2       SYS        PIX        X          48-71\n\nLegend:\n  X    = Self\n")
    assert parse_matrix(text) == [(0, 1, "HCCS"), (0, 2, "SYS"), (1, 2, "PIX")]
    assert parse_matrix("       DCU0   DCU1\nDCU0   0      XGMI\nDCU1   XGMI   0\n") == [(0, 1, "XGMI")]


CNMON_INFO = """\
Card 0
    Product Name                   : MLU370-X8
    Driver                         : v4.20.18
    Board Serial Number            : SN/2230100163
    Utilization
        MLU Average                : 35 %
        MLU 00                     : 33 %
    Physical Memory Usage
        Total                      : 49152 MiB
        Used                       : 1234 MiB
    Virtual Memory Usage
        Total                      : 1048576 MiB
        Used                       : 0 MiB
    Power Info
        Usage                      : 120.00 W
        Cap                        : 250 W
    Temperature Info
        Board                      : 36 C
        Chip                       : 41 C
    ECC Info
        Corrected Error            : 3
        Uncorrected Error          : 0
Card 1
    Product Name                   : MLU370-X8
    Physical Memory Usage
        Total                      : N/A
"""


def test_cnmon_info_cards():
    cards = cnmon.parse_info(CNMON_INFO)
    assert sorted(cards) == [0, 1]
    reading = cnmon.card_reading(cards[0])
    assert (reading["memory_total_mb"], reading["memory_used_mb"], reading["utilization_gpu"]) == (49152, 1234, 35)
    assert (reading["power_w"], reading["temperature_c"], reading["ecc_volatile_sbe"]) == (120.0, 41, 3)
    assert reading["ecc_volatile_dbe"] == 0 and reading["serial"] == "SN/2230100163" and reading["uuid"] is None
    assert cards[0]["Virtual Memory Usage/Total"] == "1048576 MiB"  # sections keep same-named keys apart
    assert cnmon.card_reading(cards[1])["memory_total_mb"] is None
    assert cnmon.mlu_model("MLU370-X8") == "MLU370-X8"


HY_SMI = """\
============================ System Management Interface =============================
DCU[0]\t\t: Card series: K100_AI
DCU[0]\t\t: Unique ID: 0x2a8c4e0f11d2
DCU[0]\t\t: vram Total Memory (B): 68702699520
DCU[0]\t\t: vram Total Used Memory (B): 1073741824
DCU[0]\t\t: DCU use (%): 57
DCU[0]\t\t: Temperature (Sensor junction) (C): 49.0
DCU[0]\t\t: Average Graphics Package Power (W): 118.0
DCU[0]\t\t:          Block     Status  Correctable Error  Uncorrectable Error
DCU[0]\t\t:            UMC    ENABLED                  2                    1
DCU[0]\t\t:           SDMA    ENABLED                  0                    0
DCU[1]\t\t: Card series: Z100L
DCU[1]\t\t: vram Total Memory (B): N/A
=================================== End of SMI Log ===================================
"""


def test_hy_smi_devices():
    devices = hy_smi.parse_devices(HY_SMI)
    reading = hy_smi.device_reading(devices[0])
    assert (reading["memory_total_mb"], reading["memory_used_mb"], reading["utilization_gpu"]) == (65520, 1024, 57)
    assert (reading["temperature_c"], reading["power_w"]) == (49, 118.0)
    assert (reading["ecc_volatile_sbe"], reading["ecc_volatile_dbe"], reading["uuid"]) == (2, 1, "0x2a8c4e0f11d2")
    assert hy_smi.device_reading(devices[1])["memory_total_mb"] is None
    assert [hy_smi.dcu_model(s) for s in ("K100_AI", "Z100L", "K100")] == ["K100", "Z100", "K100"]


def test_model_names_from_each_vendors_product_names():
    assert [amd_model(n) for n in ("AMD Instinct MI300X", "AMD Instinct MI250X / MI250", "AMD Instinct MI210")] == [
        "MI300X", "MI250X", "MI210"]
    assert [nvidia_model(n) for n in ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-32GB",
                                      "NVIDIA L40S", "NVIDIA RTX A6000")] == ["H100", "A100", "V100", "L40S",
                                                                            "RTX A6000"]


def test_simulated_devices_answer_in_little_time():
    """Eight devices of each simulation read in well under a poll's timeout (the tools are called per device)."""
    for name in VENDORS:
        agent = Agent(make_backend(name, simulate=8, seed=1), node="n", host=SimulatedHostSampler(1)).start()
        started = time.monotonic()
        assert len(agent.snapshot()["gpus"]) == 8
        assert time.monotonic() - started < 1.0, name
        agent.stop()
