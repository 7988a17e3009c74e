"""No stand-in outlives the process that started it: the simulated executor's notebook and service servers are real
processes, and a test run, a worker or the demo that ends (killed, or exiting) takes its stand-ins with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from django.conf import settings

from scheduling.executors.simulated import serving as simulated_serving
from scheduling.executors.simulated import standin
from scheduling.models import WorkloadKind
from tests.conftest import standins_of

#: A process that starts one service stand-in through the serving module, says its pid and pid file, then exits
#: (``exit``) or waits to be killed (``wait``).
PARENT = textwrap.dedent("""
    import sys, time, types
    import django
    django.setup()
    from django.conf import settings
    from scheduling.executors.simulated import serving
    from scheduling.models import WorkloadKind
    settings.SIMULATION_STANDIN_DIR = sys.argv[2]
    job = types.SimpleNamespace(pk=7, retry_count=0, kind=WorkloadKind.SERVICE, image="registry.local/vllm:0.5",
                                revision=1)
    state = serving.start(job)
    print(state["pid"], state["pid_file"], state["port"], flush=True)
    if sys.argv[1] == "wait":
        time.sleep(60)
""")


def _running(pid: int) -> bool:
    """``pid`` runs (an exited process not reaped yet, which a container's init may leave, does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][:1] not in ("Z", "X")
    except (FileNotFoundError, IndexError):
        return False


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _parent(mode: str, directory: Path) -> tuple[subprocess.Popen, int, Path]:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, mode, str(directory)], cwd=settings.BASE_DIR,
                              stdout=subprocess.PIPE, text=True)
    line = parent.stdout.readline().split()
    assert len(line) == 3 and line[2] != "None", f"the parent did not start its stand-in: {line}"
    return parent, int(line[0]), Path(line[1])


def _cleanup(*pids: int) -> None:
    for pid in pids:
        if _running(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_standin_ends_when_the_process_that_started_it_is_killed(tmp_path):
    parent, pid, pid_file = _parent("wait", tmp_path)
    try:
        assert _running(pid) and standins_of(parent.pid) == [pid]
        parent.kill()  # SIGKILL: no atexit, no cleanup of its own; the kernel closes the lifeline
        parent.wait(timeout=10)
        assert _gone_within(pid, 5), "the stand-in outlived the process that started it"
        assert not pid_file.exists()  # it gave up its lease on the way out
    finally:
        _cleanup(pid)
        parent.stdout.close()


def test_a_standin_ends_when_the_process_that_started_it_exits(tmp_path):
    parent, pid, pid_file = _parent("exit", tmp_path)
    try:
        assert parent.wait(timeout=10) == 0
        assert _gone_within(pid, 5)
        assert not pid_file.exists()
    finally:
        _cleanup(pid)
        parent.stdout.close()


#: A process that starts a stand-in itself, hands the write end of its lifeline to a process that outlives it (as
#: a fork of it would hold it), says both pids, and waits to be killed.
HOLDER = textwrap.dedent("""
    import os, subprocess, sys, time
    read, write = os.pipe()
    server = subprocess.Popen([sys.executable, sys.argv[1], "--mode", "service", "--job", "8", "--port-file",
                               sys.argv[2], "--parent", str(os.getpid())], stdin=read)
    holder = subprocess.Popen(["sleep", "60"], pass_fds=(write,))
    print(server.pid, holder.pid, flush=True)
    time.sleep(60)
""")


def test_a_standin_whose_lifeline_another_process_holds_ends_with_its_parent_all_the_same(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", HOLDER, str(Path(standin.__file__)), str(tmp_path / "port")],
                              stdout=subprocess.PIPE, text=True)
    server, holder = (int(pid) for pid in parent.stdout.readline().split())
    try:
        deadline = time.monotonic() + 10
        while not (tmp_path / "port").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _running(server)
        parent.kill()
        parent.wait(timeout=10)
        assert _gone_within(server, 5), "re-parented, the stand-in should have noticed its parent was gone"
    finally:
        _cleanup(server, holder)
        parent.stdout.close()


def test_the_serving_module_ends_its_own_standins(tmp_path, settings):
    settings.SIMULATION_STANDIN_DIR = tmp_path
    job = type("Job", (), {"pk": 9, "retry_count": 0, "kind": WorkloadKind.SERVICE, "image": "registry.local/x:1",
                           "revision": 1})()
    state = simulated_serving.start(job)
    try:
        assert simulated_serving.alive(state) and simulated_serving.children() == [state["pid"]]
        assert standins_of(os.getpid()) == [state["pid"]]
        assert simulated_serving.stop_children() == 1
        assert simulated_serving.children() == [] and _gone_within(state["pid"], 5)
        assert not Path(state["pid_file"]).exists()  # the lease goes with it
    finally:
        _cleanup(state["pid"])
