import pytest

from scheduling.demo import seed_structure


@pytest.fixture
def world(db, settings):
    """The demo's structure without jobs; days are counted in UTC here."""
    settings.TIME_ZONE = "UTC"
    return seed_structure()


@pytest.fixture
def users(world):
    return world["users"]
