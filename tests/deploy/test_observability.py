"""The observability kit: the portal's and the agent's ``/metrics`` pass ``promtool check metrics``, the
alerting rules pass ``promtool check rules`` and their unit tests, and the Grafana dashboard and the rules use
only metric names that are exported.

``promtool`` comes from Debian's ``prometheus`` package (installed by scripts/ensure-services.sh); without it
these tests fail and say so, they never skip.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.request
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from django.utils import timezone

from fleet.models import GPU, Cluster
from gpuportal.observability import telemetry
from gpuportal.text.dates import local_day
from metering.metrics import EXPORTED_NAME, METRICS, family_of
from metering.models import ClusterAccountingDaily
from nodeagent import metrics as agent_metrics
from nodeagent.agent import Agent
from nodeagent.backends import make_backend
from nodeagent.server import serve
from scheduling import lifecycle
from scheduling.models import JobAllocation, JobStatus, TaskType
from tenants.models import Project
from tests.factories import make_node

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "gpuportal-alerts.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "gpuportal-alerts.test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "gpuportal.json"
AGENT_TOKEN = "agent-t0ken"
#: The alerts operators rely on, by what they watch.
REQUIRED_ALERTS = {"GpuPortalNodeAgentDown", "GpuPortalGpuXidError", "GpuPortalGpuDoubleBitEccErrors",
                   "GpuPortalJobsStuckAdmitted", "GpuPortalJobsStuckDispatching", "GpuPortalJobWaitHigh",
                   "GpuPortalSchedulingPassesStopped", "GpuPortalDispatchErrors"}


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is missing: run scripts/ensure-services.sh (it installs Debian's prometheus package)")
    return subprocess.run([path, *args], input=stdin, capture_output=True, text=True, timeout=60,
                          cwd=RULES.parent)


def assert_lint_clean(text: str) -> None:
    result = promtool("check", "metrics", stdin=text)
    assert (result.returncode, result.stdout + result.stderr) == (0, ""), text


def sample_values(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line and not line.startswith("#")}


def families_in_order(text: str) -> list[str]:
    """Each sample line's family (a summary's ``_sum``/``_count`` under the summary), in the order written."""
    return [family_of(line.split("{")[0].split(" ")[0]) for line in text.splitlines()
            if line and not line.startswith("#")]


# --- the portal's /metrics ------------------------------------------------------------------------------

def _job(owner, project: str, model: str, submitted_minutes_ago: float, status=JobStatus.QUEUED, **fields):
    tenant, name = project.split("/")
    project_row = Project.objects.get(tenant__name=tenant, name=name)
    task = TaskType.objects.get(code="research")
    return lifecycle.create_job(status=status, reason="test", tenant=project_row.tenant, project=project_row,
                                owner=owner, task_type=task, gpu_model=model, name="observed", gpus_per_node=1,
                                image="img", max_runtime_minutes=600, priority=task.priority,
                                submitted_at=timezone.now() - timedelta(minutes=submitted_minutes_ago), **fields)


def _admit(job, minutes_ago: float, gpus=(), fraction="1"):
    at = timezone.now() - timedelta(minutes=minutes_ago)
    JobAllocation.objects.bulk_create(JobAllocation(job=job, gpu=gpu, allocated_at=at, fraction=Decimal(fraction))
                                      for gpu in gpus)
    lifecycle.transition(job, JobStatus.ADMITTED, "admitted", at=at, cluster=Cluster.objects.get(name="sim"))


def _move(job, status, minutes_ago: float):
    lifecycle.transition(job, status, "moved", at=timezone.now() - timedelta(minutes=minutes_ago))


@pytest.fixture
def observed_world(world):
    """The standard lab plus three node agents, jobs in every state the gauges read, and shared counters."""
    users, now = world["users"], timezone.now()
    sim = Cluster.objects.get(name="sim")
    make_node(sim, "agent-ok", "A100", gpus=2, agent_url="http://10.0.0.1:9400", last_seen=now - timedelta(seconds=30))
    make_node(sim, "agent-missing", "A100", gpus=2, agent_url="http://10.0.0.2:9400", missed_polls=3,
              last_seen=now - timedelta(minutes=10))
    make_node(sim, "agent-new", "A100", gpus=2, agent_url="http://10.0.0.3:9400")  # never answered yet
    _job(users["alice"], "vision/detection", "A100", 30, held_by="user")  # waiting
    _job(users["bob"], "nlp/chat-eval", "H100", 5, status=JobStatus.PENDING)  # waiting for an approver
    a100 = list(GPU.objects.filter(node__name="agent-ok").order_by("index"))
    admitted = _job(users["alice"], "vision/detection", "A100", 50)
    _admit(admitted, 20, a100)  # waited 30 min, admitted 20 min ago, never dispatched
    dispatching = _job(users["alice"], "vision/segmentation", "A100", 40)
    _admit(dispatching, 35, GPU.objects.filter(node__name="agent-missing", index=0), fraction="0.5")  # waited 5 min
    _move(dispatching, JobStatus.DISPATCHING, 5)
    requeued = _job(users["bob"], "nlp/llm-pretrain", "A100", 180)
    _admit(requeued, 120)  # first admitted 2 h ago: outside the wait window
    _move(requeued, JobStatus.DISPATCHING, 120)
    _move(requeued, JobStatus.RUNNING, 119)
    _move(requeued, JobStatus.QUEUED, 15)
    _admit(requeued, 10)  # admitted again: not a first admission, so not a wait
    telemetry.observe("gpuportal_scheduling_pass_duration_seconds", 0.25)
    telemetry.observe("gpuportal_scheduling_pass_duration_seconds", 0.5)
    telemetry.increment("gpuportal_agent_poll_failures_total", 2)
    telemetry.increment("gpuportal_reconcile_repairs_total", kind="released")
    telemetry.increment("gpuportal_enqueue_failures_total", task="dispatch_jobs")
    ClusterAccountingDaily.objects.create(cluster=sim, day=local_day(now), account="nlp", user_name="nobody",
                                          gpu_model="A100", from_portal=False, gpu_seconds=7200, jobs_started=1)
    return world


def test_portal_metrics_pass_promtool_and_say_what_the_tables_hold(client, settings, observed_world):
    settings.METRICS = {"TOKEN": "scrape-t0ken", "ALLOWED_IPS": []}
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-t0ken")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain; version=0.0.4")
    text = response.content.decode()
    assert_lint_clean(text)
    for family, (kind, _help) in METRICS.items():  # this world shows every declared family
        assert f"# TYPE {family} {kind}\n" in text, family
    order = families_in_order(text)
    assert [family for i, family in enumerate(order) if i == 0 or order[i - 1] != family] == sorted(set(order))

    values = sample_values(text)
    # Durations: a summary with _sum and _count, the last one as a gauge named with its unit last.
    assert values["gpuportal_scheduling_pass_duration_seconds_count"] == 2
    assert values["gpuportal_scheduling_pass_duration_seconds_sum"] == 0.75
    assert values["gpuportal_scheduling_last_pass_duration_seconds"] == 0.5
    assert "gpuportal_scheduling_pass_duration_seconds_last" not in text
    # Counters: written ones as counted, the others at 0 (per cluster for dispatch errors).
    assert values["gpuportal_agent_poll_failures_total"] == 2
    assert values["gpuportal_agent_poll_cycles_skipped_total"] == 0
    assert values['gpuportal_dispatch_errors_total{cluster="sim"}'] == 0
    assert values['gpuportal_reconcile_repairs_total{kind="released"}'] == 1
    # Agents: up only when the last poll was answered; no series for nodes without an agent.
    assert {k: v for k, v in values.items() if k.startswith("gpuportal_agent_up")} == {
        'gpuportal_agent_up{cluster="sim",node="agent-missing"}': 0,
        'gpuportal_agent_up{cluster="sim",node="agent-new"}': 0,
        'gpuportal_agent_up{cluster="sim",node="agent-ok"}': 1}
    seen = values['gpuportal_agent_last_seen_timestamp_seconds{cluster="sim",node="agent-ok"}']
    assert abs(time.time() - 30 - seen) < 30
    assert 'gpuportal_agent_last_seen_timestamp_seconds{cluster="sim",node="agent-new"}' not in values
    # Jobs in transit: the oldest admitted since 20 minutes (not the one re-admitted 10 minutes ago).
    assert 1200 <= values['gpuportal_jobs_oldest_in_status_seconds{status="admitted"}'] < 1260
    assert 300 <= values['gpuportal_jobs_oldest_in_status_seconds{status="dispatching"}'] < 360
    # Waits: first admissions of the last hour only (30 and 5 minutes), p95 interpolated between them.
    assert values['gpuportal_jobs_first_admitted_last_hour{gpu_model="A100"}'] == 2
    assert values['gpuportal_jobs_first_admitted_last_hour{gpu_model="H100"}'] == 0
    assert values['gpuportal_job_wait_p95_seconds{gpu_model="A100"}'] == pytest.approx(300 + 0.95 * 1500)
    assert 'gpuportal_job_wait_p95_seconds{gpu_model="H100"}' not in values
    # Governance: approvals waiting, GPUs held (a half-GPU share as 0.5) against the quota.
    assert values['gpuportal_jobs_pending_approval{tenant="nlp"}'] == 1
    assert values['gpuportal_jobs_pending_approval{tenant="vision"}'] == 0
    assert values['gpuportal_tenant_held_gpus{gpu_model="A100",tenant="vision"}'] == 2.5
    assert values['gpuportal_quota_guaranteed_gpus{gpu_model="H100",tenant="nlp"}'] == 16
    assert values['gpuportal_quota_limit_gpus{gpu_model="H100",tenant="nlp"}'] == 24


# --- the node agent's /metrics ----------------------------------------------------------------------------

@pytest.fixture
def faulty_agent():
    """A simulated agent served over HTTP, with an Xid 79 on GPU 2 and a double-bit ECC error on GPU 1."""
    backend = make_backend("simulated", count=4, model="A100", seed=5)
    agent = Agent(backend, node="gpu-node-7", labels={}).start()
    server = serve({"": (agent, AGENT_TOKEN)}, "127.0.0.1", 0)
    try:
        backend.nvml.inject("xid79", 2)
        backend.nvml.inject("dbe", 1)
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        backend.nvml.inject("clear")
        server.shutdown()
        agent.stop()


def get_agent_metrics(base: str) -> tuple[str, str]:
    request = urllib.request.Request(f"{base}/metrics", headers={"Authorization": f"Bearer {AGENT_TOKEN}"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.headers["Content-Type"], response.read().decode()


def test_agent_metrics_pass_promtool_with_faults_showing(faulty_agent):
    for _ in range(60):  # the agent sees injected faults on its next reading
        content_type, text = get_agent_metrics(faulty_agent)
        if 'DCGM_FI_DEV_XID_ERRORS{gpu="2"' in text and 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="1"' in text:
            break
        time.sleep(0.05)
    assert content_type.startswith("text/plain; version=0.0.4")
    assert_lint_clean(text)
    values = sample_values(text)
    # A lost GPU no longer tells its UUID: its series carry an empty one.
    assert values['DCGM_FI_DEV_XID_ERRORS{gpu="2",UUID="",Hostname="gpu-node-7",vendor="nvidia"}'] == 79
    assert values['gpuportal_gpu_lost{gpu="2",Hostname="gpu-node-7",vendor="nvidia"}'] == 1
    assert [v for k, v in values.items() if k.startswith('DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="1"')] == [1]
    for metric, _field, _help in agent_metrics.HOST_SERIES:  # declared even before a rate can be measured
        assert f"# HELP {metric} " in text and f"# TYPE {metric} gauge" in text


# --- alerting rules -----------------------------------------------------------------------------------------

def test_alert_rules_pass_promtool_check_and_their_unit_tests():
    checked = promtool("check", "rules", RULES.name)
    assert checked.returncode == 0 and "SUCCESS" in checked.stdout, checked.stdout + checked.stderr
    tested = promtool("test", "rules", RULE_TESTS.name)
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


def test_every_alert_is_required_or_tested_firing():
    alerts = {rule["alert"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]}
    assert alerts >= REQUIRED_ALERTS
    firing = {case["alertname"] for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
              for case in test["alert_rule_test"] if case.get("exp_alerts")}
    silent = {case["alertname"] for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
              for case in test["alert_rule_test"] if not case.get("exp_alerts")}
    assert firing == alerts and silent == alerts  # each shown both firing and not firing


# --- metric names used by the rules and the dashboard ---------------------------------------------------------

PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or",
                "unless", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers that are neither functions, nor keywords, nor
    label names (in braces or in by/on clauses), nor durations."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings (label values, templates)
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\boffset\s+\w+", "", expr)
    names = re.findall(r"(?<![\w.$])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", expr)
    return {name for name in names if name.lower() not in PROMQL_WORDS}


def test_the_promql_name_reader_finds_metrics_and_nothing_else():
    assert metric_names('sum by (gpu_model) (rate(foo_total{a="b",c=~"$x"}[5m])) / on (x) group_left (y) bar '
                        'offset 15m > 4 * 3600 and time() - baz_seconds > bool 1e3 or vector(0)') == {
        "foo_total", "bar", "baz_seconds"}
    assert metric_names("label_values(gpuportal_gpus, gpu_model)") == {"gpuportal_gpus", "gpu_model"}


def exported_names() -> set[str]:
    """Every name the portal declares (a summary with its _sum and _count samples) and the agent writes."""
    names = set(METRICS)
    names |= {f"{name}{suffix}" for name, (kind, _help) in METRICS.items() if kind == "summary"
              for suffix in ("_sum", "_count")}
    backend = make_backend("simulated", count=2, model="A100", seed=1)
    agent = Agent(backend, node="n", labels={}).start()
    try:
        text = agent_metrics.render(agent.snapshot())
    finally:
        agent.stop()
    return names | set(re.findall(r"^# TYPE (\S+) ", text, re.MULTILINE))


def dashboard_queries(dashboard: dict) -> list[str]:
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":  # label_values(metric, label): the label is not a metric
            queries.append(re.sub(r",\s*\w+\)\s*$", ")", variable["definition"]))
    return queries


def test_dashboard_has_three_rows_of_panels_on_exported_metrics_only():
    dashboard = json.loads(DASHBOARD.read_text())
    rows: dict[str, list[dict]] = {}
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            rows[panel["title"]] = []
        else:
            assert rows, f"panel {panel['title']!r} comes before any row"
            assert panel["targets"] and all(target["expr"].strip() for target in panel["targets"]), panel["title"]
            rows[list(rows)[-1]].append(panel)
    assert list(rows) == ["Resources", "Tasks", "Governance"]
    assert all(len(panels) >= 3 for panels in rows.values())
    exported = exported_names()
    for query in dashboard_queries(dashboard):
        assert metric_names(query), query
        assert metric_names(query) <= exported, (query, metric_names(query) - exported)
    used = set().union(*(metric_names(q) for q in dashboard_queries(dashboard)))
    assert {"gpuportal_gpus", "DCGM_FI_DEV_GPU_UTIL", "gpuportal_queue_depth", "gpuportal_tenant_held_gpus"} <= used


def test_alert_rules_use_exported_metrics_only():
    exported = exported_names()
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            names = metric_names(rule["expr"])
            assert names and names <= exported, (rule["alert"], names - exported)


def test_every_counter_the_portal_writes_is_declared():
    """A name passed to ``telemetry`` without a declaration would be exported without HELP or TYPE."""
    written = set()
    for package in ("gpuportal", "tenants", "accounts", "audit", "fleet", "scheduling", "governance", "metering"):
        for path in (ROOT / package).rglob("*.py"):
            written |= set(re.findall(r'telemetry\.(increment|set_gauge|observe)\(\s*"(\w+)"', path.read_text()))
    assert ("increment", "gpuportal_dispatch_errors_total") in written
    for call, name in written:
        if call == "observe":  # stored as _last, _sum, _count: a summary and a gauge
            assert METRICS[name][0] == "summary" and EXPORTED_NAME[f"{name}_last"] in METRICS, name
        else:
            assert name in METRICS, name
