"""Everything the portal knows about an accelerator vendor, in one record per vendor.

Where to add a vendor: one :class:`Vendor` record in :data:`VENDORS` (its device plugin's resource name, the
variables its runtime reads, its software stack and collective library, its tools, the words its logs fail
with, what a simulated run of it prints, the node agent's backend for it), a value in
``fleet.models.Vendor`` (the catalogue stores the name), and a backend in ``nodeagent/backends/`` under the
record's ``agent_backend`` (the agent imports nothing of the portal, so it keeps its own table; a test checks
that the two agree). Kubernetes manifests, the failure diagnosis, the simulated log, the catalogue and the
poller of the agents read the record and need nothing else: a test builds a made-up vendor and sees them use it.

Where nothing says whose devices a job or a device is (a model the catalogue does not know, an agent that
predates vendors), it is the :data:`DEFAULT_VENDOR`'s: :func:`vendor_or_default` is that decision, and
:func:`vendor` refuses a name it does not know.

Plain data, no database: the manifests of ``k8s_manifests --example`` and the diagnosis read it without one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy


@dataclass(frozen=True)
class Partitions:
    """A device resource's static partitions (Ascend's vNPU templates): the AI cores of one chip and the cores
    of each template; a template's resource is ``<device resource>-<cores>c``."""

    cores: int
    templates: tuple[int, ...]


@dataclass(frozen=True)
class LogWords:
    """How the vendor's software says that something failed, as the failure diagnosis reads a job's log.

    Patterns shared with another vendor (Hygon's are AMD's: both run HIP and RCCL) are the same objects: a line
    they match is the job's own vendor's when it is one of them."""

    missing_libraries: re.Pattern | None = None
    out_of_memory: re.Pattern | None = None
    device_fault: re.Pattern | None = None
    collective_failure: re.Pattern | None = None


@dataclass(frozen=True)
class SimulatedLines:
    """What a program prints on the vendor's devices in the simulated executor's log (its stack and collective
    library, and the line of each kind of failure), so that a simulated failure reads, and is diagnosed, as a
    real one on that hardware. ``{gpu}``, ``{total}``, ``{free}``, ``{used}`` and ``{pci}`` are filled in.
    The program's own output: never translated."""

    stack: str
    library: str
    oom: str
    missing: str
    device: str
    driver: str
    comm: tuple[str, ...] = ()


@dataclass(frozen=True)
class Example:
    """A single-node job on the vendor's devices for ``k8s_manifests --example <name>``."""

    name: str
    model: str
    image: str
    node: str


@dataclass(frozen=True)
class Vendor:
    """One accelerator vendor: how a job asks the cluster for its devices, what its container learns, how its
    failures read and what a simulated run of it prints."""

    #: The catalogue's name (``fleet.models.Vendor``), also what dispatch tells a container.
    name: str
    #: What its device is called in a sentence (translated).
    device: str | Promise
    #: The extended resource its Kubernetes device plugin advertises for one whole device.
    resource: str
    #: The variable its runtime reads the visible devices from (what a program prints).
    visible_devices: str
    #: Its software stack (an image built for one does not run on another's devices) and collective library.
    stack: str
    library: str
    #: The collective library's settings to check when cross-node traffic keeps failing.
    library_settings: str
    #: The tool that shows the memory each process holds on a device, and the device's health.
    memory_tool: str
    health_tool: str
    #: What its node agent backend reads devices through (said in the reasons of health changes).
    agent_reads_through: str
    #: The node agent's backend for it (``nodeagent.backends.BACKENDS``).
    agent_backend: str
    words: LogWords
    log: SimulatedLines
    #: Models its device plugin advertises under another resource, by model-name prefix (an Ascend 310P).
    model_resources: tuple[tuple[str, str], ...] = ()
    #: Dispatch sets ``visible_devices`` itself (the runtime's logical indices, counted from 0 in the pod);
    #: False where the device plugin sets the visibility alone.
    sets_visible_devices: bool = False
    #: What its container learns beyond the device plugin's own variables (a job's own environment wins).
    env: Mapping[str, str] = field(default_factory=dict)
    #: What it learns when the job spans nodes, and the variable that gets the pod's own address then.
    multi_node_env: Mapping[str, str] = field(default_factory=dict)
    pod_ip_variable: str = ""
    #: How a share of one device is asked for when the cluster names nothing: extended resources HAMi style
    #: (``{percent}``, ``{milli}``), or the static partitions of each device resource (the vendor's own
    #: resource's for a resource they do not name); neither: a share takes a whole device.
    share_resources: Mapping[str, str] | None = None
    partitions: Mapping[str, Partitions] = field(default_factory=dict)
    example: Example | None = None


