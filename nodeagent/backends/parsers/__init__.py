"""Parsers for the vendors' command-line tools, one module per tool; pure functions of the text they print.

They are kept apart from the backends so that each can be tested against sample outputs alone, and so that a
format change in a new tool release is fixed in one place. Every parser is tolerant: a field it cannot read
becomes ``None`` (or is left out), never an exception, because an agent must keep answering.
"""

from __future__ import annotations

import re

_PAIR = re.compile(r"^\s*([^:]+?)\s*:\s*(.*?)\s*$")


def parse_key_values(text: str) -> dict[str, str]:
    """``Key : value`` lines (the detail queries of npu-smi) as a dict; other lines are skipped."""
    values = {}
    for line in text.splitlines():
        found = _PAIR.match(line)
        if found:
            values[found.group(1)] = found.group(2)
    return values


_MATRIX_NAME = re.compile(r"^(?:NPU|DCU|GPU|MLU)(\d+)$")


def parse_matrix(text: str) -> list[tuple[int, int, str]]:
    """A device-by-device topology matrix (``npu-smi info -t topo``, ``hy-smi --showtopotype``): the header
    row names the devices (NPU0 NPU1 …), each row starts with its device; ``X`` or ``0`` is the device itself.
    Returns ``(a, b, code)`` for each pair with a < b."""
    header: list[int] = []
    links = []
    for line in text.splitlines():
        cells = line.split()
        if not cells:
            continue
        if not header and len(cells) > 1 and _MATRIX_NAME.match(cells[0]) and _MATRIX_NAME.match(cells[1]):
            header = [int(m.group(1)) for m in map(_MATRIX_NAME.match, cells) if m]  # "CPU Affinity" left out
            continue
        row = _MATRIX_NAME.match(cells[0])
        if header and row:
            a = int(row.group(1))
            for b, code in zip(header, cells[1:], strict=False):
                if a < b:
                    links.append((a, b, code))
    return links
