"""Every page of the portal, read in Simplified Chinese by each role, shows no English it should not.

One world with data (jobs waiting, held, running, failed with a diagnosis and awaiting approval, requests
pending and decided, a reservation, a cordoned node, a closed month's report, tokens, notifications) is read
as researcher, approver, manager, platform admin and signed out, with ``Accept-Language: zh-Hans``. Every
visible text node, the titles, placeholders, labels and confirmation texts, and the texts of the charts must
be free of English words: a word of three or more ASCII letters passes only if it is a name or code of the
world (users, tenants, projects, nodes, images …), a unit or an acronym, a time-zone name, or text inside
``<code>``/``<pre>`` (commands, paths, log lines). What the code does not translate yet is listed in
``KNOWN_UNMARKED`` with where it comes from; the test fails on anything else, and on an entry of that list that
no page shows any more (so the list only shrinks).
"""

from __future__ import annotations

import json
import re
import zoneinfo
from datetime import UTC, date, datetime, timedelta
from html.parser import HTMLParser
from importlib import import_module

import pytest
from django.apps import apps as django_apps
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from django.utils.translation import gettext_noop

from accounts import tokens
from accounts.models import Preference
from fleet.models import GPU, Cluster, Node
from fleet.services import set_node_admin_state
from governance import services as governance
from governance.models import PriorityRequest
from gpuportal.text.phrases import Phrase
from metering.acceptance import checklist as acceptance
from metering.improvements import services as improvements
from metering.models import WhatIfRun
from metering.reports import monthly as reports
from metering.usage.rollup import rollup
from metering.whatif import services as whatif_services
from metering.whatif.change import Change
from scheduling import lifecycle
from scheduling.executors.kubernetes.diagnosis import PodState, diagnose
from scheduling.jobs import submission
from scheduling.jobs.actions import set_hold
from scheduling.models import FailureCategory, Job, JobAllocation, JobStatus, JobTemplate, TaskType, WaitReason
from tenants.models import Project, Tenant
from tests.conftest import job_payload
from tests.factories import PASSWORD, build_world, make_task_type
from tests.metering.helpers import gpus_of, ran_job, readings

pytestmark = pytest.mark.django_db

ACCEPT_CHINESE = {"HTTP_ACCEPT_LANGUAGE": "zh-Hans"}
ROLES = ("alice", "carol", "dave", "admin")  # researcher, approver, manager, platform admin

#: Units, acronyms and product names that stay in Latin letters in Chinese text (docs/glossary-zh.md).
LATIN_WORDS = {
    "gpu", "cpu", "mib", "gib", "gb", "mb", "api", "csv", "json", "iso", "utc", "pdf", "url", "uri", "cuda",
    "nccl", "ecc", "xid", "uuid", "sha", "http", "https", "bearer", "kubernetes", "kubeconfig", "infiniband",
    "pod", "iana", "ascii", "nul", "hami", "oomkilled", "yyyy", "english", "readme", "cookie", "webhook", "post",
    "usd", "eur", "cny", "ldap", "tls", "oidc", "pkce", "jupyter", "pytorch", "deepspeed", "vllm", "torchrun",
    "ddp", "zero", "python", "openai", "nvidia", "amd", "nvlink", "pcie", "hccs", "xgmi", "mlu", "dcu", "npu",
    "xlsx", "png", "jpeg", "pip", "rank", "slurm", "gres", "jwt", "sbatch", "slurmdb", "slurmrestd", "apptainer",
    "pyxis", "enroot", "tensorboard", "afterok", "afterany", "afternotok", "aftercorr",
}

#: A one-pixel PNG: the screenshot of the pilot's note.
PNG_PIXEL = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478"
                          "9c6360000002000154a24f5d0000000049454e44ae426082")

#: The last lines of the failed job's log (program output, shown as evidence).
FAILED_LOG = "step 1200 loss 0.42\ntorch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"

#: Text the code shows in English today, with where it comes from and how to fix it there. The test passes
#: while these are the only English on the pages; it fails when one of them is no longer shown (remove it here).
#: Most are sentences stored at the moment they happen, in the language active then (a worker's is English),
#: and shown later to every reader as stored. (pattern of the English text, source, fix)
KNOWN_UNMARKED: list[tuple[str, str, str]] = [
    # monthly reports: sentences frozen into the report's data
    (r"\w+: \d+ % idle -> lend or move|\w+: demand above capacity on [^>]*-> [\w ]+",
     "metering/reports/monthly.py:261-282 (advice 'evidence', frozen with the report)",
     "keep the figures (they are in 'figures') and render the sentence in metering/reports/presentation.py"),
]