# --- the words of each vendor's failures -------------------------------------------------------------------

#: NVIDIA's words are also the generic ones (PyTorch's ``OutOfMemoryError``, a reset connection): a line they
#: match is the job's own vendor's, so they are read after every other vendor's.
_CUDA = LogWords(
    missing_libraries=re.compile(r"libcudart\.so|libcuda\.so|libnccl\.so|libcudnn|CUDA driver version is "
                                 r"insufficient|no CUDA-capable device|cannot open shared object file", re.I),
    out_of_memory=re.compile(r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|"
                             r"cudaErrorMemoryAllocation", re.I),
    # the driver's word that the GPU itself failed (an Xid, a GPU lost from the bus, an uncorrectable ECC error)
    device_fault=re.compile(r"NVRM: Xid|\bXid \d+|GPU has fallen off the bus|uncorrectable ECC error", re.I),
    collective_failure=re.compile(r"NCCL (WARN|ERROR)|ncclSystemError|ncclInternalError|ncclRemoteError|"
                                  r"Watchdog caught collective operation timeout|ProcessGroupNCCL.*(timeout|Timeout)|"
                                  r"Gloo.*(timeout|Connection closed)|Connection reset by peer|NET/IB.*(error|failed)",
                                  re.I),
)
#: Ascend: CANN's libraries, ``EL0004`` / ACL 207001, alarm (fault) codes, HBM ECC and ACL device errors,
#: HCCL's error codes EI0002..EI0009, ``HCCL_E_*`` results and its timeouts.
_ASCEND = LogWords(
    missing_libraries=re.compile(r"libascendcl\.so|libhccl\.so|libge_runner\.so|libruntime\.so.*Ascend|"
                                 r"Can not find the CANN|torch_npu.*(cannot|No module)", re.I),
    out_of_memory=re.compile(r"NPU out of memory|\bEL0004\b|ACL_ERROR_RT_MEMORY_ALLOCATION|\b207001\b|"
                             r"aclrtMalloc.*fail", re.I),
    device_fault=re.compile(r"(alarm|fault)[ _-]?code\W{0,3}(0x)?8[0-9A-F]{7}\b|ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR|"
                            r"ACL_ERROR_RT_DEVICE_MEM_ERROR|ACL_ERROR_RT_LINK_ERROR|\b50705[346]\b|"
                            r"HBM.*(multi[- ]?bit|uncorrectable).*ECC|"
                            r"\b(NPU|davinci\d*)\b.*(heartbeat lost|device lost|link down)", re.I),
    collective_failure=re.compile(r"HCCL_ERROR|HCCL_E_[A-Z]+|HCCL function error|\bEI000[2-9]\b|"
                                  r"ProcessGroupHCCL.*(timeout|error)|\bHCCL\b[^=\n]*\b(timed out|timeout|failed)\b",
                                  re.I),
)
#: Cambricon: Neuware's libraries, CNRT out of memory, ECC and hang reports, CNCL.
_CAMBRICON = LogWords(
    missing_libraries=re.compile(r"libcnrt\.so|libcncl\.so|libcnnl\.so|libcndrv\.so|No MLU devices|"
                                 r"No module named 'torch_mlu'", re.I),
    out_of_memory=re.compile(r"MLU out of memory|CN_MEMORY_ERROR_OUT_OF_MEMORY|cnrtErrorNoMem|"
                             r"CNRT_RET_ERR_NOMEM|CNNL_STATUS_ALLOC_FAILED", re.I),
    device_fault=re.compile(r"CN_ERROR_ECC|CN_CONTEXT_ERROR_ECC|cnrtErrorECC|MLU.*(uncorrectable|ECC error|"
                            r"unrecoverable|heartbeat lost|\bhang\b)|CNDrv.*(ECC|\bhang\b|heartbeat)", re.I),
    collective_failure=re.compile(r"CNCL (WARN|ERROR)|CNCL_RET_ERR_[A-Z_]+|cnclRemoteError|cnclSystemError|"
                                  r"ProcessGroupCNCL.*(timeout|error)|\bCNCL\b[^=\n]*\b(timed out|timeout|failed)\b",
                                  re.I),
)
#: HIP and RCCL, which AMD and Hygon share: ROCm's libraries, HIP out of memory, the RAS events (uncorrectable
#: ECC, poison, XGMI), the HSA runtime's hardware exception, a GPU reset; RCCL (which logs as NCCL too).
_HIP = LogWords(
    missing_libraries=re.compile(r"libamdhip64\.so|librccl\.so|libhsa-runtime64\.so|libMIOpen\.so|"
                                 r"No ROCm-capable device|hipErrorNoDevice|hipErrorInsufficientDriver", re.I),
    out_of_memory=re.compile(r"HIP out of memory|hipErrorOutOfMemory|hipErrorMemoryAllocation|"
                             r"HIPBLAS_STATUS_ALLOC_FAILED|rocBLAS error.*memory", re.I),
    device_fault=re.compile(r"HW Exception by GPU node-\d+|hipErrorECCNotCorrectable|amdgpu.*(RAS|uncorrectable|"
                            r"poison|GPU reset begin|ring .* timeout)|\bRAS\b.*(uncorrectable|poison|\bUE\b)|"
                            r"XGMI.*(error|link down|fatal)", re.I),
    collective_failure=re.compile(r"RCCL (WARN|ERROR)|\bRCCL\b[^=\n]*\b(timeout|failed)\b", re.I),
)

