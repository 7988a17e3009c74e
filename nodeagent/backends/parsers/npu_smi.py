"""Huawei's ``npu-smi`` (Ascend NPUs): the ``npu-smi info`` table and the ``npu-smi info -t TYPE -i N -c C``
detail queries.

``npu-smi info`` prints a box table, two rows per chip::

    | NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
    | Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
    +===========================+===============+====================================================+
    | 0     910B3               | OK            | 93.6        40                0    / 0             |
    | 0                         | 0000:C1:00.0  | 0           0    / 0          3161 / 65536         |

(a card with several chips, like the Atlas 300I Duo, has one NPU row and a row per chip), followed by a
process table (``| NPU  Chip | Process id | Process name | Process memory(MB) |``). The detail queries print
``Key : value`` lines (see :func:`parse_key_values`).
"""

from __future__ import annotations

import re

from ..tools import number
from . import parse_key_values, parse_matrix

_NPU_ROW = re.compile(r"^(\d+)\s+(\S+)$")
_CHIP_ROW = re.compile(r"^(\d+)$")
_NPU_CHIP = re.compile(r"^(\d+)\s+(\d+)$")
_PAIR = re.compile(r"(\S+)\s*/\s*(\S+)")

__all__ = ["ascend_model", "parse_info", "parse_key_values", "parse_processes", "parse_topology"]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def ascend_model(name: str) -> str:
    """The catalogue's model name for the chip name npu-smi prints: ``910B3`` -> ``Ascend910B``,
    ``910`` -> ``Ascend910``, ``310P3`` -> ``Ascend310P`` (the trailing digit is the bin, not the model)."""
    bare = name.strip().removeprefix("Ascend").strip()
    found = re.match(r"^(\d{3}[A-Z]?)", bare)
    return f"Ascend{found.group(1)}" if found else (name.strip() or "Ascend")


def parse_info(text: str) -> list[dict]:
    """One dict per chip of ``npu-smi info``: npu, chip, name, health, power_w, temperature_c, bus_id,
    aicore_percent, memory_used_mb/memory_total_mb (DDR) and hbm_used_mb/hbm_total_mb (``None`` where NA)."""
    chips: list[dict] = []
    npu = None
    in_processes = False
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        cells = _cells(line)
        if any("Process id" in c for c in cells):
            in_processes = True
        if in_processes or len(cells) < 3:
            continue
        head = _NPU_ROW.match(cells[0])
        if head and not head.group(2).isdigit():
            values = cells[2].split()
            npu = {"npu": int(head.group(1)), "name": head.group(2), "health": cells[1] or None,
                   "power_w": number(values[0]) if values else None,
                   "temperature_c": number(values[1], int) if len(values) > 1 else None}
            continue
        chip = _CHIP_ROW.match(cells[0])
        if chip and npu is not None:
            pairs = _PAIR.findall(cells[2])
            first = cells[2].split()[:1]
            memory = pairs[0] if pairs else (None, None)
            hbm = pairs[1] if len(pairs) > 1 else (None, None)
            chips.append({**npu, "chip": int(chip.group(1)), "bus_id": cells[1] or None,
                          "aicore_percent": number(first[0], int) if first else None,
                          "memory_used_mb": number(memory[0], int), "memory_total_mb": number(memory[1], int),
                          "hbm_used_mb": number(hbm[0], int), "hbm_total_mb": number(hbm[1], int)})
    return chips


def parse_processes(text: str) -> list[dict]:
    """The process table of ``npu-smi info``: ``{"npu", "chip", "pid", "name", "memory_mb"}`` per row."""
    rows = []
    in_processes = False
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        cells = _cells(line)
        if any("Process id" in c for c in cells):
            in_processes = True
            continue
        if not in_processes or len(cells) < 4:
            continue
        where = _NPU_CHIP.match(cells[0])
        pid = number(cells[1], int)
        if where and pid is not None:
            rows.append({"npu": int(where.group(1)), "chip": int(where.group(2)), "pid": pid, "name": cells[2],
                         "memory_mb": number(cells[3], int)})
    return rows


def parse_health(text: str) -> dict:
    """``npu-smi info -t health``: ``{"health", "codes", "text"}``; "NA" or "0" codes mean none."""
    values = parse_key_values(text)
    health = values.get("Health Status") or values.get("Health") or None
    raw = values.get("Error Code") or ""
    codes = [c.strip() for c in re.split(r"[,\s]+", raw) if c.strip() and c.strip().upper() not in ("NA", "0")]
    info = values.get("Error Information") or ""
    return {"health": health, "codes": codes, "text": "" if info.upper() == "NA" else info}


def parse_ecc(text: str) -> dict:
    """``npu-smi info -t ecc``: HBM (else DDR) single/double-bit counts and double-bit isolated pages."""
    values = parse_key_values(text)

    def first(*keys):
        for key in keys:
            if number(values.get(key), int) is not None:
                return number(values.get(key), int)
        return None

    return {"sbe": first("HBM Single Bit Error Count", "DDR Single Bit Error Count"),
            "dbe": first("HBM Double Bit Error Count", "DDR Double Bit Error Count"),
            "dbe_pages": first("HBM Double Bit Isolated Pages Count", "DDR Double Bit Isolated Pages Count")}


def parse_topology(text: str) -> list[tuple[int, int, str]]:
    """``npu-smi info -t topo``: the NPU-by-NPU matrix (HCCS, PIX, PXB, PHB, SYS, SIO)."""
    return parse_matrix(text)
