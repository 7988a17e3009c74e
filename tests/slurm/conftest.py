"""One real Slurm cluster for the whole test run (starting it is most of these tests' time), and a clean slate
of jobs after each test. A machine without Slurm's daemons fails here, loudly: ``scripts/ensure-build-deps.sh
--test-servers`` installs them, and ``make test`` runs it."""

import pytest

from tests.slurm.servers import SlurmCluster, missing_binaries
from tests.slurm.world import slurm_lab


@pytest.fixture(scope="session")
def slurm():
    missing = missing_binaries()
    if missing:
        pytest.fail(f"Slurm's daemons are not installed ({', '.join(missing)}): run "
                    "scripts/ensure-build-deps.sh --test-servers")
    cluster = SlurmCluster().start()
    yield cluster
    cluster.stop()


@pytest.fixture
def slurm_clean(slurm):
    """The cluster, with every job cancelled and every node resumed and idle after the test (so the next one finds
    every GPU free, whatever this one drained)."""
    yield slurm
    slurm.reset()


@pytest.fixture
def lab(world, slurm_clean):
    """The portal's world on the Slurm cluster (``world.slurm_lab``), every job cancelled after the test."""
    return slurm_lab(world, slurm_clean)
