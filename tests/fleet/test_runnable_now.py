"""'What can I run now' is personal: free capacity intersected with the tenant's quota and
other tenants' reservations, with the limit that binds."""

from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.queries import Binds, runnable_now
from scheduling.jobs import submission
from scheduling.models import Reservation
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


def _row(user, model):
    return next(r for r in runnable_now(user) if r.gpu_model == model)


def test_a_full_quota_binds_although_gpus_are_free(users):
    alice = users["alice"]
    for _ in range(2):
        submission.submit_job(alice, job_payload(gpus_per_node=8, command=long_run(999)))
    a100 = _row(alice, "A100")
    assert a100.used == 16 and a100.free == 16  # 32 A100 GPUs in the lab, 16 held by vision
    assert a100.can_start == 0 and a100.binds == Binds.QUOTA
    assert "vision holds 16 of its 16 A100 GPUs" in a100.explanation


def test_free_gpus_bind_and_the_guarantee_is_shown(users):
    bob = users["bob"]  # nlp: H100 guaranteed 16, limit 24; the lab has 32 H100 GPUs
    submission.submit_job(users["alice"], job_payload(gpu_model="H100", gpus_per_node=8, nodes=2,
                                                      command=long_run(999)))
    h100 = _row(bob, "H100")
    assert h100.free == 16 and h100.can_start == 16 and h100.within_guarantee == 16
    assert h100.binds == Binds.CLUSTER and h100.largest_single_node_job == 8


def test_another_tenants_reservation_keeps_what_it_does_not_use(users, world):
    now = timezone.now()
    Reservation.objects.create(tenant=world["tenants"]["vision"], gpu_model="H100", gpus=24,
                               start=now - timedelta(minutes=5), end=now + timedelta(hours=3))
    h100 = _row(users["bob"], "H100")
    assert h100.reserved_for_others == 24 and h100.reserved_by == "vision"
    assert h100.can_start == 8 and h100.binds == Binds.RESERVATION
    assert _row(users["alice"], "H100").reserved_for_others == 0  # not kept from its own tenant


def test_the_page_shows_it(client, users):
    client.login(username="alice", password="demo")
    for _ in range(2):
        submission.submit_job(users["alice"], job_payload(gpus_per_node=8, command=long_run(999)))
    page = client.get("/cluster/").content.decode()
    assert 'data-tenant="vision" data-model="A100" data-binds="quota"' in page
    assert "vision holds 16 of its 16 A100 GPUs" in page
