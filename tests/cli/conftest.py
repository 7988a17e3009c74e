"""Run the ``gpuportal`` client against the live test server: in-process through ``main(argv)``, each user
with a config directory of their own (``XDG_CONFIG_HOME``), the environment's overrides removed."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from dataclasses import dataclass

import pytest
from gpuportal_cli.main import main


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def json(self):
        return json.loads(self.out)


@pytest.fixture
def cli(live_server, world, tmp_path, monkeypatch):
    """``cli("jobs", "--mine", user="alice")`` → Result; ``cli.login("alice")`` logs a user in first."""
    monkeypatch.delenv("GPUPORTAL_URL", raising=False)
    monkeypatch.delenv("GPUPORTAL_TOKEN", raising=False)

    def run(*argv: str, user: str = "alice", stdin: str = "") -> Result:
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / user))
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([str(arg) for arg in argv])
        return Result(int(code), out.getvalue(), err.getvalue())

    def login(user: str) -> Result:
        result = run("login", "--url", live_server.url, "-u", user, "--password-stdin", user=user, stdin="demo\n")
        assert result.code == 0, result.err
        return result

    run.login = login
    run.url = live_server.url
    run.config_home = tmp_path
    return run
