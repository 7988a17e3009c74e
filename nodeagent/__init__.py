"""The gpuportal node agent: a small standalone program per GPU node.

It reads accelerators through a device backend (NVIDIA through NVML, AMD through amdsmi, Huawei Ascend through
npu-smi, Cambricon through cnmon, Hygon through hy-smi), the host's CPU, memory, network and storage counters,
and serves them as JSON (`/v1/snapshot`) and Prometheus text (`/metrics`). It imports nothing of the portal
and needs only the standard library plus its vendor's library (`nvidia-ml-py`; `amdsmi` on AMD nodes).
"""

VERSION = "0.1.0"