#: Portal URL names that are not pages to read (each with why); every other name of the portal's URLconfs must
#: be visited below, so a new page cannot escape the check.
NOT_PAGES = {
    "scheduling:job-cancel": "POST only", "scheduling:job-hold": "POST only", "scheduling:job-release": "POST only",
    "scheduling:job-clear-avoidance": "POST only",
    "fleet:node-action": "POST only", "governance:request-decide": "POST only",
    "accounts:token-revoke": "POST only",
    "metering:platform-csv": "CSV download (headers checked by the catalogue)",
    "metering:tenant-csv": "CSV download (headers checked by the catalogue)",
    "metering:platform-regenerate": "POST only", "metering:tenant-regenerate": "POST only",
    "logout": "POST only", "favicon": "a redirect to the icon",
    "password_change": "Django's own form (Django's catalogue), not linked from the portal",
    "password_change_done": "Django's own page", "password_reset": "Django's own page",
    "password_reset_done": "Django's own page", "password_reset_confirm": "Django's own page",
    "password_reset_complete": "Django's own page",
    "accounts:language": "POST only (the header's language choice)", "directory:group-remove": "POST only",
    "directory:oidc-sign-in": "a redirect to the OpenID Connect provider",
    "directory:oidc-callback": "the OpenID Connect provider's redirect back",
    "scheduling:notebook-open": "the notebook server's own pages, passed through",
    "scheduling:notebook-open-root": "the notebook server's own pages, passed through",
    "scheduling:notebook-auth": "an ingress's access check: an empty answer",
    "scheduling:service-endpoint": "the service's own answers, passed through",
    "scheduling:service-endpoint-root": "the service's own answers, passed through",
    "scheduling:port-open": "a job's named port: the program's own pages, passed through",
    "scheduling:port-open-root": "a job's named port: the program's own pages, passed through",
    "scheduling:service-auth": "an ingress's access check: an empty answer",
    "scheduling:service-action": "POST only", "scheduling:array-cancel": "POST only",
    "scheduling:template-archive": "POST only",
    "metering:platform-pack": "PDF or spreadsheet download (its Chinese text is checked by the review pack's tests)",
    "metering:tenant-pack": "PDF or spreadsheet download (its Chinese text is checked by the review pack's tests)",
    "acceptance:note-add": "POST only (its errors re-render the checklist, which is read here)",
    "acceptance:screenshot": "the screenshot's image file",
}
#: Prefixes of the URLconfs that are not the portal's pages: the API, the admin site (Django's catalogue),
#: the metrics endpoint, the API schema and its viewer.
NOT_PORTAL = ("api/", "admin/", "metrics", "i18n/")


def _portal_url_names() -> set[str]:
    names = set()

    def walk(patterns, prefix: str, namespace: str):
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if route.startswith(NOT_PORTAL):
                continue
            if isinstance(pattern, URLResolver):
                inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
                walk(pattern.url_patterns, route, inner)
            elif isinstance(pattern, URLPattern) and pattern.name:
                names.add(namespace + pattern.name)

    walk(get_resolver().url_patterns, "", "")
    return names


# --- the world ------------------------------------------------------------------------------------------------

def _last_month() -> date:
    return (timezone.now().date().replace(day=1) - timedelta(days=1)).replace(day=1)


def _at(day: date, hour: int) -> datetime:
    return datetime(day.year, day.month, day.day, hour, tzinfo=UTC)


def _fail_out_of_gpu_memory(job: Job) -> Job:
    """The running ``job`` runs out of GPU memory: diagnosed by the Kubernetes rules from its log, ended by the
    one retry rule of every executor."""
    node = JobAllocation.objects.filter(job=job).values_list("gpu__node__name", flat=True).first()
    pod = PodState(name=f"job-{job.pk}-0", node=node, phase="Failed", exit_code=1, terminated_reason="Error")
    diagnosis = diagnose([pod], logs={pod.name: FAILED_LOG})
    assert diagnosis.category == FailureCategory.OUT_OF_MEMORY
    lifecycle.fail_or_retry(job, diagnosis.as_dict())
    return Job.objects.get(pk=job.pk)


