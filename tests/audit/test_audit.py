"""The audit log: one record per governance action, the hash chain, the trigger, scoping, page, API, CSV."""

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.utils import translation

from audit import log
from audit.changes import value_text
from audit.models import AuditAction, AuditRecord
from fleet import services
from fleet.agents import tokens as agent_tokens
from fleet.models import Node
from scheduling.jobs import actions as job_actions
from scheduling.jobs import submission
from scheduling.models import Job, Reservation
from tenants.models import Membership, PlatformRole, Quota, Role, Tenant
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


def records(action, since=0):
    return list(AuditRecord.objects.filter(action=action, seq__gt=since))


@pytest.fixture
def fresh(users):
    """Seeding wrote records already (quotas, memberships, roles); start counting from here."""
    return AuditRecord.objects.count()


def test_each_governance_action_writes_exactly_one_record(users, fresh):
    admin = users["admin"]
    vision = Tenant.objects.get(name="vision")
    quota = Quota.objects.get(tenant=vision, gpu_model="A100")
    quota.limit_gpus = 24
    quota.save()
    [change] = records(AuditAction.QUOTA_CHANGE, fresh)
    assert change.before["limit_gpus"] == 16 and change.after["limit_gpus"] == 24 and change.tenant == vision
    quota.save()  # no change, no record
    assert len(records(AuditAction.QUOTA_CHANGE, fresh)) == 1

    membership = Membership.objects.create(user=users["erin"], tenant=vision, role=Role.VIEWER)
    membership.role = Role.RESEARCHER
    membership.save()
    membership.delete()
    for action in (AuditAction.MEMBERSHIP_ADD, AuditAction.MEMBERSHIP_CHANGE, AuditAction.MEMBERSHIP_REMOVE):
        assert len(records(action, fresh)) == 1, action
    PlatformRole.objects.create(user=users["erin"], role=PlatformRole.Kind.AUDITOR).delete()
    assert len(records(AuditAction.PLATFORM_ROLE_REMOVE, fresh)) == 1

    node = Node.objects.first()
    services.set_node_admin_state(admin, node, "cordoned", "disk swap")
    [cordon] = records(AuditAction.NODE_ADMIN)
    assert cordon.actor == admin and cordon.after == {"admin_state": "cordoned"} and cordon.reason == "disk swap"
    agent_tokens.issue(node, actor=admin)
    assert len(records(AuditAction.TOKEN_ISSUE)) == 1

    job = submission.submit_job(users["alice"], job_payload(command=long_run(999)))
    job_actions.cancel_job(users["alice"], job)  # the owner's own cancellation: not governance
    assert records(AuditAction.JOB_CANCEL) == []
    other = submission.submit_job(users["alice"], job_payload(command=long_run(999)))
    job_actions.cancel_job(admin, Job.objects.get(pk=other.pk), "maintenance window")
    [cancel] = records(AuditAction.JOB_CANCEL)
    assert cancel.actor == admin and cancel.object_id == str(other.pk) and cancel.tenant == vision

    from datetime import timedelta

    from django.utils import timezone

    Reservation.objects.create(tenant=vision, gpu_model="A100", gpus=8, start=timezone.now(),
                               end=timezone.now() + timedelta(hours=4), created_by=admin)
    assert len(records(AuditAction.RESERVATION_CREATE, fresh)) == 1
    assert log.verify().ok


def test_preemption_is_audited(users):
    from scheduling.models import JobStatus
    from tests.scheduling.passes.test_scheduling_pass import fill_h100_with_research

    fill_h100_with_research(users)  # vision borrows all H100; nlp reclaims its guarantee
    submission.submit_job(users["bob"], job_payload(tenant="nlp", project="llm-pretrain", gpu_model="H100",
                                                  gpus_per_node=8))
    [entry] = records(AuditAction.JOB_PREEMPT)
    assert entry.tenant.name == "vision" and entry.after["preemptor_tenant"] == "nlp" and entry.actor is None
    assert entry.after["rule"] == "reclaim within guarantee"
    assert "preemptor" not in entry.after  # read by the victim's tenant: no id of the other tenant's job
    with translation.override("zh-hans"):  # the rule in the scheduling app's words, in the reader's language
        assert value_text(entry.after["rule"]) == "在保障额度内回收"
    assert Job.objects.get(pk=entry.object_id).events.filter(to_status=JobStatus.PREEMPTED).count() == 1


