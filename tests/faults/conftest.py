"""Fixtures of the fault-injection suite, and the summary of what it injected and found, printed at the end
of every run that includes it (no ``-s`` needed: it goes through pytest's terminal reporter)."""

import pytest

from tests.faults.faultlib import SUMMARY
from tests.scheduling.kube import served_cluster


def pytest_terminal_summary(terminalreporter):
    if SUMMARY:
        terminalreporter.section("fault injection")
        for line in SUMMARY:
            terminalreporter.write_line(line)


@pytest.fixture
def kube(users, tmp_path, settings):
    """A Kubernetes cluster served by the fake API server in this process, with fast retries."""
    with served_cluster(tmp_path, settings, "kube-f", retries=2) as made:
        yield made
