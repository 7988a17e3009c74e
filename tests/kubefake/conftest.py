"""The fake API server on loopback, and ``kubectl`` pointed at it through a kubeconfig in ``tmp_path``.

These tests need no database: they talk to the fake over HTTP, with ``kubectl`` and the official client.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from kubefake.server import FakeKubernetes

KUBECTL = "/usr/bin/kubectl"
NODES = [f"gpu-{i:02d}" for i in range(1, 7)]  # the nodes the portal's example jobs are pinned to


@pytest.fixture
def fake():
    server = FakeKubernetes(nodes=NODES)
    server.url = server.start()
    yield server
    server.stop()


@pytest.fixture
def core(fake):
    configuration = client.Configuration(host=fake.url)
    with client.ApiClient(configuration) as api_client:
        yield client.CoreV1Api(api_client)


@pytest.fixture
def batch(fake, core):
    return client.BatchV1Api(core.api_client)


@dataclasses.dataclass
class Kubectl:
    """``kubectl --kubeconfig <tmp> --cache-dir <tmp>``, in an environment of its own (HOME in tmp_path)."""

    binary: str
    kubeconfig: Path
    home: Path

    def _command(self, args) -> list[str]:
        return [self.binary, "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.home / "cache"),
                *map(str, args)]

    def _env(self) -> dict:
        return {"HOME": str(self.home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}

    def run(self, *args, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        done = subprocess.run(self._command(args), capture_output=True, text=True, timeout=timeout, env=self._env(),
                              check=False)
        if check and done.returncode != 0:
            pytest.fail(f"kubectl {' '.join(map(str, args))} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    def __call__(self, *args, **kwargs) -> str:
        return self.run(*args, **kwargs).stdout

    def json(self, *args) -> dict:
        return json.loads(self(*args, "-o", "json"))

    def stream(self, *args) -> Stream:
        return Stream(subprocess.Popen(self._command(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True, env=self._env()))


class Stream:
    """A running ``kubectl ... --watch -o json``: the JSON documents it printed so far, read in a thread."""

    def __init__(self, process: subprocess.Popen):
        self.process, self.text, self.lock = process, [], threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stdout:
            with self.lock:
                self.text.append(line)

    def documents(self) -> list[dict]:
        with self.lock:
            text = "".join(self.text)
        decoder, found, at = json.JSONDecoder(), [], 0
        while True:
            while at < len(text) and text[at].isspace():
                at += 1
            if at == len(text):
                return found
            try:
                document, at = decoder.raw_decode(text, at)
            except json.JSONDecodeError:
                return found  # the rest is still being printed
            found.append(document)

    def wait_for(self, predicate, timeout: float = 10) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(documents := self.documents()):
                return documents
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        pytest.fail(f"kubectl printed no matching document; it printed {self.documents()!r}, stderr: "
                    f"{self.process.stderr.read()}")

    def wait_for_text(self, text: str, timeout: float = 10) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            with self.lock:
                printed = "".join(self.text)
            if text in printed:
                return printed
            time.sleep(0.05)
        self.stop()
        pytest.fail(f"kubectl did not print {text!r}; it printed {''.join(self.text)!r}, stderr: "
                    f"{self.process.stderr.read()}")

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=5)
        self.reader.join(timeout=5)


def make_kubectl(binary: str, fake: FakeKubernetes, tmp_path: Path) -> Kubectl:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    kubeconfig = tmp_path / "kubeconfig.yaml"
    kubeconfig.write_text(yaml.safe_dump(fake.kubeconfig(fake.url)))
    return Kubectl(binary, kubeconfig, home)


@pytest.fixture
def kubectl(fake, tmp_path) -> Kubectl:
    if not (os.path.isfile(KUBECTL) and os.access(KUBECTL, os.X_OK)):
        pytest.fail(f"{KUBECTL} is missing: these tests drive the real kubectl against the fake API server")
    return make_kubectl(KUBECTL, fake, tmp_path)


def portal_manifests(gpu_limit: int = 64) -> list[dict]:
    """Every object shape the portal's Kubernetes dispatch creates, in its creation order: a tenant's Namespace,
    ResourceQuota, NetworkPolicy and data claim, the PriorityClasses, and for each example job shape its
    Secret, headless Service (multi-node) and batch/v1 Job (each shape with an id of its own)."""
    # Imported here, not at the top: only the kubectl tests need the portal (for its shapes); the rest of
    # tests/kubefake exercises the fake alone.
    from scheduling.executors.kubernetes import manifests

    specs = [dataclasses.replace(manifests.example_spec(shape), id=100 + number)
             for number, shape in enumerate(manifests.EXAMPLES)]
    objects = [*manifests.for_tenant("gp-", "vision", gpu_limit, 500, "cephfs")]
    objects += [manifests.priority_class(code, 50) for code in sorted({spec.task_type for spec in specs})]
    for spec in specs:
        objects += manifests.for_job("gp-", spec, "http://portal.example", f"token-{spec.id}", data_claim=True)
    return objects
