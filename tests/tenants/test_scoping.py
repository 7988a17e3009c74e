"""visible_to(user): the one isolation mechanism."""

import pytest
from django.contrib.auth.models import AnonymousUser

from scheduling.jobs import submission
from scheduling.models import Job
from tenants.models import Membership, Project, Quota, Role, Tenant
from tests.conftest import job_payload

pytestmark = pytest.mark.django_db(transaction=True)


def test_members_see_their_tenants_only(users):
    alice_job = submission.submit_job(users["alice"], job_payload())
    bob_job = submission.submit_job(users["bob"], job_payload(tenant="nlp", project="llm-pretrain"))
    assert list(Job.objects.visible_to(users["alice"])) == [alice_job]
    assert list(Job.objects.visible_to(users["bob"])) == [bob_job]
    assert set(Tenant.objects.visible_to(users["alice"]).values_list("name", flat=True)) == {"vision"}
    assert set(Quota.objects.visible_to(users["bob"]).values_list("tenant__name", flat=True)) == {"nlp"}
    assert not Project.objects.visible_to(users["alice"]).filter(tenant__name="nlp").exists()


def test_platform_roles_see_everything_and_anonymous_nothing(users):
    submission.submit_job(users["alice"], job_payload())
    submission.submit_job(users["bob"], job_payload(tenant="nlp", project="llm-pretrain"))
    assert Job.objects.visible_to(users["dave"]).count() == 2
    assert Job.objects.visible_to(users["admin"]).count() == 2
    assert Job.objects.visible_to(AnonymousUser()).count() == 0
    assert Tenant.objects.visible_to(users["dave"]).count() == 3


def test_viewer_sees_but_cannot_submit(users):
    from django.core.exceptions import ValidationError

    from tenants import access

    viewer = users["erin"]
    Membership.objects.create(user=viewer, tenant=Tenant.objects.get(name="vision"), role=Role.VIEWER)
    access.forget(viewer)
    assert Tenant.objects.visible_to(viewer).filter(name="vision").exists()
    with pytest.raises(ValidationError) as error:
        submission.submit_job(viewer, job_payload())
    assert "read-only" in str(error.value.message_dict["project"])
