"""The device check on the simulated NVML: an ``nvidia-smi -q -x`` made from the simulation's own values matches
field by field; one with deliberate differences is reported as a mismatch, field by field; the script runs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pynvml
import pytest

from nodeagent import devicecheck
from nodeagent.agent import Agent
from nodeagent.backends import make_backend
from nodeagent.system import SimulatedHostSampler

ROOT = Path(__file__).resolve().parents[2]


def smi_xml(nvml, newer_layout: bool = True) -> str:
    """What ``nvidia-smi -q -x`` would say of the simulated devices now (both of its ECC and power layouts)."""
    gpus = []
    for handle in nvml.handles:
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        sbe = nvml.nvmlDeviceGetTotalEccErrors(handle, pynvml.NVML_SINGLE_BIT_ECC, pynvml.NVML_VOLATILE_ECC)
        dbe = nvml.nvmlDeviceGetTotalEccErrors(handle, pynvml.NVML_DOUBLE_BIT_ECC, pynvml.NVML_VOLATILE_ECC)
        if newer_layout:
            ecc = (f"<sram_correctable>0</sram_correctable><sram_uncorrectable_parity>0</sram_uncorrectable_parity>"
                   f"<sram_uncorrectable_secded>0</sram_uncorrectable_secded><dram_correctable>{sbe}</dram_correctable>"
                   f"<dram_uncorrectable>{dbe}</dram_uncorrectable>")
            power = "gpu_power_readings", "instant_power_draw", "current_power_limit"
        else:
            ecc = (f"<single_bit><device_memory>{sbe}</device_memory><total>{sbe}</total></single_bit>"
                   f"<double_bit><device_memory>{dbe}</device_memory><total>{dbe}</total></double_bit>")
            power = "power_readings", "power_draw", "power_limit"
        gpus.append(f"""<gpu id="{nvml.nvmlDeviceGetPciInfo(handle).busId}">
  <product_name>{nvml.nvmlDeviceGetName(handle)}</product_name>
  <uuid>{nvml.nvmlDeviceGetUUID(handle)}</uuid>
  <mig_mode><current_mig>{"Enabled" if nvml.nvmlDeviceGetMigMode(handle)[0] else "Disabled"}</current_mig></mig_mode>
  <fb_memory_usage><total>{memory.total // 2**20} MiB</total><reserved>0 MiB</reserved>
    <used>{memory.used // 2**20} MiB</used></fb_memory_usage>
  <utilization><gpu_util>{nvml.nvmlDeviceGetUtilizationRates(handle).gpu} %</gpu_util></utilization>
  <ecc_mode><current_ecc>{"Enabled" if nvml.nvmlDeviceGetEccMode(handle)[0] else "Disabled"}</current_ecc></ecc_mode>
  <ecc_errors><volatile>{ecc}</volatile></ecc_errors>
  <temperature><gpu_temp>{nvml.nvmlDeviceGetTemperature(handle, 0)} C</gpu_temp></temperature>
  <{power[0]}><{power[1]}>{nvml.nvmlDeviceGetPowerUsage(handle) / 1000:.2f} W</{power[1]}>
    <{power[2]}>{nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000:.2f} W</{power[2]}></{power[0]}>
</gpu>""")
    cuda = nvml.nvmlSystemGetCudaDriverVersion()
    return (f"<?xml version=\"1.0\" ?><nvidia_smi_log><driver_version>{nvml.nvmlSystemGetDriverVersion()}"
            f"</driver_version><cuda_version>{cuda // 1000}.{cuda % 1000 // 10}</cuda_version>"
            f"<attached_gpus>{len(gpus)}</attached_gpus>{''.join(gpus)}</nvidia_smi_log>")


@pytest.fixture
def agent():
    backend = make_backend("nvidia", simulate=3, model="H100", seed=5)
    agent = Agent(backend, node="check", host=SimulatedHostSampler(seed=5)).start()
    backend.nvml.inject("alarm", 1)  # some corrected ECC errors to count
    yield agent
    agent.stop()


@pytest.mark.parametrize("newer_layout", [True, False])
def test_the_simulated_nvml_matches_its_own_nvidia_smi_field_by_field(agent, newer_layout):
    result = devicecheck.check(agent, lambda: smi_xml(agent.backend.nvml, newer_layout), samples=3)
    assert result["verdict"] == "match", [c for c in result["comparisons"] if not c["ok"]]
    assert result["gpu_count"] == 3 and result["models"] == ["NVIDIA H100 80GB HBM3"]
    assert (result["driver_version"], result["cuda_version"]) == ("550.90.07", "12.4")
    compared = {(c["field"], c["gpu"][-1:]) for c in result["comparisons"]}
    for field in ("uuid", "name", "memory_total_mb", "memory_used_mb", "utilization_gpu", "temperature_c",
                  "power_w", "power_limit_w", "ecc_mode", "ecc_volatile_sbe", "ecc_volatile_dbe", "mig_mode"):
        assert all((field, str(i)) in compared for i in range(3)), field
    sbe = next(c for c in result["comparisons"] if c["field"] == "ecc_volatile_sbe" and c["gpu"].endswith("1"))
    assert sbe["agent"] == sbe["nvidia_smi"] == 8
    assert result["snapshot_timing"]["samples"] == 3 and result["snapshot_timing"]["median_ms"] > 0


def test_deliberate_differences_are_each_reported_as_a_mismatch(agent):
    nvml = agent.backend.nvml
    uuid = nvml.nvmlDeviceGetUUID(nvml.handles[2])
    xml = (smi_xml(nvml).replace("550.90.07", "550.54.15")
           .replace(uuid, "GPU-deadbeef-0000-0000-0000-00000000ffff")
           .replace("<total>81559 MiB</total>", "<total>80000 MiB</total>", 1)
           .replace("<current_ecc>Enabled</current_ecc>", "<current_ecc>Disabled</current_ecc>", 1))
    result = devicecheck.check(agent, lambda: xml, samples=1)
    assert result["verdict"] == "mismatch"
    wrong = {(c["field"], c["gpu"][-4:]) for c in result["comparisons"] if not c["ok"]}
    assert wrong == {("driver_version", ""), ("uuid", uuid[-4:]), ("uuid", "ffff"),
                     ("memory_total_mb", "0000"), ("ecc_mode", "0000")}
    assert result["mismatches"] == 5
    page = devicecheck.render_markdown(result)
    assert "verdict:** mismatch (5 mismatches)" in page and page.count("**MISMATCH**") == 5


def test_the_script_writes_json_and_the_page(tmp_path):
    backend = make_backend("nvidia", simulate=2, model="A100", seed=9)
    backend.start()
    recorded = tmp_path / "smi.xml"
    recorded.write_text(smi_xml(backend.nvml))
    page = tmp_path / "device-check.md"
    run = subprocess.run(["bash", str(ROOT / "scripts" / "device-check.sh"), "--simulate", "2", "--model", "A100",
                          "--seed", "9", "--samples", "2", "--smi-xml", str(recorded), "--markdown", str(page)],
                         capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHON": sys.executable})
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["verdict"] == "match" and result["gpu_count"] == 2
    text = page.read_text()
    assert text.startswith("# Device check") and "**verdict:** match (0 mismatches)" in text
    assert "## How to run it" in text
