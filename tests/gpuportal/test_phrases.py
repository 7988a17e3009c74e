"""Stored sentences read in the reader's language (gpuportal.text.phrases): the English text is what is stored,
the message id and parameters let a page render it again in Chinese."""

from django.utils import translation
from django.utils.translation import gettext_noop

from gpuportal.text.phrases import Phrase, data_of, read


def test_a_phrase_is_its_english_text_and_reads_in_the_readers_language():
    held = Phrase(gettext_noop("Held by %(user)s."), {"user": "alice"})
    assert held == "Held by alice." and isinstance(held, str)
    data = data_of(held)
    assert data == {"phrase": {"msgid": "Held by %(user)s.", "params": {"user": "alice"}}}
    with translation.override("zh-hans"):
        chinese = read(str(held), data)
    assert "alice" in chinese and chinese != "Held by alice."
    with translation.override("en"):
        assert read(str(held), data) == "Held by alice."


def test_plain_text_and_broken_phrases_read_as_stored():
    assert data_of("Cancelled by the owner.") == {}
    assert read("Cancelled by the owner.", {}) == "Cancelled by the owner."
    broken = {"phrase": {"msgid": "Held by %(user)s.", "params": {}}}  # a parameter gone: the stored text
    with translation.override("zh-hans"):
        assert read("Held by alice.", broken) == "Held by alice."
        assert read("Held by alice.", {"phrase": "nonsense"}) == "Held by alice."
