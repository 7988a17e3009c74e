"""A refused form says everything at once and where: a summary at the top linking to each field, every
field's refusal in the same answer (a model without quota too), the portal's own addresses in a message as
links, and every ``aria-describedby`` naming an id the page has. The submit form opens on a model the user
can use now, with no template chosen."""

import re
from html.parser import HTMLParser

import pytest

from scheduling.jobs import submission
from scheduling.models import Job
from scheduling.templates import services as job_templates


class _Ids(HTMLParser):
    """Every id on a page, and every id an ``aria-describedby`` names."""

    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()
        self.described: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        for ref in (attrs.get("aria-describedby") or "").split():
            self.described.append((attrs.get("name") or tag, ref))


def dangling_references(html: str) -> list[tuple[str, str]]:
    page = _Ids()
    page.feed(html)
    return [(name, ref) for name, ref in page.described if ref not in page.ids]


def signed_in(client, username):
    assert client.login(username=username, password="demo")
    return client


REFUSED = {"project": "speech/asr", "task_type": "research", "gpu_model": "H100", "gpus_per_node": "12",
           "nodes": "1", "image": "", "command": "python a.py"}


def test_every_refusal_comes_out_at_once_with_a_summary_linking_to_the_fields(client, users):
    erin = signed_in(client, "erin")  # tenant speech: no H100 quota
    response = erin.post("/jobs/new/", REFUSED)
    html = response.content.decode()
    assert response.status_code == 400 and Job.objects.count() == 0
    # the no-quota refusal comes with the size's and the image's, not one round later
    assert 'id="error-gpu_model"' in html and "no quota for H100" in html
    assert 'id="error-gpus_per_node"' in html and 'id="error-image"' in html
    summary = html[html.index('id="error-summary"'):html.index("</div>", html.index('id="error-summary"'))]
    main = html[html.index("<main>"):]
    assert main.index('id="error-summary"') < main.index("<form")  # above every form of the page
    for field in ("gpu_model", "gpus_per_node", "image"):
        assert f'href="#id_{field}"' in summary
    # the way to ask for quota is a link, in the summary and beside the field
    link = re.search(r'<a href="(/requests/new/\?kind=quota&amp;tenant=speech&amp;gpu_model=H100)">', html)
    assert link and html.count(link.group(0)) == 2
    assert dangling_references(html) == []
    assert 'src="/static/js/form_errors.js"' in html


def test_the_service_refuses_a_model_without_quota_even_when_the_size_is_wrong(users):
    with pytest.raises(Exception) as refused:
        submission.validate_job_request(users["erin"], {**REFUSED, "image": "registry.local/x:1"})
    assert {"gpu_model", "gpus_per_node"} <= set(refused.value.message_dict)


def test_a_message_with_an_address_is_escaped_around_its_link():
    from gpuportal.templatetags.form_fields import linked

    html = linked('Bad <b>"x"</b>. Ask for quota: /requests/new/?kind=quota&tenant=a&gpu_model=H100.')
    assert html == ('Bad &lt;b&gt;&quot;x&quot;&lt;/b&gt;. Ask for quota: <a href="/requests/new/?kind=quota&amp;'
                    'tenant=a&amp;gpu_model=H100">/requests/new/?kind=quota&amp;tenant=a&amp;gpu_model=H100</a>.')
    assert linked("a/b and //evil.example/x and https://x.example/") == (
        "a/b and //evil.example/x and https://x.example/")  # only the portal's own addresses
    assert linked("申请配额：/requests/new/?kind=quota。") == (
        '申请配额：<a href="/requests/new/?kind=quota">/requests/new/?kind=quota</a>。')  # after Chinese punctuation
    # what a user typed is no page of the portal: it stays text, and a backslash never makes a link to elsewhere
    assert linked("Image: /data/x.sif or /\\evil.example/") == "Image: /data/x.sif or /\\evil.example/"


@pytest.mark.parametrize(("username", "url", "post"), [
    ("alice", "/jobs/new/", None),
    ("alice", "/jobs/new/", REFUSED | {"project": "vision/detection", "gpu_model": "A100"}),
    ("alice", "/requests/new/?kind=quota", None),
    ("alice", "/requests/new/?kind=quota", {"kind": "quota", "justification": "x"}),
    ("alice", "/account/tokens/", None),
    ("frank", "/templates/new/", None),
    ("frank", "/templates/new/", {"name": "", "kind": "batch", "parameters": "[", "defaults": "{"}),
])
def test_every_described_by_names_an_id_on_the_page(client, users, username, url, post):
    user = signed_in(client, username)
    response = user.post(url, post) if post is not None else user.get(url)
    assert response.status_code in (200, 400), (url, response.status_code)
    html = response.content.decode()
    assert "aria-describedby" in html
    assert dangling_references(html) == []
    if post is not None:
        assert 'id="error-summary"' in html


def test_the_submit_form_opens_on_a_model_with_quota_left_and_no_template(client, users):
    job_templates.create_template(users["admin"], tenant=None, name="h100-train", kind="batch",
                                  defaults={"gpu_model": "H100"})
    erin = signed_in(client, "erin")  # speech: A100 limit 8, L40S limit 16, no H100
    first = erin.get("/jobs/new/").content.decode()
    assert re.search(r'<option value="A100" selected>', first)
    assert 'id="id_template"' in first and re.search(r'<option value="" selected>', first)  # none chosen
    full = erin.post("/jobs/new/", {"project": "speech/asr", "task_type": "research", "gpu_model": "A100",
                                    "gpus_per_node": "8", "nodes": "1", "image": "registry.local/x:1"})
    assert full.status_code == 302
    assert Job.objects.get().allocations.filter(released_at__isnull=True).count() == 8  # A100 used up
    assert re.search(r'<option value="L40S" selected>', erin.get("/jobs/new/").content.decode())
