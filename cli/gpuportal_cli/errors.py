"""Exit codes that scripts can rely on, and the one error type that carries them to ``main``."""

from enum import IntEnum


class ExitCode(IntEnum):
    """What ``gpuportal`` exits with (documented in docs/api-and-cli.md)."""

    OK = 0
    REFUSED = 1  # the portal refused the request: invalid input (400, the field named), forbidden, a conflict
    USAGE = 2  # wrong command-line use, no portal URL, an unreadable job file
    AUTH = 3  # not logged in, wrong credentials, or a token that is expired, revoked or unknown (401)
    NOT_FOUND = 4  # no such job or request among what the caller may see (404)
    CONNECTION = 5  # the portal cannot be reached, or the URL is not a GPU Portal API
    INTERRUPTED = 130  # Ctrl-C, as shells report it


class CliError(Exception):
    """A failure to report in one message; ``status`` and ``detail`` are the HTTP status and the API's
    error body when the portal answered (``--json`` prints them for scripts)."""

    def __init__(self, message: str, exit_code: ExitCode, status: int | None = None, detail=None):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.status = status
        self.detail = detail
