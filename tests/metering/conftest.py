import pytest

from tests.conftest import fresh_world
from tests.factories import build_world


@pytest.fixture
def world(module_world, db, settings):
    """The demo's structure without jobs; days are counted in UTC here. Built once for the module where every
    database test of it uses the lab and none commits (``module_world``), else for each test."""
    settings.TIME_ZONE = "UTC"
    return build_world() if module_world is None else fresh_world(module_world)


@pytest.fixture
def users(world):
    return world["users"]
