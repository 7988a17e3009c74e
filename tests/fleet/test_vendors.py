"""The vendor registry: every vendor the catalogue may name has a full record, the node agent has a backend under
each record's name, unknown names are refused or fall back to the one declared default, and a new vendor is one
record: the Kubernetes manifests, the failure diagnosis and the simulated log of a made-up vendor follow it."""

import dataclasses
import re
from datetime import UTC, datetime, timedelta
from importlib import import_module

import pytest

from fleet import catalogue, vendors
from fleet.models import Vendor as VendorChoice
from fleet.vendors import DEFAULT_VENDOR, VENDORS, Example, LogWords, Partitions, SimulatedLines, UnknownVendor, Vendor
from nodeagent.backends import BACKENDS, DEFAULT_BACKEND, make_backend
from scheduling.executors.kubernetes import manifests
from scheduling.executors.kubernetes.diagnosis import PodState, diagnose
from scheduling.executors.simulated import log as simulated_log
from scheduling.models import FailureCategory

KNOWN_MODELS = import_module("fleet.migrations.0002_accelerator_catalogue").KNOWN_MODELS

#: A vendor no one makes: its own resource, variables, partitions, stack, tools, failure words and log lines.
ACME = Vendor(
    name="acme", device="Acme XPU", resource="acme.com/xpu", model_resources=(("XPU-S", "acme.com/xpu-small"),),
    visible_devices="ACME_VISIBLE_DEVICES", sets_visible_devices=True, env={"ACCL_LOG": "warn"},
    multi_node_env={"ACCL_CONNECT_TIMEOUT": "900"}, pod_ip_variable="ACCL_IF_IP",
    partitions={"acme.com/xpu": Partitions(16, (4, 8))}, stack="AcmeSDK", library="ACCL",
    library_settings="ACCL_SOCKET_IFNAME", memory_tool="xpu-smi mem", health_tool="xpu-smi health",
    agent_reads_through="xpu-smi", agent_backend="acme",
    words=LogWords(missing_libraries=re.compile(r"libacme\.so"), out_of_memory=re.compile(r"XPU out of memory"),
                   device_fault=re.compile(r"XPU \d+ melted"), collective_failure=re.compile(r"ACCL ERROR")),
    log=SimulatedLines(stack="torch 2.4.0+acme1", library="ACCL version 1.0", comm=("ACCL ERROR: peer vanished",),
                       oom="RuntimeError: XPU out of memory on XPU {gpu} ({total} GiB total)",
                       missing="ImportError: libacme.so.1: cannot open shared object file",
                       device="RuntimeError: XPU {gpu} melted", driver="acme 0000:{pci}:00.0: XPU {gpu} melted"),
    example=Example("acme", "XPU-L", "registry.local/pytorch:2.4-acme", "xpu-01"),
)


@pytest.fixture
def acme(monkeypatch):
    monkeypatch.setitem(VENDORS, ACME.name, ACME)
    return ACME


def test_every_vendor_of_the_catalogue_has_a_full_record():
    assert set(VENDORS) == set(VendorChoice.values)
    assert {vendor for _model, vendor, *_rest in KNOWN_MODELS} <= set(VENDORS)
    for name, record in VENDORS.items():
        assert record.name == name
        for field in dataclasses.fields(Vendor):
            if field.name not in ("model_resources", "sets_visible_devices", "env", "multi_node_env",
                                  "pod_ip_variable", "share_resources", "partitions", "example"):
                assert getattr(record, field.name), (name, field.name)
        assert all(dataclasses.astuple(record.words)), name
        assert all(getattr(record.log, f.name) for f in dataclasses.fields(SimulatedLines) if f.name != "comm"), name
        if record.partitions:
            assert record.resource in record.partitions  # a resource without its own falls back to this one
    assert DEFAULT_VENDOR in VENDORS


def test_an_unknown_vendor_is_refused_or_the_declared_default():
    with pytest.raises(UnknownVendor, match="unknown accelerator vendor 'intel'; known: nvidia"):
        vendors.vendor("intel")
    assert vendors.vendor("huawei") is vendors.HUAWEI
    assert vendors.vendor_or_default("intel") is vendors.vendor_or_default("") is VENDORS[DEFAULT_VENDOR]
    assert vendors.reading_order()[-1].name == DEFAULT_VENDOR


@pytest.mark.django_db
def test_the_catalogue_falls_back_to_the_declared_default():
    assert catalogue.vendor_of("no-such-model") == DEFAULT_VENDOR
    catalogue.note_model("Made-up 1", "intel", 1024)  # a vendor without a record is not catalogued
    catalogue.note_model("XPU-L", "huawei", 65536)
    assert catalogue.vendor_of("Made-up 1") == DEFAULT_VENDOR and catalogue.vendor_of("XPU-L") == "huawei"


@pytest.mark.parametrize("name", sorted(VENDORS))
def test_the_node_agent_has_a_backend_under_each_records_name(name):
    record = VENDORS[name]
    assert record.agent_backend in BACKENDS
    backend = make_backend(record.agent_backend, simulate=1, seed=1)
    assert backend.vendor == record.name and backend.resource_name == record.resource


def test_the_node_agents_default_is_the_registrys():
    assert VENDORS[DEFAULT_VENDOR].agent_backend == DEFAULT_BACKEND


def _spec(**changes) -> manifests.JobSpec:
    return dataclasses.replace(manifests.example_spec("single-node"), vendor="acme", gpu_model="XPU-L", **changes)