def _build(users, on_commit) -> dict:
    """The jobs, requests, reservation, node state, report, tokens and notifications every page shows.

    ``on_commit`` runs what production runs after each commit (passes, dispatch, approval requests and
    notifications), at the end of each block."""
    alice, carol, admin = users["alice"], users["carol"], users["admin"]
    for user in (alice, carol, admin):  # they chose Chinese; dave reads in his browser's language
        Preference.objects.update_or_create(user=user, defaults={"language": "zh-hans"})
    jobs = {}
    make_task_type("restricted", 60, False, 600, requires_approval=True)
    with on_commit(execute=True):  # vision's A100 limit is 16: two 8-GPU jobs start, the third waits for quota
        jobs["dispatched"] = submission.submit_job(alice, job_payload(gpus_per_node=8, name="resnet-a"))
        jobs["running"] = submission.submit_job(carol, job_payload(gpus_per_node=8, project="segmentation",
                                                                    name="resnet-b"))
        jobs["waiting"] = submission.submit_job(alice, job_payload(gpus_per_node=8, name="resnet-c"))
        jobs["held"] = submission.submit_job(alice, job_payload(gpus_per_node=4, name="resnet-d"))
        jobs["approval"] = submission.submit_job(alice, job_payload(task_type="restricted", gpu_model="H100",
                                                                     gpus_per_node=2, name="vit-probe"))
        jobs["failed"] = submission.submit_job(carol, job_payload(gpu_model="L40S", gpus_per_node=2,
                                                                   project="segmentation", name="seg-large"))
    for job in jobs.values():
        job.refresh_from_db()
    assert jobs["waiting"].wait_reason == WaitReason.QUOTA_EXHAUSTED, jobs["waiting"].wait_reason
    assert jobs["approval"].status == JobStatus.PENDING
    assert jobs["running"].status == jobs["failed"].status == JobStatus.DISPATCHING
    with on_commit(execute=True):  # what the simulated cluster's sync records when the containers start
        for key in ("running", "failed"):
            nodes = sorted(set(JobAllocation.objects.filter(job=jobs[key]).values_list("gpu__node__name", flat=True)))
            started = Phrase(gettext_noop("Containers started on %(nodes)s."), {"nodes": ", ".join(nodes)})
            lifecycle.transition(jobs[key], JobStatus.RUNNING, started)
        jobs["failed"] = _fail_out_of_gpu_memory(Job.objects.get(pk=jobs["failed"].pk))
        set_hold(alice, jobs["held"], True)

    now = timezone.now()
    window = {"start": (now + timedelta(days=1)).isoformat(), "end": (now + timedelta(days=2)).isoformat()}
    requests = {
        "burst": governance.submit_request(alice, {
            "kind": "burst", "tenant": "vision", "gpu_model": "A100", "gpus": 8,
            "justification": "评审前需要把第三个实验跑完。", **window}),
        "reservation": governance.submit_request(carol, {
            "kind": "reservation", "tenant": "vision", "gpu_model": "L40S", "gpus": 4,
            "justification": "周五的演示需要预留四张卡。", **window}),
        "runtime": governance.submit_request(alice, {
            "kind": "runtime_extension", "job": jobs["dispatched"].pk, "max_runtime_minutes": 600,
            "justification": "训练比预期慢，需要更多时间。"}),
    }
    requests["admission"] = PriorityRequest.objects.get(job=jobs["approval"])  # opened by its signal
    with on_commit(execute=True):
        governance.decide(admin, requests["reservation"], True, "同意，周五可用。")
        governance.decide(carol, requests["runtime"], False, "请先保存检查点。")
        set_node_admin_state(admin, Node.objects.get(name="dc1-r1-h100-01"), "cordoned", "更换风扇")

    month = _last_month()
    a100 = gpus_of("dc2-r1-a100-03", 4)
    ran_job(alice, "vision/detection", a100, _at(month, 8), _at(month, 18))
    readings(a100, _at(month, 8), _at(month, 18), utilization=70, every=timedelta(hours=1))
    ran_job(users["bob"], "nlp/chat-eval", gpus_of("dc1-r2-h100-03", 2), _at(month, 1), _at(month, 2),
            status=JobStatus.FAILED, category=FailureCategory.OUT_OF_MEMORY, wait=timedelta(hours=3))
    rollup(month, month + timedelta(days=27), force=True)
    reports.freeze(month)
    for user in users.values():
        tokens.issue(user, "笔记本电脑")
    service = job_payload(kind="service", task_type="inference", gpu_model="L40S", gpus_per_node=1, replicas=2,
                          name="chat-assistant")
    del service["max_runtime_minutes"]
    groups = {"service": submission.submit_job(alice, service).group,
              "array": submission.submit_job(alice, job_payload(kind="array", task_type="test", gpu_model="L40S",
                                                                gpus_per_node=1, array="0-9", name="sweep")).group}
    if not JobTemplate.objects.exists():  # a transactional test before this one emptied the tables
        import_module("scheduling.migrations.0010_builtin_templates").install(django_apps)
    # an improvement action following last month's report, and a pilot's note with a screenshot on the checklist
    action = improvements.create_action(
        admin, month=month, tenant=None, title="缩短 A100 排队时间", owner=users["dave"],
        due_month=timezone.now().date().replace(day=1), metric="wait_seconds_p95", direction="down",
        gpu_model="A100", target=3600.0, recommendation="高峰期错峰提交", notes="每周复查一次。")
    acceptance.add_note(admin, "multi_card", text="8 卡 NCCL 测试通过。", configuration="NCCL_DEBUG=INFO\nnodes: 1",
                        screenshot=PNG_PIXEL, screenshot_name="nccl.png", screenshot_type="image/png")
    what_if = WhatIfRun.objects.create(month=month, change=Change(add={"H100": 8}).as_data(), created_by=admin)
    whatif_services.execute(what_if.pk)  # last month with 8 more H100: its figures beside the replay's error
    return {"jobs": jobs, "requests": requests, "month": month, "groups": groups,
            "template": JobTemplate.objects.order_by("pk").first(), "action": action, "what_if": what_if}


