"""``gpuportal submit --depends-on``: the job waits for the one it names, and ``why`` says for what."""

from __future__ import annotations

import pytest

from tests.cli.test_cli import SUBMIT

pytestmark = pytest.mark.django_db(transaction=True)


def test_submit_depends_on_and_why_names_what_it_waits_for(cli):
    cli.login("alice")
    parent = cli("submit", *SUBMIT, "--gpus-per-node", "1", "--command", "sim:outcome=succeeded sim:minutes=30",
                 "--json")
    assert parent.code == 0, parent.err
    child = cli("submit", *SUBMIT, "--gpus-per-node", "1", "--depends-on", f"afterok:{parent.json['id']}", "--json")
    assert child.code == 0, child.err
    assert child.json["depends_on"] == [{"job": parent.json["id"], "condition": "afterok", "satisfied": False}]
    why = cli("why", child.json["id"])
    assert why.code == 0, why.err
    assert f"Waits for #{parent.json['id']} to succeed" in why.out
    assert f"Waits for: #{parent.json['id']} afterok (not yet met)." in why.out
    refused = cli("submit", *SUBMIT, "--gpus-per-node", "1", "--depends-on", "afterok:999999")
    assert refused.code != 0 and "depends_on" in refused.err and "Unknown job #999999." in refused.err
