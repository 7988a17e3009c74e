"""Diagnosis per vendor: each vendor's collective library failing across nodes, its device out of memory and its
device faults (from the log, or from the node agent) are told apart, with the line, pod and node as evidence and
the vendor's tool in the advice; device faults and collective failures are retried away from the node on a
Kubernetes cluster of Ascend NPUs, as NVIDIA's are."""

import pytest

from fleet.models import AcceleratorModel
from scheduling.executors.kubernetes.diagnosis import PodState, diagnose
from scheduling.jobs import submission
from scheduling.models import INFRASTRUCTURE_FAILURES, Job, JobStatus
from tests.conftest import job_payload
from tests.scheduling.kube import make_cluster, reset_client_caches

#: vendor, a collective failure as its library logs it, the library the diagnosis names, the tool it names
COLLECTIVE = [
    ("huawei", "[ERROR] HCCL(4211,python):2025-03-02-10:11:12.345.678 [hccl_socket.cc:208] EI0006: Getting socket "
               "times out. Reason: the remote rank did not connect", "HCCL", "npu-smi"),
    ("amd", "mi300x-02:4211:4290 [3] NCCL WARN NET/Socket : peer 10.0.3.2<46231> shutdown", "RCCL", "amd-smi"),
    ("cambricon", "[CNCL][ERROR] cnclAllReduce failed: CNCL_RET_ERR_TIMEOUT on comm 0x55d1", "CNCL", "cnmon"),
    ("hygon", "dcu-02:881:900 [0] NCCL WARN Call to ibv_poll_cq failed: remote access error", "RCCL", "hy-smi"),
]
#: vendor, the device out of memory as its runtime says it, the tool the advice names
OUT_OF_MEMORY = [
    ("amd", "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 3.20 GiB. GPU 0 has a total capacity "
            "of 191.98 GiB", "amd-smi"),
    ("huawei", "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.96 GiB total capacity)",
     "npu-smi"),
    ("huawei", "E39999: Inner Error! EL0004: Failed to allocate memory. Possible Cause: Available memory is "
               "insufficient.", "npu-smi"),
    ("huawei", "aclrtMalloc failed, error code 207001 (ACL_ERROR_RT_MEMORY_ALLOCATION)", "npu-smi"),
    ("cambricon", "CNRT error: CN_MEMORY_ERROR_OUT_OF_MEMORY, cnrtMalloc of 4294967296 bytes", "cnmon"),
    ("hygon", "hipErrorOutOfMemory: out of memory at hipMalloc", "hy-smi"),
]
#: vendor, a device fault as the driver or runtime logs it, the tool the advice names
DEVICE_FAULTS = [
    ("huawei", "[ERROR] RUNTIME: device 3 fault code: 0x80E18402 (HBM multi-bit ECC error)", "npu-smi"),
    ("huawei", "RuntimeError: ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR (507054) on device 5", "npu-smi"),
    ("amd", "HW Exception by GPU node-2 (Agent handle: 0x5e1c2a0) reason :GPU Hang", "amd-smi"),
    ("amd", "amdgpu 0000:0c:00.0: amdgpu: RAS: uncorrectable hardware error (UE) in UMC block", "amd-smi"),
    ("cambricon", "[CNDrv Error] MLU 2: uncorrectable ECC error detected, device needs reset", "cnmon"),
    ("hygon", "HW Exception by GPU node-1 (Agent handle: 0x1f) reason :GPU Hang", "hy-smi"),
]


def ranks(vendor: str = "", node_count: int = 2) -> list[PodState]:
    """Rank 1 failed (exit 1), the others wait on it; the pods say which vendor's devices they asked for."""
    return [PodState(f"gp-7-a0-{i}", node=f"node-{i}", phase="Failed" if i == 1 else "Running", index=i,
                     running=i != 1, exit_code=1 if i == 1 else None, vendor=vendor) for i in range(node_count)]


@pytest.mark.parametrize(("vendor", "line", "library", "tool"), COLLECTIVE)
def test_each_vendors_collective_failure_is_a_communication_failure(vendor, line, library, tool):
    logs = {"gp-7-a0-0": "step 400 loss 2.1", "gp-7-a0-1": f"step 400 loss 2.1\n{line}\nTraceback ..."}
    found = diagnose(ranks(vendor), node_count=2, logs=logs)
    assert found.category == "communication" and found.category in INFRASTRUCTURE_FAILURES
    assert library in found.message and line.strip() in found.message
    assert found.node == "node-1" and found.evidence["pod"] == "gp-7-a0-1"
    assert found.evidence["log_line"] == line.strip() and found.evidence["library"] == library
    assert tool in found.advice and found.evidence["hanging_ranks"] == [0]


def test_hccl_and_cncl_lines_tell_their_vendor_without_being_told():
    hccl = diagnose(ranks(), node_count=2, logs={"gp-7-a0-1": COLLECTIVE[0][1]})
    assert hccl.evidence["vendor"] == "huawei" and "HCCL_CONNECT_TIMEOUT" in hccl.advice
    cncl = diagnose(ranks(), node_count=2, logs={"gp-7-a0-1": COLLECTIVE[2][1]})
    assert cncl.evidence["vendor"] == "cambricon"
    # a variable named in a printed environment is no failure: the rank that failed is what is left to say
    quiet = diagnose(ranks("huawei"), node_count=2, logs={"gp-7-a0-1": "HCCL_CONNECT_TIMEOUT=1200"})
    assert quiet.category == "communication" and quiet.evidence["log_line"] == ""
    assert "HCCL" in quiet.message and "npu-smi" in quiet.advice


