"""The language: the browser's Accept-Language until a choice is made; the header's choice
kept with the person, so it follows them to another browser at sign-in; bad input refused, never a redirect
elsewhere."""

import re

import pytest
from django.conf import settings
from django.test import Client

from accounts.models import Preference

pytestmark = pytest.mark.django_db(transaction=True)


def page_language(response) -> str:
    return re.search(r'<html lang="([^"]+)"', response.content.decode()).group(1)


def test_accept_language_until_a_choice_then_the_choice_follows_the_person(users, client):
    assert page_language(client.get("/accounts/login/", HTTP_ACCEPT_LANGUAGE="zh-Hans")) == "zh-hans"
    assert page_language(client.get("/accounts/login/", HTTP_ACCEPT_LANGUAGE="en")) == "en"

    client.login(username="alice", password="demo")
    chosen = client.post("/account/language/", {"language": "zh-hans", "next": "/jobs/?mine=1"})
    assert chosen.status_code == 302 and chosen["Location"] == "/jobs/?mine=1"
    assert chosen.cookies[settings.LANGUAGE_COOKIE_NAME].value == "zh-hans"
    assert Preference.objects.get(user=users["alice"]).language == "zh-hans"
    assert page_language(client.get("/", HTTP_ACCEPT_LANGUAGE="en")) == "zh-hans"  # the choice beats the browser

    elsewhere = Client()  # another browser: no cookie, an English browser
    elsewhere.login(username="alice", password="demo")
    assert page_language(elsewhere.get("/", HTTP_ACCEPT_LANGUAGE="en")) == "zh-hans"
    other = Client()
    other.login(username="bob", password="demo")  # nobody else's pages change
    assert page_language(other.get("/", HTTP_ACCEPT_LANGUAGE="en")) == "en"


def test_a_bad_choice_is_refused_and_next_never_leaves_the_site(users, client):
    client.login(username="alice", password="demo")
    refused = client.post("/account/language/", {"language": "xx", "next": "/"})
    assert refused.status_code == 400 and "Unknown language 'xx'" in refused.content.decode()
    assert not Preference.objects.filter(user=users["alice"], language="xx").exists()
    outside = client.post("/account/language/", {"language": "en", "next": "https://evil.example/"})
    assert outside.status_code == 302 and outside["Location"] == "/"


def test_the_header_offers_each_language_in_its_own_name(users, client):
    html = client.get("/accounts/login/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert 'action="/account/language/"' in html
    assert '<option value="en" lang="en" selected>English</option>' in html
    assert '<option value="zh-hans" lang="zh-hans">简体中文</option>' in html
