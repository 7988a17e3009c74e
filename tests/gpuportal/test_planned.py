"""Queries compiled to SQL once per process (gpuportal.storage.planned): the rows are the ORM's for any values,
and a query that cannot be planned safely is refused when it is planned, naming it."""

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from gpuportal.storage.planned import ONE_ID, PlannedRows
from scheduling.models import Job
from tenants import access
from tenants.models import Membership, PlatformRole, Role
from tests.factories import make_tenant, make_user

pytestmark = pytest.mark.django_db


def test_the_planned_rows_are_the_orm_s_for_every_value():
    vision, nlp = make_tenant("vision"), make_tenant("nlp")
    alice = make_user("alice", vision, roles=(Role.RESEARCHER, Role.APPROVER))
    Membership.objects.create(user=alice, tenant=nlp, role=Role.VIEWER)
    bob = make_user("bob", nlp)
    PlatformRole.objects.create(user=bob, role=PlatformRole.Kind.MANAGER)
    nobody = make_user("nobody")

    memberships = PlannedRows(lambda pk: Membership.objects.filter(user_id=pk).order_by().values_list(
        "tenant_id", "role"), ONE_ID)
    for user in (alice, bob, nobody):
        orm = Membership.objects.filter(user_id=user.pk).order_by().values_list("tenant_id", "role")
        assert sorted(memberships(user.pk)) == sorted(orm)
        access.forget(user)
        assert access.for_user(user).roles_by_tenant == {
            tenant: frozenset(r for t, r in orm if t == tenant) for tenant, _role in orm}
    assert access.for_user(bob).manager and not access.for_user(alice).manager
    assert access.for_user(nobody).roles_by_tenant == {}


def test_a_query_without_values_is_planned_with_its_constants():
    """The queue table's token (``scheduling.models.queue_places``) is such a query: its one row, or none."""
    assert PlannedRows(lambda: Membership.objects.order_by("pk").values_list("role")[:1], ((), ()))() == []
    make_user("dora", make_tenant("vision"))
    planned = PlannedRows(lambda: Membership.objects.order_by("pk").values_list("role")[:1], ((), ()))
    assert planned() == list(Membership.objects.order_by("pk").values_list("role")[:1]) == [(Role.RESEARCHER,)]


def test_a_planned_query_is_prepared_and_run_from_one_statement():
    """Its SQL is the same text at every call, so the connection prepares it once (gpuportal.storage.cursors)."""
    user = make_user("carol", make_tenant("vision"))
    planned = PlannedRows(lambda pk: Membership.objects.filter(user_id=pk).values_list("role"), ONE_ID)
    for _ in range(8):
        assert planned(user.pk) == [(Role.RESEARCHER,)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement = %s",
                       [planned.plan(connection).sql.replace("%s", "$1")])
        assert cursor.fetchone()[0] == 1


@pytest.mark.parametrize(("build", "why"), [
    (lambda n: Job.objects.filter(pk__in=list(range(n % 5 + 1))).values_list("pk"), "depends on its values"),
    (lambda n: Job.objects.filter(pk=n).values_list("executor_state"), "converts a column"),  # JSON
    (lambda n: Job.objects.filter(name="x").values_list("pk"), "reaches no parameter"),
])
def test_a_query_that_cannot_be_planned_is_refused_when_it_is_planned(build, why):
    with pytest.raises(ImproperlyConfigured, match=why):
        PlannedRows(build, ONE_ID)(1)