def _pages(world: dict) -> dict[str, list[str]]:
    """URL name -> the addresses that show it."""
    jobs, month = world["jobs"], f"{world['month']:%Y-%m}"
    return {
        "scheduling:dashboard": ["/"], "scheduling:job-list": ["/jobs/", "/jobs/?status=queued&mine=on"],
        "scheduling:job-detail": [f"/jobs/{job.pk}/" for job in jobs.values()],
        "scheduling:job-submit": ["/jobs/new/"], "scheduling:queue": ["/queue/"],
        "fleet:cluster": ["/cluster/"], "fleet:inventory": ["/inventory/"],
        "fleet:node-detail": ["/inventory/nodes/dc1-r1-h100-01/", "/inventory/nodes/dc2-r2-l40s-01/"],
        "governance:request-list": ["/requests/"], "governance:request-new": ["/requests/new/"],
        "governance:request-detail": [f"/requests/{r.pk}/" for r in world["requests"].values()],
        "governance:calendar": ["/reservations/"], "governance:notifications": ["/notifications/"],
        "metering:index": ["/reports/"], "metering:operations": ["/reports/operations/"],
        "metering:platform-report": [f"/reports/{month}/"], "metering:tenant-report": [f"/reports/{month}/vision/"],
        "audit:log": ["/audit/"], "accounts:tokens": ["/account/tokens/"],
        "accounts:preferences": ["/account/preferences/"], "login": ["/accounts/login/"],
        "directory:groups": ["/directory/groups/"],
        "scheduling:service-detail": [f"/services/{g.pk}/" for g in world.get("groups", {}).values()
                                      if g.kind == "service"],
        "scheduling:array-detail": [f"/arrays/{g.pk}/" for g in world.get("groups", {}).values()
                                    if g.kind == "array"],
        "scheduling:template-list": ["/templates/"], "scheduling:template-new": ["/templates/new/"],
        "scheduling:template-detail": [f"/templates/{world['template'].pk}/"] if world.get("template") else [],
        "scheduling:template-version-new": [f"/templates/{world['template'].pk}/versions/new/"]
        if world.get("template") else [],
        "acceptance:checklist": ["/acceptance/"],
        "metering:action-list": ["/reports/actions/", "/reports/actions/?status=planned&due=2099-01",
                                 "/reports/actions/?due=2026-13"],
        "metering:action-create": ["/reports/actions/new/",
                                   f"/reports/actions/new/?month={month}&gpu_model=A100&recommendation=add"],
        "metering:action-edit": [f"/reports/actions/{world['action'].pk}/"] if world.get("action") else [],
        "scheduling:job-list-rows": ["/jobs/rows/"],
        "metering:what-if": ["/reports/what-if/"],
        "metering:what-if-detail": [f"/reports/what-if/{world['what_if'].pk}/"] if world.get("what_if") else [],
    }


# --- reading a page -------------------------------------------------------------------------------------------

