"""Whose account a job runs under on a Slurm cluster: the service account, the mapping, the directory's uid,
else the portal user name."""

import time

import pytest

from directory.models import AccountSource, DirectoryAccount
from fleet.models import Cluster, ExecutorKind
from scheduling.executors.slurm import tokens
from scheduling.executors.slurm.executor import gres_type_of
from scheduling.executors.slurm.identity import IdentityRefused, cluster_user
from tests.factories import make_user


@pytest.mark.django_db
def test_run_as_then_mapping_then_directory_then_user_name():
    ada, bob = make_user("ada"), make_user("bob")
    DirectoryAccount.objects.create(user=ada, source=AccountSource.LDAP, identifier="uid=ada_l,ou=people,dc=lab")
    cluster = Cluster(name="s", executor=ExecutorKind.SLURM, slurm_users={"bob": "bsmith"})
    assert (cluster_user(cluster, ada), cluster_user(cluster, bob)) == ("ada_l", "bsmith")
    assert cluster_user(Cluster(name="s"), bob) == "bob"
    assert cluster_user(Cluster(name="s", slurm_run_as="svc", slurm_users={"bob": "bsmith"}), bob) == "svc"


def test_gres_type_is_the_reverse_of_the_model_mapping_else_lower_case():
    cluster = Cluster(name="s", slurm_models={"h100": "H200"})
    assert (gres_type_of(cluster, "H200"), gres_type_of(cluster, "A100")) == ("h100", "a100")


@pytest.mark.django_db
def test_directory_users_run_as_their_uid_or_login_never_an_opaque_subject():
    ada, bob, cy = make_user("ada"), make_user("bob"), make_user("cy")
    DirectoryAccount.objects.create(user=ada, source=AccountSource.OIDC, issuer="https://id", identifier="8f14e45f")
    DirectoryAccount.objects.create(user=bob, source=AccountSource.LDAP, identifier="cn=Bob Smith,ou=people,dc=lab")
    DirectoryAccount.objects.create(user=cy, source=AccountSource.LDAP, identifier="uid=cyw,ou=people,dc=lab")
    cluster = Cluster(name="s", executor=ExecutorKind.SLURM)
    assert [cluster_user(cluster, user) for user in (ada, bob, cy)] == ["ada", "bob", "cyw"]


@pytest.mark.django_db
def test_privileged_and_impossible_names_are_refused_unless_mapped_to_a_plain_account():
    root, slurm_admin, dotted = make_user("root"), make_user("slurmadm"), make_user("Ada.Lovelace")
    cluster = Cluster(name="s", executor=ExecutorKind.SLURM, slurm_user="slurmadm")
    for user in (root, slurm_admin):
        with pytest.raises(IdentityRefused, match="privileged account"):
            cluster_user(cluster, user)
    with pytest.raises(IdentityRefused, match="not a user name the nodes of cluster s can have"):
        cluster_user(cluster, dotted)
    cluster.slurm_users = {"Ada.Lovelace": "ada.lovelace", "root": "root"}
    assert cluster_user(cluster, dotted) == "ada.lovelace"  # an admin's explicit mapping is trusted as a name
    with pytest.raises(IdentityRefused, match="privileged account"):
        cluster_user(cluster, root)  # but never to a privileged account


@pytest.mark.django_db
def test_with_a_token_file_every_job_is_the_token_users(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(tokens.sign(b"k" * 32, "svc-gpu", time.time(), 600))
    cluster = Cluster(name="s", executor=ExecutorKind.SLURM, slurm_token_file=str(token_file))
    assert cluster_user(cluster, make_user("bob")) == "svc-gpu"
