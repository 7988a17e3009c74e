"""Each person's time zone: chosen on the preferences page, kept across sign-ins, used by
every page; a bad name is refused naming the field."""

import zoneinfo

import pytest

from accounts.models import Preference
from scheduling.jobs import submission
from tests.conftest import job_payload

pytestmark = pytest.mark.django_db(transaction=True)


def test_times_follow_the_persons_zone(client, users):
    job = submission.submit_job(users["alice"], job_payload())
    client.login(username="alice", password="demo")
    assert " UTC" in client.get(f"/jobs/{job.pk}/").content.decode()  # the site's zone by default

    response = client.post("/account/preferences/", {"time_zone": "Asia/Shanghai"}, follow=True)
    assert "Times are now shown in Asia/Shanghai." in response.content.decode()
    assert Preference.objects.get(user=users["alice"]).time_zone == "Asia/Shanghai"
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    local = job.submitted_at.astimezone(zoneinfo.ZoneInfo("Asia/Shanghai"))
    assert local.strftime("%Y-%m-%d %H:%M:%S CST") in page

    client.logout()
    client.login(username="alice", password="demo")  # kept across sign-ins (carried in the session)
    assert local.strftime("%Y-%m-%d %H:%M:%S CST") in client.get(f"/jobs/{job.pk}/").content.decode()


def test_an_unknown_zone_is_refused_and_nothing_changes(client, users):
    client.login(username="alice", password="demo")
    response = client.post("/account/preferences/", {"time_zone": "Mars/Olympus"})
    assert response.status_code == 400
    assert "Mars/Olympus" in response.content.decode()  # Django's choice error names the value
    assert not Preference.objects.filter(user=users["alice"]).exists()
