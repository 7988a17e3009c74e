"""What the workload tests share: where the workload origin answers, and stand-ins that start at once."""

import pytest

from scheduling.executors.simulated import serving as simulated_serving

#: Where notebooks and services answer, never on the portal's origin (the embedded default,
#: GPUPORTAL_WORKLOAD_ORIGIN=http://127.0.0.1:8001).
WORKLOAD_HOST = "127.0.0.1:8001"


@pytest.fixture
def serving(settings, tmp_path):
    """Stand-ins live under this test's directory, start at once, and are all stopped afterwards."""
    settings.SIMULATION_STANDIN_DIR = tmp_path / "standins"
    settings.SIMULATION_TIME_SCALE = 1e-6
    settings.WORKLOADS = {**settings.WORKLOADS, "ORIGIN": f"http://{WORKLOAD_HOST}"}
    yield
    simulated_serving.stop_all()
