"""Whose account a job runs under on a Slurm cluster: the service account, the mapping, the directory's uid,
else the portal user name."""

import pytest

from directory.models import AccountSource, DirectoryAccount
from fleet.models import Cluster, ExecutorKind
from scheduling.executors.slurm.executor import gres_type_of
from scheduling.executors.slurm.identity import cluster_user
from tests.factories import make_user


@pytest.mark.django_db
def test_run_as_then_mapping_then_directory_then_user_name():
    ada, bob = make_user("ada"), make_user("bob")
    DirectoryAccount.objects.create(user=ada, source=AccountSource.LDAP, identifier="uid=ada.l,ou=people,dc=lab")
    cluster = Cluster(name="s", executor=ExecutorKind.SLURM, slurm_users={"bob": "bsmith"})
    assert (cluster_user(cluster, ada), cluster_user(cluster, bob)) == ("ada.l", "bsmith")
    assert cluster_user(Cluster(name="s"), bob) == "bob"
    assert cluster_user(Cluster(name="s", slurm_run_as="svc", slurm_users={"bob": "bsmith"}), bob) == "svc"


def test_gres_type_is_the_reverse_of_the_model_mapping_else_lower_case():
    cluster = Cluster(name="s", slurm_models={"h100": "H200"})
    assert (gres_type_of(cluster, "H200"), gres_type_of(cluster, "A100")) == ("h100", "a100")
