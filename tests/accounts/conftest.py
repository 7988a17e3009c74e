import pytest
from django.core.cache import cache

from tests.factories import make_user


@pytest.fixture
def alice(db):
    """One user with the tests' password; most token tests need nobody else (no whole world to build)."""
    return make_user("alice")


@pytest.fixture
def clean_cache():
    """Throttle counters live in the cache, which outlives a test's database."""
    cache.clear()
    yield
    cache.clear()
