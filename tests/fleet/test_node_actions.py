"""Cordon, drain and reactivate: a reason is required and limited (400 on the page, the reason kept, never cut);
a confirmation step shows the running work the action touches and what becomes of it; the jobs running on the
node get a line on their timelines; the action is audited with its reason."""

import pytest
from django.core.exceptions import ValidationError

from audit.models import AuditAction, AuditRecord
from fleet import services
from fleet.models import AdminState, Node
from fleet.services import MAX_ADMIN_REASON
from scheduling.jobs import submission
from scheduling.models import Job, JobEvent, JobStatus
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_node_reason_too_long_is_refused_and_kept(users, client):
    node = Node.objects.order_by("name").first()
    client.login(username="admin", password="demo")
    reason = "r" * (MAX_ADMIN_REASON + 1)
    refused = client.post(f"/inventory/nodes/{node.name}/action/", {"action": "cordoned", "reason": reason})
    assert refused.status_code == 400
    page = refused.content.decode()
    assert f"At most {MAX_ADMIN_REASON} characters (got {MAX_ADMIN_REASON + 1})" in page and f'value="{reason}"' in page
    node.refresh_from_db()
    assert node.admin_state == AdminState.ACTIVE
    accepted = client.post(f"/inventory/nodes/{node.name}/action/",
                           {"action": "cordoned", "reason": "r" * MAX_ADMIN_REASON, "confirm": "1"})
    assert accepted.status_code == 302
    node.refresh_from_db()
    assert node.admin_state == AdminState.CORDONED
    assert node.events.filter(reason__endswith="r" * MAX_ADMIN_REASON).exists()


def test_a_node_action_without_a_reason_is_refused(users, client):
    node = Node.objects.order_by("name").first()
    client.login(username="admin", password="demo")
    for reason in ("", "   "):
        refused = client.post(f"/inventory/nodes/{node.name}/action/", {"action": "draining", "reason": reason,
                                                                        "confirm": "1"})
        assert refused.status_code == 400
        page = refused.content.decode()
        assert 'id="error-reason"' in page and "Say why: the reason is recorded" in page
        assert 'aria-describedby="error-reason"' in page
    with pytest.raises(ValidationError) as refused_here:
        services.set_node_admin_state(users["admin"], node, AdminState.CORDONED, " ")
    assert "reason" in refused_here.value.message_dict
    node.refresh_from_db()
    assert node.admin_state == AdminState.ACTIVE and not node.events.exists()


def only_one_a100_node() -> Node:
    """Every A100 node but one cordoned (directly: not the action under test), so jobs of A100 meet there."""
    nodes = list(Node.objects.filter(gpu_model="A100").order_by("name"))
    Node.objects.filter(pk__in=[n.pk for n in nodes[1:]]).update(admin_state=AdminState.CORDONED)
    return nodes[0]


def test_the_confirm_step_shows_the_running_work_and_what_becomes_of_it(users, client):
    node = only_one_a100_node()
    alice = submission.submit_job(users["alice"], job_payload(gpus_per_node=4, name="alice-run", command=long_run(999)))
    bob = submission.submit_job(users["bob"], job_payload(tenant="nlp", project="llm-pretrain", gpus_per_node=2,
                                                          name="bob-run", command=long_run(999)))
    assert {a.gpu.node_id for job in (alice, bob) for a in job.allocations.all()} == {node.pk}
    client.login(username="admin", password="demo")
    for state, fate in ((AdminState.CORDONED, "runs on to its end"),
                        (AdminState.DRAINING, "runs on to its end; not requeued")):
        page = client.post(f"/inventory/nodes/{node.name}/action/", {"action": state, "reason": "PSU swap"})
        assert page.status_code == 200
        html = page.content.decode()
        assert "2 jobs hold 6 GPUs of this node (tenants: nlp, vision)." in html
        assert f"#{alice.pk} alice-run" in html and f"#{bob.pk} bob-run" in html
        assert html.count(f'<td class="fate" data-label="What becomes of it">{fate}</td>') == 2
        assert '<input type="hidden" name="confirm" value="1">' in html and "PSU swap" in html
    assert "none is stopped or requeued" in html  # the drain's sentence says what drain does
    node.refresh_from_db()
    assert node.admin_state == AdminState.ACTIVE  # nothing changed before the confirmation
    assert not JobEvent.objects.filter(kind=JobEvent.Kind.EXECUTOR, data__node=node.name).exists()