def test_verify_catches_an_edited_and_a_deleted_record(users, capsys):
    for _ in range(3):
        log.record(AuditAction.NODE_ADMIN, Node.objects.first(), reason="check")
    call_command("verify_audit")
    assert "intact" in capsys.readouterr().out
    target = AuditRecord.objects.order_by("seq")[2]
    with connection.cursor() as cursor:  # an attacker with superuser rights switches triggers off
        cursor.execute("SET session_replication_role = replica")
        cursor.execute("UPDATE audit_auditrecord SET reason = 'nothing to see' WHERE id = %s", [target.pk])
        cursor.execute("SET session_replication_role = DEFAULT")
    result = log.verify()
    assert not result.ok and result.bad_seq == target.seq and "altered" in result.problem
    with pytest.raises(SystemExit) as exited:
        call_command("verify_audit")
    assert exited.value.code == 1 and f"#{target.seq}" in capsys.readouterr().err

    with connection.cursor() as cursor:  # undo the edit, then remove a record in the middle instead
        cursor.execute("SET session_replication_role = replica")
        cursor.execute("UPDATE audit_auditrecord SET reason = 'check' WHERE id = %s", [target.pk])
        cursor.execute("DELETE FROM audit_auditrecord WHERE id = %s", [AuditRecord.objects.order_by("seq")[1].pk])
        cursor.execute("SET session_replication_role = DEFAULT")
    result = log.verify()
    assert not result.ok and "missing" in result.problem and result.bad_seq == 2


def test_verify_catches_removal_of_the_newest_records(users):
    last = log.record(AuditAction.NODE_ADMIN, Node.objects.first(), reason="last")
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        cursor.execute("DELETE FROM audit_auditrecord WHERE id = %s", [last.pk])
        cursor.execute("SET session_replication_role = DEFAULT")
    result = log.verify()
    assert not result.ok and result.bad_seq == last.seq


def test_trigger_refuses_update_and_delete(users):
    entry = log.record(AuditAction.NODE_ADMIN, Node.objects.first(), reason="keep me")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditRecord.objects.filter(pk=entry.pk).update(reason="changed")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditRecord.objects.filter(pk=entry.pk).delete()
    assert AuditRecord.objects.get(pk=entry.pk).reason == "keep me"


def test_scoping_page_csv_and_api(client, api, users):
    nlp, vision = Tenant.objects.get(name="nlp"), Tenant.objects.get(name="vision")
    q = Quota.objects.get(tenant=nlp, gpu_model="H100")
    q.limit_gpus = 30
    q.save()
    q = Quota.objects.get(tenant=vision, gpu_model="H100")
    q.limit_gpus = 20
    q.save()
    frank = api("frank").get("/api/audit/?action=quota.change").json()["results"]
    assert frank and {r["tenant"] for r in frank} == {"nlp"}
    everything = api("admin").get("/api/audit/?action=quota.change").json()["results"]
    assert {r["tenant"] for r in everything} >= {"nlp", "vision"}
    assert api("alice").get("/api/audit/").status_code == 403
    only_vision = api("admin").get("/api/audit/?tenant=vision&action=quota.change").json()["results"]
    assert {r["tenant"] for r in only_vision} == {"vision"}

    client.login(username="frank", password="demo")
    html = client.get("/audit/?action=quota.change").content.decode()
    assert "nlp" in html and 'data-action="quota.change"' in html
    exported = b"".join(client.get("/audit/?action=quota.change&format=csv").streaming_content).decode()
    lines = exported.strip().splitlines()
    assert lines[0].startswith("seq,at,actor_name,action") and all(",nlp," in line for line in lines[1:])
    client.login(username="alice", password="demo")
    assert client.get("/audit/").status_code == 403


def test_source_address_and_actor_come_from_the_request(client, users):
    client.login(username="admin", password="demo")
    node = Node.objects.first()
    response = client.post(f"/inventory/nodes/{node.name}/action/", {"action": "cordoned", "reason": "fan",
                                                                   "confirm": "1"}, REMOTE_ADDR="10.9.8.7")
    assert response.status_code == 302
    [entry] = records(AuditAction.NODE_ADMIN)
    assert entry.actor_name == "admin" and entry.source_address == "10.9.8.7"
