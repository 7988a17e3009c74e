"""Where the client keeps the portal's URL and the API token: ``$XDG_CONFIG_HOME/gpuportal/config.json``
(``~/.config/gpuportal/config.json`` without it), readable by its owner only (0600, in a 0700 directory).

``GPUPORTAL_URL`` and ``GPUPORTAL_TOKEN`` override the file, so a CI job needs no file at all."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import CliError, ExitCode
from .i18n import gettext_ as _

FILE_MODE = 0o600
DIR_MODE = 0o700
URL_VARIABLE = "GPUPORTAL_URL"
TOKEN_VARIABLE = "GPUPORTAL_TOKEN"


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gpuportal"


def config_path() -> Path:
    return config_dir() / "config.json"


def load() -> dict:
    """The saved settings ({} before the first login)."""
    path = config_path()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise CliError(_("Cannot read %(path)s (%(error)s): fix or remove it, then log in again.")
                       % {"path": path, "error": exc}, ExitCode.USAGE) from None
    return data if isinstance(data, dict) else {}


def save(data: dict) -> Path:
    """Write the settings atomically; the file is created 0600 so the token is never readable by others."""
    directory = config_dir()
    directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    path = config_path()
    temporary = path.with_name(path.name + ".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(data, handle, indent=2)
        handle.write("\n")
    os.chmod(temporary, FILE_MODE)  # an older file of the same name may have had a wider mode
    os.replace(temporary, path)
    return path


def normalise_url(url: str) -> str:
    """The portal's root URL: no trailing slash, and no ``/api`` (people paste the API's address)."""
    url = url.strip().rstrip("/")
    if url.endswith("/api"):
        url = url[: -len("/api")]
    if not url.startswith(("http://", "https://")):
        raise CliError(_("The portal URL must start with http:// or https://, not %(url)r.") % {"url": url},
                       ExitCode.USAGE)
    return url


@dataclass(frozen=True)
class Settings:
    """The URL and token in effect, and where each came from (for the error messages)."""

    url: str
    token: str
    token_source: str  # "env" or "file" or ""


def resolve(url_option: str | None) -> Settings:
    """``--url`` over ``GPUPORTAL_URL`` over the file; ``GPUPORTAL_TOKEN`` over the file.

    The saved token goes only to the portal it was issued by: another URL gets no token rather than a
    credential of a different server."""
    saved = load()
    url = url_option or os.environ.get(URL_VARIABLE) or saved.get("url") or ""
    if not url:
        raise CliError(_("No portal URL: give --url, set %(var)s, or run `gpuportal login --url URL`.")
                       % {"var": URL_VARIABLE}, ExitCode.USAGE)
    url = normalise_url(url)
    if os.environ.get(TOKEN_VARIABLE):
        return Settings(url=url, token=os.environ[TOKEN_VARIABLE], token_source="env")
    if saved.get("token") and saved.get("url") == url:
        return Settings(url=url, token=saved["token"], token_source="file")
    return Settings(url=url, token="", token_source="")