def test_a_new_record_is_all_the_manifests_need(acme):
    single = manifests.job("gp-", _spec(gpus_per_node=2), "http://portal")
    container = single["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert container["resources"]["limits"] == {"acme.com/xpu": "2"}
    assert env["GPUPORTAL_ACCELERATOR_VENDOR"] == "acme" and env["ACME_VISIBLE_DEVICES"] == "0,1"
    assert env["ACCL_LOG"] == "warn" and "ACCL_CONNECT_TIMEOUT" not in env and "ACCL_IF_IP" not in env
    multi = manifests.job("gp-", _spec(node_count=2, nodes=("xpu-01", "xpu-02")), "http://portal")
    env = {e["name"]: e.get("value", e.get("valueFrom"))
           for e in multi["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["ACCL_CONNECT_TIMEOUT"] == "900"
    assert env["ACCL_IF_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    # a quarter of a 16-core device: the smallest partition that holds it; a model of its own family
    assert manifests.gpu_limits(_spec(gpus_per_node=1, gpu_milli=250)) == {"acme.com/xpu-4c": "1"}
    assert manifests.gpu_limits(_spec(gpus_per_node=1, gpu_milli=600)) == {"acme.com/xpu": "1"}
    assert manifests.device_resource("acme", "XPU-S2") == "acme.com/xpu-small"
    assert manifests.gpu_limits(_spec(gpus_per_node=1, gpu_milli=500), {"acme": {"acme.com/slice": "{milli}"}}) == {
        "acme.com/slice": "500"}


def _failed_ranks(count: int = 1, vendor: str = "") -> list[PodState]:
    return [PodState(f"p{i}", node=f"n{i}", phase="Failed" if i == 0 else "Running", index=i, running=i != 0,
                     exit_code=1 if i == 0 else None, vendor=vendor) for i in range(count)]


def test_a_new_record_is_all_the_diagnosis_needs(acme):
    missing = diagnose(_failed_ranks(), logs={"p0": "ImportError: libacme.so.1: cannot open shared object file"})
    assert missing.category == "image" and "AcmeSDK" in missing.message and "Acme XPU" in missing.message
    oom = diagnose(_failed_ranks(), logs={"p0": "RuntimeError: XPU out of memory"})
    assert oom.category == "out_of_memory" and oom.evidence["vendor"] == "acme" and "xpu-smi mem" in oom.advice
    fault = diagnose(_failed_ranks(), logs={"p0": "XPU 3 melted"})
    assert fault.category == "gpu_fault" and "The Acme XPU failed" in fault.message
    assert "xpu-smi health" in fault.advice
    agent = diagnose(_failed_ranks(), agent_fault={"category": "gpu_fault", "node": "n0", "message": "hot",
                                                   "vendor": "acme"})
    assert agent.message == "Acme XPU fault on n0: hot" and agent.evidence["vendor"] == "acme"
    comm = diagnose(_failed_ranks(2), node_count=2, logs={"p0": "ACCL ERROR: peer vanished"})
    assert comm.category == "communication" and comm.evidence["library"] == "ACCL"
    assert "ACCL_SOCKET_IFNAME" in comm.advice and "xpu-smi health" in comm.advice
    # the default's generic words are the job's vendor's, as for every vendor
    generic = diagnose(_failed_ranks(2, vendor="acme"), node_count=2, logs={"p0": "Connection reset by peer"})
    assert generic.evidence["vendor"] == "acme" and "ACCL" in generic.message


def test_a_vendor_sharing_anothers_words_gets_its_lines(monkeypatch):
    """As Hygon reads AMD's HIP words: a line of the shared words is the job's vendor's when it shares them."""
    twin = dataclasses.replace(vendors.AMD, name="twin", device="Twin GPU", memory_tool="twin-smi")
    monkeypatch.setitem(VENDORS, "twin", twin)
    line = "hipErrorOutOfMemory: out of memory at hipMalloc"
    assert diagnose(_failed_ranks(vendor="twin"), logs={"p0": line}).evidence["vendor"] == "twin"
    assert diagnose(_failed_ranks(vendor="huawei"), logs={"p0": line}).evidence["vendor"] == "amd"


@pytest.mark.parametrize("ending", [FailureCategory.GPU_FAULT, FailureCategory.OUT_OF_MEMORY,
                                    FailureCategory.IMAGE, FailureCategory.COMMUNICATION])
def test_a_new_record_is_all_the_simulated_log_needs(acme, ending):
    started = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    nodes = ("xpu-01", "xpu-02") if ending == FailureCategory.COMMUNICATION else ("xpu-01",)
    run = simulated_log.Run(job_id=7, attempt=1, image="img", command="python train.py", gpu_model="XPU-L",
                            gpus_per_node=2, nodes=nodes, gpu_memory_gib=64.0, started=started,
                            stopped=started + timedelta(hours=1), scale=1.0, ending=ending, exit_code=1,
                            vendor="acme")
    streams = simulated_log.pod_streams(run, 200)
    text = {f"p{i}": "\n".join(line for _moment, line in lines) for i, lines in streams.items()}
    assert "torch 2.4.0+acme1, 2 device(s) visible: ACME_VISIBLE_DEVICES=0,1" in text["p0"]
    pods = _failed_ranks(len(nodes), vendor="acme")
    found = diagnose(pods, node_count=len(nodes), logs=text)
    assert found.category == ending and found.evidence["vendor"] == "acme"