def test_a_confirmed_drain_notes_it_on_the_running_jobs_and_audits_the_reason(users, client):
    node = only_one_a100_node()
    job = submission.submit_job(users["alice"], job_payload(gpus_per_node=4, command=long_run(999)))
    client.login(username="admin", password="demo")
    done = client.post(f"/inventory/nodes/{node.name}/action/", {"action": "draining", "reason": "PSU swap",
                                                                 "confirm": "1"})
    assert done.status_code == 302
    node.refresh_from_db()
    assert node.admin_state == AdminState.DRAINING
    job = Job.objects.get(pk=job.pk)
    assert job.status not in (JobStatus.QUEUED, JobStatus.PREEMPTED) and job.retry_count == 0  # it runs on
    [event] = job.events.filter(kind=JobEvent.Kind.EXECUTOR, data__node=node.name)
    assert event.reason == (f"Node {node.name} is being drained by admin: PSU swap. This job runs on to its end "
                            "(it is not requeued); then the node stays empty.")
    assert event.actor == users["admin"] and event.data["admin_state"] == AdminState.DRAINING
    assert event.data["phrase"]["msgid"] == services.JOB_NOTES[AdminState.DRAINING]  # read in its reader's language
    record = AuditRecord.objects.get(action=AuditAction.NODE_ADMIN, object_id=str(node.pk))
    assert record.reason == "PSU swap" and record.after == {"admin_state": "draining"}
    assert record.actor.username == "admin"
    client.login(username="alice", password="demo")
    assert "is being drained by admin: PSU swap" in client.get(f"/jobs/{job.pk}/").content.decode()

    # reactivating touches no running job: no line on its timeline
    services.set_node_admin_state(users["admin"], node, AdminState.ACTIVE, "PSU replaced")
    assert job.events.filter(kind=JobEvent.Kind.EXECUTOR).count() == 1



def test_the_api_refuses_a_missing_reason_naming_it_and_answers_what_it_touches(users, api):
    node = only_one_a100_node()
    job = submission.submit_job(users["alice"], job_payload(gpus_per_node=4, command=long_run(999)))
    url = f"/api/nodes/{node.name}/admin-state/"
    admin = api("admin")
    for body in ({"state": "cordoned"}, {"state": "cordoned", "reason": "  "},
                 {"state": "cordoned", "reason": "r" * (MAX_ADMIN_REASON + 1)}):
        refused = admin.post(url, body, format="json")
        assert refused.status_code == 400 and list(refused.json()) == ["reason"], body
    assert api("alice").post(url, {"state": "cordoned", "reason": "mine"}, format="json").status_code == 403
    dry = admin.post(url, {"state": "draining", "reason": "PSU swap", "dry_run": True}, format="json").json()
    assert dry["applied"] is False and dry["gpus"] == 4 and dry["tenants"] == ["vision"]
    assert dry["jobs"] == [{"job": job.pk, "name": job.name, "tenant": "vision", "owner": "alice", "gpus": 4,
                            "fate": "runs on to its end; not requeued"}]
    node.refresh_from_db()
    assert node.admin_state == AdminState.ACTIVE
    done = admin.post(url, {"state": "draining", "reason": "PSU swap"}, format="json").json()
    assert done["applied"] is True
    node.refresh_from_db()
    assert node.admin_state == AdminState.DRAINING
    assert Job.objects.get(pk=job.pk).events.filter(kind=JobEvent.Kind.EXECUTOR, data__node=node.name).count() == 1
