"""The job list's filter fields are kept by what they show: read back they are the fields drawn afresh by the
widgets (the template's markup before they were kept), errors included, and a new task type shows at once."""

import pytest
from django.core.cache import cache
from django.http import QueryDict
from django.template import Context, Template
from django.test import RequestFactory

from scheduling.jobs.filtersets import JobFilterSet
from scheduling.models import Job
from scheduling.templatetags.job_tables import job_filters
from tests.factories import make_task_type, make_user

pytestmark = pytest.mark.django_db

AS_THE_TEMPLATE_DREW_THEM = Template(
    '{% for field in form %}\n    {% if field.use_fieldset %}<fieldset class="filter filter-{{ field.name }}"><legend>'
    '{{ field.label }}</legend>{{ field }}{% for e in field.errors %}<span class="error">{{ e }}</span>{% endfor %}'
    '</fieldset>{% else %}<div class="filter">{{ field.label_tag }} {{ field }}{% for e in field.errors %}'
    '<span class="error">{{ e }}</span>{% endfor %}</div>{% endif %}\n  {% endfor %}')


@pytest.fixture
def form():
    """The job list's filter form for a query string, as its view builds it."""
    cache.clear()
    make_task_type("research", 50)
    request = RequestFactory().get("/jobs/")
    request.user = make_user("filterer")
    return lambda query: JobFilterSet(QueryDict(query) if query else None, queryset=Job.objects.all(),
                                      request=request).form


@pytest.mark.parametrize("query", ["", "status=queued&status=running&mine=on&q=%3Cb%3E",
                                   "task_type=no-such-type&page=2", "columns=elapsed,node&sort=-elapsed",
                                   "columns=nope&sort=sideways"])
def test_kept_fields_are_the_fields_drawn(form, query, django_assert_num_queries):
    expected = AS_THE_TEMPLATE_DREW_THEM.render(Context({"form": form(query)}))
    assert job_filters(form(query)) == expected
    with django_assert_num_queries(1):  # read back: only the task types offered
        assert job_filters(form(query)) == expected
    if "no-such-type" in query or "nope" in query:
        assert 'class="error"' in expected
    if "nope" in query:  # a refused column and order are named, with what may be given
        assert "Unknown column nope" in expected and "Unknown order sideways" in expected and "exit_code" in expected
    if "elapsed" in query:  # the chosen columns ticked, the order chosen
        assert 'value="elapsed" id="id_columns_11" checked' in expected.replace("\n", " ")
        assert '<option value="-elapsed" selected>' in expected


def test_a_new_task_type_is_offered_at_once(form):
    job_filters(form(""))
    make_task_type("inference", 40)
    assert 'value="inference"' in job_filters(form(""))
