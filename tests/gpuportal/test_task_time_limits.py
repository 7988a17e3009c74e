"""Every Celery task stops before the broker could hand its message to a second worker.

With late acks a message stays unacknowledged in Redis while its task runs, and Redis gives it to another
worker once it has been so for the visibility timeout: a task still running then would run twice at once. So
each task's hard time limit (after which its worker process is killed) is below that timeout, and the settings
refuse to start otherwise."""

import pytest
from django.conf import settings

from gpuportal.celery import app
from tests.gpuportal.test_settings import run

LIMITS = ("import django; django.setup(); from django.conf import settings as s; "
          "print(s.CELERY_BROKER_TRANSPORT_OPTIONS['visibility_timeout'], s.CELERY_TASK_TIME_LIMIT)")


def test_every_task_stops_before_its_message_could_be_handed_out_again():
    app.loader.import_default_modules()  # every app's tasks module, as a worker imports them
    visibility = app.conf.broker_transport_options["visibility_timeout"]
    tasks = {name: task for name, task in app.tasks.items() if not name.startswith("celery.")}
    assert "scheduling.tasks.watch_kubernetes" in tasks and "metering.tasks.rollup_recent" in tasks
    for name, task in tasks.items():
        soft = task.soft_time_limit or app.conf.task_soft_time_limit
        hard = task.time_limit or app.conf.task_time_limit
        assert soft and hard and 0 < soft < hard < visibility, (name, soft, hard, visibility)
    watch = tasks["scheduling.tasks.watch_kubernetes"]
    assert watch.soft_time_limit > settings.KUBERNETES["WATCH_SECONDS"]  # a whole watch fits in its limit
    assert visibility <= 120  # a killed worker's messages come back in minutes, not kombu's hour


@pytest.mark.parametrize("override", [
    {"GPUPORTAL_TASK_TIME_LIMIT": "100"},  # the default visibility timeout is 100 s
    {"GPUPORTAL_VISIBILITY_TIMEOUT": "60"},
    {"GPUPORTAL_K8S_WATCH_SECONDS": "90"},  # the watch's own limit follows it
])
def test_settings_refuse_a_time_limit_not_below_the_visibility_timeout(override):
    result = run(override)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and "visibility timeout" in result.stderr, result.stderr


def test_longer_limits_start_with_a_longer_visibility_timeout():
    result = run({"GPUPORTAL_VISIBILITY_TIMEOUT": "300", "GPUPORTAL_TASK_TIME_LIMIT": "240",
                  "GPUPORTAL_K8S_WATCH_SECONDS": "90"}, code=LIMITS)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["300.0", "240.0"]
