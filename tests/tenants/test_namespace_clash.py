"""Two tenants never share a Kubernetes namespace: a name that maps to another tenant's namespace is refused at
creation, in the admin as anywhere a tenant is validated."""

import pytest
from django.core.exceptions import ValidationError

from gpuportal.text.names import dns_label
from tenants.models import Tenant

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("existing", "new"), [("ml_lab", "ml-lab"), ("Vision", "vision"), ("a_b", "A-B")])
def test_a_name_that_maps_to_another_tenants_namespace_is_refused(existing, new):
    Tenant.objects.create(name=existing)
    assert dns_label(existing) == dns_label(new)
    with pytest.raises(ValidationError) as refused:
        Tenant(name=new).full_clean()
    assert f"Tenant {existing} already has the namespace" in refused.value.message_dict["name"][0]


def test_a_tenant_is_not_refused_for_its_own_namespace_and_others_are_accepted():
    tenant = Tenant.objects.create(name="ml_lab")
    tenant.description = "renamed nothing"
    tenant.full_clean()
    Tenant(name="ml-lab2").full_clean()


def test_the_admin_refuses_the_clash(admin_client):
    Tenant.objects.create(name="ml_lab")
    response = admin_client.post("/admin/tenants/tenant/add/", {"name": "ml-lab", "fair_share_weight": 1})
    assert response.status_code == 200 and "already has the namespace" in response.content.decode()
    assert not Tenant.objects.filter(name="ml-lab").exists()
