"""Prometheus text exposition with DCGM exporter names, so existing dashboards work unchanged.

Every family is declared with HELP and TYPE even when no GPU reports it (an Xid only appears once one was
seen), so the output passes ``promtool check metrics`` and a scrape always lists what the agent can export.
The DCGM names keep DCGM's spelling (upper case, ``_TOTAL`` inside names of gauges) because dashboards and
alerts written for ``dcgm-exporter`` look for exactly those; the agent's own families follow Prometheus'
rules (units spelled out, no abbreviations).

Every vendor's devices go out under these same names (the DCGM names mean "the accelerator's utilisation,
memory…", whoever made it), each device series labelled with ``vendor`` (``nvidia``, ``amd``, ``huawei``,
``cambricon``, ``hygon``) so a dashboard can split or filter a mixed fleet; ``gpuportal_gpu_info`` adds the
catalogue's ``model`` per device.
"""

from __future__ import annotations

import math

GPU_SERIES = [  # (metric, snapshot field, help, scale)
    ("DCGM_FI_DEV_GPU_UTIL", "utilization_gpu", "GPU utilisation (%).", 1),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "utilization_memory", "Memory utilisation (%).", 1),
    ("DCGM_FI_DEV_FB_USED", "memory_used_mb", "Framebuffer memory used (MiB).", 1),
    ("DCGM_FI_DEV_GPU_TEMP", "temperature_c", "GPU temperature (C).", 1),
    ("DCGM_FI_DEV_POWER_USAGE", "power_w", "Power draw (W).", 1),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "energy_j", "Total energy since boot (mJ).", 1000),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "ecc_volatile_dbe", "Volatile double-bit ECC errors.", 1),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "ecc_volatile_sbe", "Volatile single-bit ECC errors.", 1),
    ("DCGM_FI_DEV_XID_ERRORS", "last_xid", "Last XID error seen (absent until one is).", 1),
]

HOST_SERIES = [  # (metric, snapshot ``host`` field, help)
    ("gpuportal_node_cpu_percent", "cpu_percent", "CPU busy share of the node (%)."),
    ("gpuportal_node_memory_percent", "memory_percent", "Memory in use on the node (%)."),
    ("gpuportal_node_net_rx_bytes_per_second", "net_rx_bytes_per_s", "Bytes received over Ethernet per second."),
    ("gpuportal_node_net_tx_bytes_per_second", "net_tx_bytes_per_s", "Bytes sent over Ethernet per second."),
    ("gpuportal_node_ib_rx_bytes_per_second", "ib_rx_bytes_per_s", "Bytes received over InfiniBand per second."),
    ("gpuportal_node_ib_tx_bytes_per_second", "ib_tx_bytes_per_s", "Bytes sent over InfiniBand per second."),
    ("gpuportal_node_disk_read_bytes_per_second", "disk_read_bytes_per_s", "Bytes read from local disks per second."),
]


def _number(value) -> str:
    """A sample value in full (``%g`` keeps 6 digits: the energy counter would stop moving between scrapes)."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def _escape(value) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def _family(lines: list[str], metric: str, help_text: str) -> None:
    lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]


def render(snapshot: dict) -> str:
    lines: list[str] = []
    node = _escape(snapshot.get("node", ""))
    default_vendor = snapshot.get("vendor") or "nvidia"  # an agent before vendors were reported read NVML

    def vendor(gpu) -> str:
        return _escape(gpu.get("vendor") or default_vendor)

    for metric, field, help_text, scale in GPU_SERIES:
        _family(lines, metric, help_text)
        for gpu in snapshot.get("gpus", []):
            value = gpu.get(field)
            if value is None:
                continue
            labels = (f'gpu="{gpu["index"]}",UUID="{_escape(gpu.get("uuid", ""))}",Hostname="{node}",'
                      f'vendor="{vendor(gpu)}"')
            lines.append(f"{metric}{{{labels}}} {_number(value * scale)}")
    _family(lines, "gpuportal_gpu_lost", "1 when the device stopped answering its vendor's library or tool.")
    for gpu in snapshot.get("gpus", []):
        lines.append(f'gpuportal_gpu_lost{{gpu="{gpu["index"]}",Hostname="{node}",vendor="{vendor(gpu)}"}} '
                     f'{int(gpu.get("state") == "lost")}')
    _family(lines, "gpuportal_gpu_info", "Always 1; the labels say the device's vendor and catalogue model.")
    for gpu in snapshot.get("gpus", []):
        lines.append(f'gpuportal_gpu_info{{gpu="{gpu["index"]}",UUID="{_escape(gpu.get("uuid", ""))}",'
                     f'Hostname="{node}",vendor="{vendor(gpu)}",model="{_escape(gpu.get("model") or "")}"}} 1')
    host = snapshot.get("host", {})
    for metric, field, help_text in HOST_SERIES:
        _family(lines, metric, help_text)
        if host.get(field) is not None:
            lines.append(f'{metric}{{Hostname="{node}"}} {_number(host[field])}')
    _family(lines, "gpuportal_agent_info", "Always 1; the labels say the agent's and the driver's versions.")
    lines.append(f'gpuportal_agent_info{{version="{_escape(snapshot.get("agent_version", ""))}",'
                 f'driver="{_escape(snapshot.get("driver_version") or "")}",Hostname="{node}"}} 1')
    return "\n".join(lines) + "\n"
