import pytest

from .kube import make_cluster, reset_client_caches


@pytest.fixture
def kube(users, tmp_path, settings):
    """A Kubernetes cluster served by the fake API server, with fast retries."""
    settings.KUBERNETES = {**settings.KUBERNETES, "RETRIES": 3, "BACKOFF_SECONDS": 0.01}
    reset_client_caches()
    made = make_cluster(tmp_path, "kube-a")
    yield made
    made.fake.stop()
    reset_client_caches()