CHECKED_ATTRIBUTES = {"title", "placeholder", "aria-label", "alt", "data-confirm"}
#: (a textarea holds what a person edits, such as a template version's JSON, not the portal's words)
UNREAD_ELEMENTS = {"script", "style", "code", "pre", "kbd", "samp", "textarea"}


class VisibleText(HTMLParser):
    """The texts a reader sees: text nodes outside scripts, styles and code, the checked attributes, and the
    strings of the charts' JSON (trace names, axis titles, category labels)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []
        self.unread_depth = 0
        self.in_json = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name, value in attrs.items():
            if name == "title" and value and CODE.fullmatch(value):
                continue
            if value and (name in CHECKED_ATTRIBUTES or (name.startswith("data-") and name.endswith("-text"))):
                self.texts.append(value)
        if tag in UNREAD_ELEMENTS:
            self.unread_depth += 1
            self.in_json = tag == "script" and attrs.get("type") == "application/json"

    def handle_endtag(self, tag):
        if tag in UNREAD_ELEMENTS and self.unread_depth:
            self.unread_depth -= 1
            self.in_json = False

    def handle_data(self, data):
        if self.in_json:
            self.texts.extend(_chart_strings(json.loads(data)))
        elif not self.unread_depth and data.strip():
            self.texts.append(" ".join(data.split()))


def _chart_strings(figure) -> list[str]:
    found = []
    if isinstance(figure, dict):
        for key, value in figure.items():
            if key in ("name", "text") and isinstance(value, str):
                found.append(value)
            elif key in ("x", "y", "labels") and isinstance(value, list):
                found.extend(v for v in value if isinstance(v, str))
            else:
                found.extend(_chart_strings(value))
    elif isinstance(figure, list):
        for value in figure:
            found.extend(_chart_strings(value))
    return found


WORD = re.compile(r"[A-Za-z]{3,}")
#: A machine code shown on purpose as a tooltip (title="quota_exhausted" over the label "配额已用尽").
CODE = re.compile(r"[a-z][a-z0-9_]*")
#: A path of the portal or its API (/api/jobs/{id}/report/), a document of the repository (docs/kubernetes.md), an
#: LDAP DN (cn=…,ou=…) or a product's name of two words, which the reader reads as they are.
LITERAL = re.compile(r"(?<![\w.])/[\w{}\-./]*|\b[\w-]+/[\w./-]+\.md\b|(?:\b(?:cn|ou|dc|uid|o)=[\w.-]+,?)+"
                     r"|\bOpenID Connect\b"
                     # and what a reader types or a program reads, as the help shows it: JSON examples, quoted
                     # names, {placeholders}, environment variables and field names
                     r"|\[\{[^\]]*\]|\[\.\.\.\]|\{\w+\}|\{\"(?:[^{}]|\{\w+\})*\}|\"[\w.:/,>=-]*\""
                     r"|\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b|\b[A-Z]{5,}\b|\b[a-z]+(?:_[a-z0-9]+)+\b")


def _world_words() -> set[str]:
    """Names and codes of the world: what users typed or the fleet reported, never the portal's own text."""
    values = [*get_user_model().objects.values_list("username", flat=True),
              *Tenant.objects.values_list("name", "display_name"), *Project.objects.values_list("name", flat=True),
              *TaskType.objects.values_list("code", "name"), *Cluster.objects.values_list("name", "description"),
              *Node.objects.values_list("name", "datacenter", "rack", "network_domain", "gpu_model"),
              *GPU.objects.values_list("uuid", flat=True), *Job.objects.values_list("name", "image", "command"),
              FAILED_LOG]
    words = set()
    for value in values:
        for part in value if isinstance(value, tuple) else (value,):
            words.update(w.lower() for w in WORD.findall(str(part)))
    return words


def _zone_words() -> set[str]:
    return {w.lower() for zone in zoneinfo.available_timezones() for w in WORD.findall(zone)}


def _english(text: str, allowed: set[str]) -> list[str]:
    for pattern, _source, _fix in KNOWN_UNMARKED:
        text = re.sub(pattern, " ", text)
    return [w for w in WORD.findall(LITERAL.sub(" ", text)) if w.lower() not in allowed]


# --- the checks -----------------------------------------------------------------------------------------------

def test_every_portal_page_is_visited_or_said_to_be_no_page():
    visited = set(_pages({"jobs": {}, "requests": {}, "month": date(2026, 10, 1)}))
    names = _portal_url_names()
    assert names - visited - set(NOT_PAGES) == set(), "a new page: add it to _pages() (or to NOT_PAGES, with why)"
    assert (visited | set(NOT_PAGES)) - names == set(), "these names are gone from the URLconfs"


