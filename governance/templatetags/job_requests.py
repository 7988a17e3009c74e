"""The requests a job's page lists: the job's own, and the admission request it shares with the jobs submitted
with it. The job pages are the scheduling app's, which sits below governance and cannot ask it; the template asks
here (``{% requests_about job as requests %}``)."""

from django import template

from governance.queries import requests_about

register = template.Library()
register.simple_tag(requests_about)
