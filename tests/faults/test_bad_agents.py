"""A slow-drip, a garbage and a huge-answer agent (real HTTP on loopback) beside a healthy real agent, during
one poll cycle, while scheduling goes on: the passes run and admit while the cycle is still waiting for the
dripping agent, and the cycle ends at its deadline with each bad agent reported and the healthy one stored."""

import threading

import pytest
from django.db import connections

from fleet.agents import tokens as agent_tokens
from fleet.agents.polling import poll_agents
from fleet.models import Cluster, Node
from nodeagent.agent import Agent
from nodeagent.backends import make_backend
from nodeagent.server import serve
from scheduling.jobs import submission
from scheduling.models import ACTIVE_STATUSES, Job
from scheduling.tasks import run_scheduling_pass
from tests.conftest import job_payload, long_run
from tests.faults.faultlib import check_invariants, dripping, found, garbage, huge, record
from tests.fleet.raw_agent import RawAgent

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]
PASSES = 3


def test_bad_agents_cost_one_deadline_and_never_block_the_pass(users, settings):
    settings.AGENTS = {**settings.AGENTS, "POLL_TIMEOUT_SECONDS": 3.0, "MAX_SNAPSHOT_BYTES": 256 * 1024,
                       "NETWORKS": ["127.0.0.0/8"]}  # the agents here answer on loopback
    cluster = Cluster.objects.create(name="edge")
    release = threading.Event()
    bad = {"drip": RawAgent(dripping(release)), "garbage": RawAgent(garbage), "huge": RawAgent(huge)}
    for name, fake in bad.items():
        agent_tokens.issue(Node.objects.create(cluster=cluster, name=name, gpu_model="H200", agent_url=fake.url))
    good = Node.objects.create(cluster=cluster, name="good", gpu_model="H200")
    agent = Agent(make_backend("simulated", count=2, model="H200", seed=3), node="good").start()
    server = serve({"": (agent, agent_tokens.issue(good))}, "127.0.0.1", 0)
    Node.objects.filter(pk=good.pk).update(agent_url=f"http://127.0.0.1:{server.server_address[1]}")
    cycle, done = {}, threading.Event()

    def poll():
        try:
            cycle["report"] = poll_agents(Node.objects.filter(cluster=cluster).prefetch_related("gpus"))
        finally:
            done.set()
            connections.close_all()

    submitted = {}
    thread = threading.Thread(target=poll)
    try:
        thread.start()
        assert bad["drip"].accepted.wait(10)  # the cycle is now waiting on the dripping agent
        for i in range(PASSES):  # scheduling meanwhile: submit (its pass runs inline, eager) and pass again
            job = submission.submit_job(users["alice"], job_payload(gpus_per_node=2, command=long_run(999)))
            submitted[f"job-{i}"] = [job.pk]
            assert run_scheduling_pass.apply().get()["ran"]
        during = not done.is_set()  # every pass above finished while the poll cycle was still running
        thread.join(20)
    finally:
        release.set()
        for fake in bad.values():
            fake.close()
        server.shutdown()
        agent.stop()
    assert during, "the passes waited for the poll cycle"
    assert Job.objects.filter(status__in=ACTIVE_STATUSES).count() == PASSES
    report = cycle["report"]
    assert report.ran and report.answered == 1 and set(report.failed) == {"drip", "garbage", "huge"}
    assert report.failed["drip"] == "no answer within 3 s"
    assert report.failed["huge"].startswith("the answer is larger than the limit")
    assert "invalid snapshot" in report.failed["garbage"] or "bad HTTP" in report.failed["garbage"]
    assert Node.objects.get(pk=good.pk).gpus.count() == 2
    assert set(Node.objects.filter(name__in=bad).values_list("health", flat=True)) == {"suspect"}
    result = check_invariants(submitted=submitted)
    record(f"bad agents (slow drip, garbage, 10 MB answer) beside a healthy one during a poll cycle: {PASSES} "
           f"passes ran and admitted {PASSES} jobs while the cycle waited; the cycle ended at its 3 s deadline "
           f"with {', '.join(f'{k}: {v}' for k, v in sorted(report.failed.items()))}; " + found(result))
