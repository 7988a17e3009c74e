import pytest

from tests.scheduling.kube import served_cluster


@pytest.fixture
def kube(users, tmp_path, settings):
    """A Kubernetes cluster served by the fake API server, with fast retries."""
    with served_cluster(tmp_path, settings, "kube-a", retries=3) as made:
        yield made