def test_nvidia_collective_failure_reads_as_before():
    line = "NCCL WARN NET/IB : Got completion with error 12"
    found = diagnose(ranks(), node_count=2, logs={"gp-7-a0-1": line})
    assert found.message == f"Cross-node communication failed: {line}" and "NCCL_SOCKET_IFNAME" in found.advice
    assert "vendor" not in found.evidence


@pytest.mark.parametrize(("vendor", "line", "tool"), OUT_OF_MEMORY)
def test_each_vendors_device_out_of_memory(vendor, line, tool):
    pod = PodState("gp-8-a0-0", node="n1", phase="Failed", exit_code=1, vendor=vendor)
    found = diagnose([pod], logs={pod.name: f"epoch 1\n{line}"})
    assert found.category == "out_of_memory" and found.category not in INFRASTRUCTURE_FAILURES
    assert line.strip() in found.message and tool in found.advice
    assert found.evidence["vendor"] == vendor and found.evidence["log_line"] == line.strip()
    assert (found.node, found.exit_code) == ("n1", 1)


@pytest.mark.parametrize(("vendor", "line", "tool"), DEVICE_FAULTS)
def test_each_vendors_device_fault_in_the_log_is_a_gpu_fault(vendor, line, tool):
    pod = PodState("gp-9-a0-0", node="n7", phase="Failed", exit_code=134, vendor=vendor)
    found = diagnose([pod], logs={pod.name: f"step 12\n{line}\nAborted (core dumped)"})
    assert found.category == "gpu_fault" and found.category in INFRASTRUCTURE_FAILURES
    assert found.node == "n7" and found.evidence["log_line"] == line.strip() and found.evidence["pod"] == pod.name
    assert tool in found.advice and found.evidence["vendor"] == vendor


def test_a_fault_the_agent_reported_names_the_vendor_and_its_tool():
    pod = PodState("gp-9-a0-0", node="n7", phase="Failed", exit_code=1)
    alarm = {"category": "gpu_fault", "node": "n7", "message": "NPU 3: alarm code 0x80E18402 (HBM multi-bit ECC)"}
    found = diagnose([pod], agent_fault=alarm, logs={pod.name: "RuntimeError: the device task aborted"})
    assert found.category == "gpu_fault" and found.node == "n7" and "npu-smi" in found.advice
    assert "Ascend NPU" in found.message and found.evidence["agent"] == alarm
    ras = {"category": "gpu_fault", "node": "n7", "message": "GPU 1: 3 uncorrectable ECC errors", "vendor": "amd"}
    assert "amd-smi" in diagnose([pod], agent_fault=ras).advice
    node = {"category": "node_fault", "node": "n7", "message": "the node agent stopped answering"}
    assert diagnose([pod], agent_fault=node).category == "node_fault"


def test_missing_vendor_libraries_are_an_image_problem():
    pod = PodState("p", phase="Failed", exit_code=1)
    found = diagnose([pod], logs={"p": "ImportError: libascendcl.so: cannot open shared object file"})
    assert found.category == "image" and "CANN" in found.message and "libascendcl" in found.message
    rocm = diagnose([pod], logs={"p": "OSError: libamdhip64.so.6: cannot open shared object file"})
    assert rocm.category == "image" and "ROCm" in rocm.message


@pytest.fixture
def ascend(users, tmp_path, settings):
    """A Kubernetes cluster of three Ascend 910B nodes on the fake API server."""
    settings.KUBERNETES = {**settings.KUBERNETES, "RETRIES": 3, "BACKOFF_SECONDS": 0.01}
    reset_client_caches()
    AcceleratorModel.objects.update_or_create(name="Ascend910B", defaults={"vendor": "huawei"})
    made = make_cluster(tmp_path, "kube-npu", node_count=3, model="Ascend910B")
    try:
        yield made
    finally:
        made.fake.stop()
        reset_client_caches()


@pytest.mark.django_db(transaction=True)
def test_hccl_failure_and_npu_fault_are_retried_away_from_the_node(ascend, users):
    payload = job_payload(gpu_model="Ascend910B", gpus_per_node=8, nodes=2, command="torchrun train.py")
    job = Job.objects.get(pk=submission.submit_job(users["alice"], payload).pk)
    namespace, name = ascend.objects_of(job)
    pods = ascend.fake.pods(namespace, name)
    failing = next(p for p in pods if p["metadata"]["annotations"].get(
        "batch.kubernetes.io/job-completion-index") == "1")["spec"]["nodeName"]
    ascend.fake.exit(namespace, name, code=1, index=1, log=f"step 3\n{COLLECTIVE[0][1]}")
    ascend.sync()
    job = Job.objects.get(pk=job.pk)
    assert (job.status, job.retry_count) == (JobStatus.QUEUED, 1)
    [attempt] = job.executor_state["attempts"]
    assert attempt["category"] == "communication" and attempt["node"] == failing
    assert attempt["evidence"]["library"] == "HCCL" and "EI0006" in attempt["evidence"]["log_line"]
    assert job.executor_state["avoid_nodes"]  # the failing node's id: not placed there again

    single = Job.objects.get(pk=submission.submit_job(users["alice"], job_payload(
        gpu_model="Ascend910B", gpus_per_node=8, command="python train.py")).pk)
    namespace, name = ascend.objects_of(single)
    ascend.fake.exit(namespace, name, code=134, log=DEVICE_FAULTS[1][1])
    ascend.sync()
    single = Job.objects.get(pk=single.pk)
    assert single.retry_count == 1 and single.executor_state["attempts"][0]["category"] == "gpu_fault"
    assert "npu-smi" in single.executor_state["attempts"][0]["advice"]
