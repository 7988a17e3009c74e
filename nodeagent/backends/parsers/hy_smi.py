"""Hygon's ``hy-smi`` (DCUs; a ROCm-SMI derivative): per-device lines ``DCU[i]  : Key: value``.

The agent asks for everything in one call (``hy-smi --showproductname --showuniqueid --showmeminfo vram
--showuse --showtemp --showpower --showrasinfo all``); each option adds its section, every line prefixed with
the device. RAS rows are tables (``Block  Status  Correctable Error  Uncorrectable Error``).
``--showtopotype`` prints a DCU-by-DCU link matrix (:func:`parse_matrix`).
"""

from __future__ import annotations

import re

from ..tools import number
from . import parse_matrix

_LINE = re.compile(r"^\s*(?:DCU|GPU)\[(\d+)\]\s*:\s*(.*?)\s*$")

__all__ = ["dcu_model", "device_reading", "parse_devices", "parse_matrix"]


def parse_devices(text: str) -> dict[int, dict]:
    """``{index: {"fields": {key: value}, "ras": {block: (correctable, uncorrectable)}}}``."""
    devices: dict[int, dict] = {}
    for line in text.splitlines():
        found = _LINE.match(line)
        if not found:
            continue
        device = devices.setdefault(int(found.group(1)), {"fields": {}, "ras": {}})
        content = found.group(2)
        key, sep, value = content.partition(": ")
        if sep:
            device["fields"][key.strip()] = value.strip()
            continue
        cells = content.split()
        if len(cells) == 4 and cells[2].isdigit() and cells[3].isdigit():
            device["ras"][cells[0].upper()] = (int(cells[2]), int(cells[3]))
    return devices


def dcu_model(series: str) -> str:
    """The catalogue's model for hy-smi's card series: ``K100``, ``K100_AI``, ``Z100L`` -> ``K100``, ``Z100``."""
    found = re.search(r"\b([KZ]\d{3})", series or "")
    return found.group(1) if found else (series or "").strip()


def _mib(fields: dict, stem: str):
    for key, value in fields.items():
        if key.startswith(stem):
            amount = number(value, int)
            if amount is None:
                return None
            return amount // 2**20 if "(B)" in key else amount
    return None


def device_reading(device: dict) -> dict:
    fields, ras = device["fields"], device["ras"]
    temperature = next((number(v, int) for k, v in fields.items() if k.startswith("Temperature")
                        and number(v) is not None), None)
    power = next((number(v) for k, v in fields.items() if "Power" in k and "(W)" in k), None)
    return {
        "name": fields.get("Card series") or None,
        "uuid": fields.get("Unique ID") or None,
        "memory_total_mb": _mib(fields, "vram Total Memory"),
        "memory_used_mb": _mib(fields, "vram Total Used Memory"),
        "utilization_gpu": number(fields.get("DCU use (%)", fields.get("GPU use (%)")), int),
        "temperature_c": temperature, "power_w": power,
        "ecc_volatile_sbe": sum(c for c, _u in ras.values()) if ras else None,
        "ecc_volatile_dbe": sum(u for _c, u in ras.values()) if ras else None,
    }
