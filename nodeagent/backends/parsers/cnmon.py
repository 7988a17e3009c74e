"""Cambricon's ``cnmon info``: one block per card, indented ``Key : value`` lines under section headers::

    Card 0
        Product Name                   : MLU370-X8
        Board Serial Number            : SN/2230100163
        Utilization
            MLU Average                : 35 %
        Physical Memory Usage
            Total                      : 49152 MiB
            Used                       : 1234 MiB
        ECC Info
            Corrected Error            : 0
            Uncorrected Error          : 0

:func:`parse_info` gives each card as a flat dict keyed by the path of sections (``"Physical Memory Usage/
Total"``); :func:`card_reading` turns one into the agent's fields.
"""

from __future__ import annotations

import re

from ..tools import number

_CARD = re.compile(r"^\s*Card\s+(\d+)\s*$")


def _indent(line: str) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())


def parse_info(text: str) -> dict[int, dict[str, str]]:
    cards: dict[int, dict[str, str]] = {}
    current = None
    sections: list[tuple[int, str]] = []  # (indent, name) of the open section headers
    for line in text.splitlines():
        if not line.strip():
            continue
        card = _CARD.match(line)
        if card:
            current = cards.setdefault(int(card.group(1)), {})
            sections = []
            continue
        if current is None:
            continue
        depth = _indent(line)
        while sections and sections[-1][0] >= depth:
            sections.pop()
        key, sep, value = line.strip().partition(":")
        if not sep:
            sections.append((depth, key.strip()))
            continue
        path = "/".join([*(name for _d, name in sections), key.strip()])
        current[path] = value.strip()
    return cards


def mlu_model(product_name: str) -> str:
    """The catalogue's model for cnmon's product name (``MLU370-X8`` stays ``MLU370-X8``)."""
    return (product_name or "").strip().removeprefix("Cambricon").strip()


def card_reading(fields: dict[str, str]) -> dict:
    """The agent's readings from one card's fields (``None`` where cnmon says N/A or nothing)."""

    def get(*keys, kind=float):
        for key in keys:
            value = number(fields.get(key), kind)
            if value is not None:
                return value
        return None

    return {
        "name": fields.get("Product Name") or None,
        "serial": fields.get("Board Serial Number") or None,
        "uuid": fields.get("UUID") or None,
        "driver_version": fields.get("Driver") or None,
        "memory_total_mb": get("Physical Memory Usage/Total", kind=int),
        "memory_used_mb": get("Physical Memory Usage/Used", kind=int),
        "utilization_gpu": get("Utilization/MLU Average", kind=int),
        "temperature_c": get("Temperature Info/Chip", "Temperature Info/Board", kind=int),
        "power_w": get("Power Info/Usage"),
        "ecc_volatile_sbe": get("ECC Info/Corrected Error", kind=int),
        "ecc_volatile_dbe": get("ECC Info/Uncorrected Error", kind=int),
        "health": fields.get("Health") or None,
    }
