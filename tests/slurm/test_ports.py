"""A named port of a job on real Slurm: the program learns its number (``GPUPORTAL_PORT_<NAME>``), listens on its
node, and the workload origin reaches it through that node's address (the host its agent is polled at)."""

import http.client
import time

import pytest
from django.test import Client

from fleet.models import Node
from scheduling.executors import executor_for
from scheduling.models import JobStatus
from tests.scheduling.workloads.conftest import WORKLOAD_HOST
from tests.slurm.world import follow_until, submit

#: In this test machine's range for servers a test starts; the job's program serves it on its node.
UI_PORT = 18311


@pytest.fixture
def workload_origin(settings):
    settings.WORKLOADS = {**settings.WORKLOADS, "ORIGIN": f"http://{WORKLOAD_HOST}"}


def _answers(port: int) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", "/")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def test_a_port_of_a_slurm_job_opens_through_its_node(lab, api, workload_origin):
    Node.objects.filter(cluster=lab["cluster"]).update(agent_url="http://127.0.0.1:9400")  # NodeAddr of the nodes
    job = submit(lab["alice"], 'echo "listening on $GPUPORTAL_PORT_UI"; '
                               'exec /usr/bin/python3 -m http.server "$GPUPORTAL_PORT_UI" --bind 127.0.0.1',
                 ports=[f"ui:{UI_PORT}"])
    try:
        job = follow_until(job, (JobStatus.RUNNING, JobStatus.FAILED))
        assert job.status == JobStatus.RUNNING, job.failure_message
        deadline = time.monotonic() + 15
        while not _answers(UI_PORT) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert executor_for(lab["cluster"]).port_upstream(job, job.ports[0]) == f"http://127.0.0.1:{UI_PORT}"
        answer = api("alice").get(f"/jobs/{job.pk}/ports/ui/", HTTP_HOST=WORKLOAD_HOST)
        assert answer.status_code == 200 and b"Directory listing" in answer.content
        assert api("alice").get(f"/api/jobs/{job.pk}/").json()["ports"][0]["url"].endswith(
            f"/jobs/{job.pk}/ports/ui/")
        anonymous = Client().get(f"/jobs/{job.pk}/ports/ui/", HTTP_HOST=WORKLOAD_HOST)
        assert anonymous.status_code == 302 and b"Directory listing" not in anonymous.content
        log = executor_for(lab["cluster"]).read_log(job, 20)
        assert f"listening on {UI_PORT}" in log.lines
    finally:
        executor_for(lab["cluster"]).stop(job, "test over")