def test_every_page_reads_in_chinese_for_every_role(settings, django_capture_on_commit_callbacks):
    settings.TIME_ZONE = "UTC"
    users = build_world()["users"]
    world = _build(users, django_capture_on_commit_callbacks)
    allowed = LATIN_WORDS | _world_words() | _zone_words()
    offending: dict[str, set[str]] = {}
    known_seen: set[str] = set()
    status_of: dict[tuple[str, str], int] = {}

    pages_read: dict[tuple[str, str], str] = {}

    def read(who: str, client: Client, url: str, response=None):
        if response is None:
            response = client.get(url, **ACCEPT_CHINESE)
        status_of[(who, url)] = response.status_code
        pages_read[(who, url)] = response.content.decode()
        assert response.status_code in (200, 400, 403, 404), (who, url, response.status_code)
        assert response["Content-Language"] == "zh-hans", (who, url)
        parser = VisibleText()
        parser.feed(response.content.decode())
        for text in parser.texts:
            for pattern, _source, _fix in KNOWN_UNMARKED:
                if re.search(pattern, text):
                    known_seen.add(pattern)
            if _english(text, allowed):
                offending.setdefault(text, set()).add(f"{who} {url}")

    urls = [url for addresses in _pages(world).values() for url in addresses]
    for who in ROLES:
        client = Client()
        assert client.login(username=who, password=PASSWORD)
        for url in urls:
            read(who, client, url)
        read(who, client, "/no-such-page/")
        # a submission with errors shows the form's messages
        read(who, client, "/jobs/new/", client.post("/jobs/new/", {
            "tenant": "vision", "project": "detection", "task_type": "research", "gpu_model": "A100",
            "gpus_per_node": 99, "nodes": 1, "image": "", "max_runtime_minutes": 60}, **ACCEPT_CHINESE))
    anonymous = Client()
    read("anonymous", anonymous, "/accounts/login/")
    read("anonymous", anonymous, "/accounts/login/", anonymous.post(
        "/accounts/login/", {"username": "alice", "password": "wrong"}, **ACCEPT_CHINESE))

    # the world is really on the pages: each role reads what it may, not 404s everywhere
    jobs = world["jobs"]
    for who, url in [("alice", f"/jobs/{jobs['failed'].pk}/"), ("carol", f"/requests/{world['requests']['burst'].pk}/"),
                     ("dave", f"/reports/{world['month']:%Y-%m}/"), ("admin", "/audit/"), ("alice", "/"),
                     ("admin", "/inventory/nodes/dc1-r1-h100-01/"), ("dave", "/acceptance/"),
                     ("dave", "/reports/actions/"), ("admin", f"/reports/actions/{world['action'].pk}/")]:
        assert status_of[(who, url)] == 200, (who, url)
    # the review and improvement pages show the world's action and pilot note, in Chinese
    assert "缩短 A100 排队时间" in pages_read[("dave", "/reports/actions/")]
    assert "改进措施" in pages_read[("dave", "/reports/actions/")]
    assert "8 卡 NCCL 测试通过。" in pages_read[("dave", "/acceptance/")]
    assert "验收清单" in pages_read[("dave", "/acceptance/")] and "试点记录" in pages_read[("dave", "/acceptance/")]
    assert status_of[("alice", "/acceptance/")] == 403 and status_of[("dave", "/reports/actions/new/")] == 403
    # and in Chinese, the engine's numbers inside the translated sentences
    assert "租户 vision 已使用其 16 个 A100 GPU 中的 16 个；该作业还需要 8 个" in pages_read[
        ("dave", f"/jobs/{jobs['waiting'].pk}/")]
    assert "提交作业" in pages_read[("alice", "/")] and "排队位置" in pages_read[("dave", "/jobs/")]
    assert "用户名和密码不匹配" in pages_read[("anonymous", "/accounts/login/")]

    report = "\n".join(f"{text!r}\n    on {', '.join(sorted(pages)[:4])}" for text, pages in sorted(offending.items()))
    assert not offending, f"{len(offending)} English text(s) on Chinese pages:\n{report}"
    stale = [pattern for pattern, _source, _fix in KNOWN_UNMARKED if pattern not in known_seen]
    assert stale == [], f"no page shows these any more: remove them from KNOWN_UNMARKED: {stale}"
