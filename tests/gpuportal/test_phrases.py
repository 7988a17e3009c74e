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


def test_nested_phrases_clauses_and_labels_read_in_one_language():
    import copy
    import pickle

    from gpuportal.text.phrases import Clauses, duration, label, msgids
    from scheduling.models import JobStatus

    attempt = Phrase(gettext_noop("attempt %(n)d on %(node)s: %(message)s"), {
        "n": 1, "node": "n1", "message": Phrase(gettext_noop("Reached its max runtime."))})
    history = Clauses([attempt, Phrase(gettext_noop("Missed a poll: %(error)s"), {"error": "bob"})])
    outer = Phrase(gettext_noop("Released %(n)d GPU(s) still allocated to this job (%(status)s): %(gpus)s."), {
        "n": 2, "status": label(JobStatus.CANCELLED.label), "gpus": history})
    assert outer == ("Released 2 GPU(s) still allocated to this job (Cancelled): attempt 1 on n1: Reached its max "
                     "runtime.; Missed a poll: bob.")
    data = data_of(outer)
    assert set(msgids(data)) == {outer.msgid, "Cancelled", attempt.msgid, "Reached its max runtime.",
                                 "Missed a poll: %(error)s"}
    with translation.override("zh-hans"):
        chinese = read(str(outer), data)
    assert "已取消" in chinese and "；" in chinese and "bob" in chinese and "Reached" not in chinese
    for copied in (copy.deepcopy(outer), pickle.loads(pickle.dumps(outer))):
        assert copied == outer and data_of(copied) == data
    sentences = Clauses(["GPU 1 lost.", Phrase(gettext_noop("no answer"))], sentences=True)
    assert sentences == "GPU 1 lost. no answer" and data_of(sentences)["phrase"]["sentences"][0] == "GPU 1 lost."
    took = duration(7620)
    assert took == "2 h 7 min"
    with translation.override("zh-hans"):
        assert read(str(took), data_of(took)) == "2 小时 7 分钟"
