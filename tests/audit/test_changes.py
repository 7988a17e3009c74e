"""The audit page shows what changed in words (audit/changes.py): field labels and choice labels in the reader's
language, related rows by name, times with their year and zone; the stored record stays as it was hashed."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils import translation
from django.utils.translation import gettext_noop

from audit import log as audit
from audit.changes import changes_of
from audit.models import AuditAction, AuditRecord
from fleet.models import Node
from gpuportal.text.phrases import Phrase
from tenants import quotas
from tenants.models import Tenant
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db


def _page(language: str) -> str:
    client = Client()
    assert client.login(username="admin", password=PASSWORD)
    return client.get("/audit/", HTTP_ACCEPT_LANGUAGE=language).content.decode()


def test_changes_read_as_words_in_english_and_chinese(world):
    node = Node.objects.order_by("name").first()
    audit.record(AuditAction.NODE_ADMIN, node, before={"admin_state": "active"}, after={"admin_state": "draining"},
                 reason=Phrase(gettext_noop("Earlier tokens revoked.")))
    quotas.set_quota(Tenant.objects.get(name="vision"), "A100", 4, 12)
    node_record = AuditRecord.objects.get(action=AuditAction.NODE_ADMIN)
    assert node_record.before == {"admin_state": "active"}  # stored as written: codes, hashed
    assert audit.verify().ok

    with translation.override("en"):
        [change] = changes_of([node_record])[node_record.pk]
        assert (change.field, change.before, change.after, change.changed) == ("admin state", "Active", "Draining",
                                                                               True)
    english = _page("en")
    assert "admin state</span>: Active → Draining" in english and "{&#x27;admin_state&#x27;" not in english
    assert "tenant</span>: vision" in english  # the quota's tenant by name, not its id
    assert "Earlier tokens revoked." in english
    assert f'node <code class="recorded">{node}</code>' in english  # the kind in words, the recorded text as data
    times = re.findall(r'<time datetime="[^"]+">([^<]+)</time>', english)
    assert times and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+", t) for t in times), times

    chinese = _page("zh-Hans")
    assert "管理状态</span>: 正常 → 排空中" in chinese
    assert "Active → Draining" not in chinese and "Earlier tokens revoked." not in chinese
    with translation.override("zh-hans"):
        [change] = changes_of([node_record])[node_record.pk]
        assert change.before != "Active" and change.after != "Draining" and change.field != "admin state"
        assert node_record.reason_text != "Earlier tokens revoked."


def test_created_removed_and_plain_values(world):
    tenant = Tenant.objects.get(name="vision")
    quota = quotas.set_quota(tenant, "MI300X", 2, 4)
    quota.delete()
    created, removed = AuditRecord.objects.filter(object_type="tenants.quota").order_by("-seq")[:2][::-1]
    with translation.override("en"):
        described = changes_of([created, removed])
    by_field = {c.field: c for c in described[created.pk]}
    assert by_field["guaranteed GPUs"].before == "" and by_field["guaranteed GPUs"].after == "2"
    assert {c.after for c in described[removed.pk]} == {""}
    assert by_field["tenant"].after == "vision"
    record = audit.record(AuditAction.JOB_CLEAR_AVOIDANCE, tenant, before={"avoid_nodes": [3, 4], "held": True},
                          after={"avoid_nodes": [], "when": "2026-11-02T08:30:00+00:00"})
    with translation.override("en"):
        rows = {c.field: c for c in changes_of([record])[record.pk]}
    assert rows["avoided nodes"].before == "3, 4" and rows["avoided nodes"].after == "—"
    assert rows["held"].before == "yes"
    assert re.fullmatch(r"2026-11-02 \d\d:\d\d \S+", rows["when"].after)
    assert record.reason_text == ""  # no reason, none invented