_AMD_LINES = SimulatedLines(
    stack="torch 2.4.0+rocm6.1", library="RCCL version 2.20.5+hip6.1",
    comm=("RCCL WARN NET/Socket : peer closed the connection",),
    oom="torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.50 GiB. GPU {gpu} has a total capacity of "
        "{total} GiB of which {free} GiB is free.",
    missing="ImportError: libamdhip64.so.6: cannot open shared object file: No such file or directory",
    device="RuntimeError: HIP error: an illegal memory access was encountered",
    driver="amdgpu 0000:{pci}:00.0: amdgpu: RAS: uncorrectable error detected (poison consumed) on GPU {gpu}",
)

# --- the vendors ---------------------------------------------------------------------------------------------

NVIDIA = Vendor(
    name="nvidia", device=gettext_lazy("NVIDIA GPU"), resource="nvidia.com/gpu",
    visible_devices="CUDA_VISIBLE_DEVICES", stack="CUDA", library="NCCL",
    library_settings="NCCL_SOCKET_IFNAME / NCCL_IB_HCA", memory_tool="nvidia-smi", health_tool="nvidia-smi -q",
    agent_reads_through="NVML", agent_backend="nvidia", words=_CUDA,
    # HAMi's names for a share of a GPU
    share_resources={"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "{percent}",
                     "nvidia.com/gpucores": "{percent}"},
    log=SimulatedLines(
        stack="torch 2.4.0+cu124", library="NCCL INFO NCCL version 2.21.5+cuda12.4",
        oom="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU {gpu} has a total capacity "
            "of {total} GiB of which {free} GiB is free. Of the allocated memory {used} GiB is allocated by PyTorch.",
        missing="ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
        device="RuntimeError: CUDA error: unspecified launch failure",
        driver="NVRM: Xid (PCI:0000:{pci}:00): 79, pid=2231, name=python, GPU has fallen off the bus."),
)
#: Huawei Ascend (MindCluster device plugin). The Ascend runtime's own ``ASCEND_VISIBLE_DEVICES`` is the
#: plugin's; the logical indices (``ASCEND_RT_VISIBLE_DEVICES``) are dispatch's. plog errors go to stdout, so
#: that the pod log carries the EL/EI error codes. Ranks on several nodes start at different times (image
#: pulls): HCCL's 120 s default to connect is short, and its first contact goes over the pod's own address.
#: The static vNPU templates: a share of a card gets the smallest template with at least that share of the
#: cores (0.25 of a 32-core Ascend 910: ``huawei.com/Ascend910-8c``); a share no template holds, a whole card.
HUAWEI = Vendor(
    name="huawei", device=gettext_lazy("Ascend NPU"), resource="huawei.com/Ascend910",
    model_resources=(("Ascend310P", "huawei.com/Ascend310P"), ("Ascend310", "huawei.com/Ascend310")),
    visible_devices="ASCEND_RT_VISIBLE_DEVICES", sets_visible_devices=True,
    env={"ASCEND_GLOBAL_LOG_LEVEL": "3", "ASCEND_SLOG_PRINT_TO_STDOUT": "1"},
    multi_node_env={"HCCL_CONNECT_TIMEOUT": "1200"}, pod_ip_variable="HCCL_IF_IP",
    partitions={"huawei.com/Ascend910": Partitions(32, (2, 4, 8, 16)),
                "huawei.com/Ascend310P": Partitions(8, (1, 2, 4))},
    stack="CANN", library="HCCL", library_settings="HCCL_IF_IP / HCCL_SOCKET_IFNAME / HCCL_CONNECT_TIMEOUT",
    memory_tool="npu-smi info", health_tool="npu-smi info -t health -i <id>", agent_reads_through="npu-smi",
    agent_backend="ascend", words=_ASCEND,
    log=SimulatedLines(
        stack="torch 2.1.0, torch_npu 2.1.0.post6", library="HCCL version 7.3",
        comm=("[ERROR] HCCL(2231,python): [hccl_communicator.cc:412] HCCL_E_TIMEOUT: EI0006: Getting socket times "
              "out.",),
        oom="RuntimeError: NPU out of memory. Tried to allocate 2.50 GiB (NPU {gpu}; {total} GiB total capacity; "
            "{free} GiB free)",
        missing="ImportError: libascendcl.so: cannot open shared object file: No such file or directory",
        device="RuntimeError: ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR: HBM multi-bit ECC error on NPU {gpu}",
        driver="npu-smi: NPU {gpu} health Alarm, alarm code: 0x80E01801 (HBM multi-bit ECC error)"),
    example=Example("ascend", "Ascend910B", "registry.local/pytorch-npu:2.4-cann8.0", "ascend-01"),
)
#: Cambricon: the runtime's logical indices are ``MLU_VISIBLE_DEVICES``; CNCL logs its warnings.
CAMBRICON = Vendor(
    name="cambricon", device=gettext_lazy("Cambricon MLU"), resource="cambricon.com/mlu",
    visible_devices="MLU_VISIBLE_DEVICES", sets_visible_devices=True, env={"CNCL_LOG_LEVEL": "WARNING"},
    stack="Cambricon Neuware", library="CNCL", library_settings="CNCL_SOCKET_IFNAME / CNCL_LOG_LEVEL",
    memory_tool="cnmon", health_tool="cnmon info", agent_reads_through="cnmon", agent_backend="cambricon",
    words=_CAMBRICON,
    log=SimulatedLines(
        stack="torch 2.1.0, torch_mlu 1.20.0", library="CNCL version 1.17.0",
        comm=("CNCL ERROR: cnclRemoteError: a remote rank exited or the network failed",),
        oom="RuntimeError: MLU out of memory. Tried to allocate 2.50 GiB (MLU {gpu}; {total} GiB total)",
        missing="ImportError: libcnrt.so: cannot open shared object file: No such file or directory",
        device="RuntimeError: CN_ERROR_ECC: uncorrectable ECC error on MLU {gpu}",
        driver="cambricon 0000:{pci}:00.0: MLU {gpu}: uncorrectable ECC error"),
    example=Example("cambricon", "MLU370-X8", "registry.local/pytorch-mlu:2.1-neuware", "mlu-01"),
)
#: AMD Instinct: the plugin hands the pod its device nodes; RCCL reads NCCL's names and logs its warnings.
AMD = Vendor(
    name="amd", device=gettext_lazy("AMD GPU"), resource="amd.com/gpu", visible_devices="HIP_VISIBLE_DEVICES",
    env={"NCCL_DEBUG": "WARN"}, stack="ROCm", library="RCCL", library_settings="NCCL_SOCKET_IFNAME / NCCL_IB_HCA",
    memory_tool="amd-smi monitor", health_tool="amd-smi metric --ecc", agent_reads_through="amdsmi",
    agent_backend="amd", words=_HIP, log=_AMD_LINES,
    example=Example("amd", "MI300X", "registry.local/pytorch:2.4-rocm6.2", "mi300x-01"),
)
#: Hygon DCU: HIP and RCCL as AMD's, with its own stack (DTK); dispatch sets the logical indices.
HYGON = Vendor(
    name="hygon", device=gettext_lazy("Hygon DCU"), resource="hygon.com/dcu", visible_devices="HIP_VISIBLE_DEVICES",
    sets_visible_devices=True, env={"NCCL_DEBUG": "WARN"}, stack="DTK", library="RCCL",
    library_settings="NCCL_SOCKET_IFNAME / NCCL_IB_HCA", memory_tool="hy-smi", health_tool="hy-smi",
    agent_reads_through="hy-smi", agent_backend="hygon", words=_HIP,
    log=replace(_AMD_LINES, stack="torch 2.1.0+das1.1.dtk24.04", library="RCCL version 2.18.3+dtk24.04"),
    example=Example("hygon", "K100", "registry.local/pytorch:2.1-dtk24.04", "dcu-01"),
)

