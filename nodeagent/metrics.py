"""Prometheus text exposition with DCGM exporter names, so existing dashboards work unchanged."""

from __future__ import annotations

GPU_SERIES = [  # (metric, snapshot field, help, scale)
    ("DCGM_FI_DEV_GPU_UTIL", "utilization_gpu", "GPU utilisation (%).", 1),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "utilization_memory", "Memory utilisation (%).", 1),
    ("DCGM_FI_DEV_FB_USED", "memory_used_mb", "Framebuffer memory used (MiB).", 1),
    ("DCGM_FI_DEV_GPU_TEMP", "temperature_c", "GPU temperature (C).", 1),
    ("DCGM_FI_DEV_POWER_USAGE", "power_w", "Power draw (W).", 1),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "energy_j", "Total energy since boot (mJ).", 1000),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "ecc_volatile_dbe", "Volatile double-bit ECC errors.", 1),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "ecc_volatile_sbe", "Volatile single-bit ECC errors.", 1),
    ("DCGM_FI_DEV_XID_ERRORS", "last_xid", "Last XID error seen.", 1),
]


def _escape(value) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def render(snapshot: dict) -> str:
    lines = []
    node = snapshot.get("node", "")
    for metric, field, help_text, scale in GPU_SERIES:
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
        for gpu in snapshot.get("gpus", []):
            value = gpu.get(field)
            if value is None:
                continue
            labels = f'gpu="{gpu["index"]}",UUID="{_escape(gpu.get("uuid", ""))}",Hostname="{_escape(node)}"'
            lines.append(f"{metric}{{{labels}}} {value * scale:g}")
    lines += ["# HELP gpuportal_gpu_lost 1 when the GPU stopped answering NVML.", "# TYPE gpuportal_gpu_lost gauge"]
    for gpu in snapshot.get("gpus", []):
        lines.append(f'gpuportal_gpu_lost{{gpu="{gpu["index"]}",Hostname="{_escape(node)}"}} '
                     f'{int(gpu.get("state") == "lost")}')
    host = snapshot.get("host", {})
    for key in ("cpu_percent", "memory_percent", "net_rx_bytes_per_s", "net_tx_bytes_per_s", "ib_rx_bytes_per_s",
                "ib_tx_bytes_per_s", "disk_read_bytes_per_s"):
        if host.get(key) is not None:
            lines += [f"# TYPE gpuportal_node_{key} gauge", f'gpuportal_node_{key}{{Hostname="{_escape(node)}"}} '
                      f"{host[key]:g}"]
    lines += ["# TYPE gpuportal_agent_info gauge",
              f'gpuportal_agent_info{{version="{_escape(snapshot.get("agent_version", ""))}",'
              f'driver="{_escape(snapshot.get("driver_version") or "")}",Hostname="{_escape(node)}"}} 1']
    return "\n".join(lines) + "\n"
