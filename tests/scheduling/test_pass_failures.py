"""A scheduling pass that raises is counted, so that the alerting rule GpuPortalSchedulingPassesFailing sees it."""

from unittest import mock

import pytest

from gpuportal.models import OperationalCounter
from metering.metrics import samples
from scheduling.tasks import run_scheduling_pass

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_failing_pass_is_counted_and_exported(world):
    exported = {name: value for name, _labels, value in samples()}
    assert exported["gpuportal_scheduling_pass_failures_total"] == 0  # a series before the first failure
    with mock.patch("scheduling.tasks.run_pass", side_effect=RuntimeError("boom")), \
            pytest.raises(RuntimeError, match="boom"):
        run_scheduling_pass()
    assert OperationalCounter.objects.get(name="gpuportal_scheduling_pass_failures_total").value == 1
    exported = {name: value for name, _labels, value in samples()}
    assert exported["gpuportal_scheduling_pass_failures_total"] == 1
    run_scheduling_pass()  # a pass that works is not counted as failed
    assert OperationalCounter.objects.get(name="gpuportal_scheduling_pass_failures_total").value == 1