#: Every vendor by name, in the order the diagnosis reads their words (the default's generic ones last,
#: whatever its place here).
VENDORS: dict[str, Vendor] = {v.name: v for v in (NVIDIA, HUAWEI, CAMBRICON, AMD, HYGON)}
#: Whose devices they are when nothing says: the portal's first vendor (a model the catalogue does not know,
#: an agent that predates vendors, a cluster's flat share mapping, a tenant's single GPU limit).
DEFAULT_VENDOR = NVIDIA.name


class UnknownVendor(LookupError):
    """A vendor name no record has."""

    def __init__(self, name: str):
        super().__init__(f"unknown accelerator vendor {name!r}; known: {', '.join(VENDORS)} (fleet/vendors.py)")
        self.name = name


def vendor(name: str) -> Vendor:
    """The record of ``name``; :class:`UnknownVendor` when there is none."""
    try:
        return VENDORS[name]
    except KeyError:
        raise UnknownVendor(name) from None


def vendor_or_default(name: str | None) -> Vendor:
    """The record of ``name``, or the :data:`DEFAULT_VENDOR`'s when the name is empty or unknown."""
    return VENDORS.get(name or "") or VENDORS[DEFAULT_VENDOR]


def default_vendor() -> Vendor:
    return VENDORS[DEFAULT_VENDOR]


def reading_order() -> list[Vendor]:
    """The vendors in the order their failure words are tried: the registry's, the default last (its words are
    the generic ones, an ``OutOfMemoryError`` ends every PyTorch device's message)."""
    return [v for v in VENDORS.values() if v.name != DEFAULT_VENDOR] + [default_vendor()]
