"""The one place the settings read the environment.

Every variable is read through one of these functions, so that each is parsed the same way and a wrong value
stops start-up with one kind of message: the variable's name, what it must be, and what it was. A variable that
is not set gives the default; one that is set, even to an empty string, is taken as given (an empty
``GPUPORTAL_AGENT_NETWORKS`` means "no network", not "the default networks").
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def misconfigured(name: str, requirement: str, detail: str = "") -> ImproperlyConfigured:
    """The settings' one error form, ``NAME must <requirement>[: detail]``: it names the variable to change."""
    return ImproperlyConfigured(f"{name} must {requirement}" + (f": {detail}" if detail else ""))


def env_str(name: str, default: str = "") -> str:
    value = os.environ.get(name)
    return default if value is None else value


def env_optional(name: str) -> str | None:
    """The value, or None when the variable is not set (a setting whose absence means "none")."""
    return os.environ.get(name)


def env_is_set(name: str) -> bool:
    """Whether ``name`` holds a value; an empty one counts as unset (the switch is then off)."""
    return bool(os.environ.get(name))


def env_required(name: str) -> str:
    """A value production cannot guess (a key, a database): start-up fails naming it rather than falling back
    to a demo default. An empty value counts as missing."""
    value = os.environ.get(name)
    if not value:
        raise misconfigured(name, "be set when GPUPORTAL_ENV=production")
    return value


def env_str_or_default(name: str, default: str) -> str:
    """Like ``env_str``, but an empty value gives the default too: for the values production requires, whose
    embedded defaults stand in for them."""
    return os.environ.get(name) or default


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise misconfigured(name, f"be a whole number, not {value!r}") from None


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None:
        return float(default)
    try:
        return float(value)
    except ValueError:
        raise misconfigured(name, f"be a number, not {value!r}") from None


def env_bool(name: str, default: bool) -> bool:
    """``1`` is on and ``0`` off; anything else is refused rather than read as off (``DEBUG=true`` would
    otherwise leave DEBUG off without a word)."""
    value = os.environ.get(name)
    if value is None:
        return default
    if value not in ("0", "1"):
        raise misconfigured(name, f"be 1 (on) or 0 (off), not {value!r}")
    return value == "1"


def split_list(value: str) -> list[str]:
    """A comma-separated list; blanks around items and empty items are dropped."""
    return [item.strip() for item in value.split(",") if item.strip()]


def env_list(name: str, default: str = "") -> list[str]:
    return split_list(env_str(name, default))


def env_networks(name: str) -> list[Network]:
    """A comma-separated list of CIDRs (a bare address is a network of one)."""
    try:
        return [ipaddress.ip_network(item, strict=False) for item in env_list(name)]
    except ValueError as error:
        raise misconfigured(name, "be a comma-separated list of CIDRs", str(error)) from error


def env_file(name: str) -> str:
    """The contents of the file ``name`` points to (a secret kept out of the environment itself), stripped;
    "" when the variable is unset or empty."""
    path = os.environ.get(name, "")
    if not path:
        return ""
    try:
        return Path(path).read_text().strip()
    except OSError as error:
        raise misconfigured(name, "name a readable file", str(error)) from error
