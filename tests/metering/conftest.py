import pytest

from tests.factories import build_world


@pytest.fixture
def world(db, settings):
    """The demo's structure without jobs; days are counted in UTC here."""
    settings.TIME_ZONE = "UTC"
    return build_world()


@pytest.fixture
def users(world):
    return world["users"]
