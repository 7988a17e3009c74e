"""Sentences stored in the database read in the reader's language: the drift check of what the catalogue cannot see.

``test_catalogue`` finds every string of the code that lacks a translation; it cannot tell whether a sentence the
portal stores (a job's timeline, a node's history, an audit record's reason) was stored as a phrase the page can
render again, or as text frozen in the writer's language. So the demo's history is made here the way the demo
makes it — the seed's finished jobs with their failures and retries, today's jobs through a scheduling pass,
requests decided — plus the portal's own actions a person or a poll causes (hold, release, cancel with a note,
a node that stops answering, a new agent token), and every stored sentence is checked: it carries its phrase,
each message id of the phrase is in the Chinese catalogue and translated, and read in Chinese it leaves no
English word but the names and numbers it was given.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import polib
import pytest
from django.conf import settings as django_settings
from django.utils import timezone, translation

from accounts.models import Preference
from audit.models import AuditRecord
from demo.governance import seed_governance
from demo.world import seed_history, seed_live_jobs, seed_structure
from fleet.agents import tokens as agent_tokens
from fleet.agents.polling import PollResult, apply_results
from fleet.models import Node, NodeEvent
from governance import services as governance
from governance.models import Notification, PriorityRequest
from gpuportal.text import phrases
from scheduling.jobs.actions import cancel_job, set_hold
from scheduling.models import WAITING_STATUSES, Job, JobEvent
from tests.i18n.test_pages_zh import LATIN_WORDS, LITERAL, WORD, _world_words, _zone_words

pytestmark = pytest.mark.django_db(transaction=True)

#: Where the Chinese catalogue lies under a locale directory (the first of ``LOCALE_PATHS``: the repository's).
CATALOGUE = Path("zh_Hans") / "LC_MESSAGES" / "django.po"

#: Names from code that a Chinese sentence quotes as they are: ``ModuleNotFoundError``, ``OutOfMemoryError``.
IDENTIFIER = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z0-9]*)+\b")

#: Stored sentences that are no phrase yet, by a pattern of their English text: where they come from. The check
#: fails on any other, and on an entry here that the history no longer holds (so the list only shrinks).
KNOWN_PLAIN: dict[str, str] = {}


def _leaves(stored) -> list[str]:
    """The parameter values of a stored phrase (names, numbers, what a person typed), nested ones included."""
    if isinstance(stored, dict):
        values = [*(stored.get("params") or {}).values(), *stored.get("clauses", []), *stored.get("sentences", [])]
        return [leaf for value in values for leaf in _leaves(value)]
    return [str(stored)] if stored not in (None, "") else []


def _stored_sentences() -> list[tuple[str, str, dict | None]]:
    """(where, English text, stored phrase or None) of every sentence the portal stored."""
    typed = {text for pair in PriorityRequest.objects.values_list("comment", "justification") for text in pair}
    typed.add(CANCEL_REASON)
    found = []
    for event in JobEvent.objects.exclude(kind=JobEvent.Kind.WAIT_REASON).order_by("pk"):
        found.append((f"job #{event.job_id} event {event.pk} ({event.kind})", event.reason,
                      (event.data or {}).get(phrases.DATA_KEY)))
    for event in NodeEvent.objects.order_by("pk"):
        found.append((f"node {event.node_id} event {event.pk} ({event.kind})", event.reason,
                      (event.data or {}).get(phrases.DATA_KEY)))
    for record in AuditRecord.objects.exclude(reason="").order_by("seq"):
        if record.reason_phrase is None and record.reason in typed:
            continue  # an approver's comment or a requester's justification: shown as its writer typed it
        found.append((f"audit #{record.seq} ({record.action})", record.reason, record.reason_phrase))
    return found


def _history(users, pending_request: int) -> None:
    """The portal's own actions on top of the demo's seed, each storing a sentence of its own: the seed's pending
    request approved, a waiting job raised to a higher priority (which stops a running one of its tenant), a hold
    and its release, a cancel with a note, a node that stops answering, a new agent token."""
    Preference.objects.update_or_create(user=users["alice"], defaults={"language": "zh-hans"})
    governance.decide(users["carol"], PriorityRequest.objects.get(pk=pending_request), True)
    raised = Job.objects.get(command="python seg.py")
    governance.decide(users["carol"], governance.submit_request(users["alice"], {
        "kind": "priority", "job": raised.pk, "task_type": "training",
        "justification": "The segmentation baseline is due for the paper this week."}), True)
    waiting = Job.objects.filter(status__in=WAITING_STATUSES).exclude(pk=raised.pk).order_by("pk")
    held = waiting.first()
    set_hold(users[held.owner.username], held, True)
    set_hold(users[held.owner.username], Job.objects.get(pk=held.pk), False)
    victim = waiting.exclude(pk=held.pk).first()
    cancel_job(users["admin"], victim, CANCEL_REASON)
    node = Node.objects.order_by("name").first()
    for _poll in range(django_settings.AGENTS["MISSED_POLLS_UNHEALTHY"]):
        apply_results([PollResult(node.pk, error="timed out")], [Node.objects.get(pk=node.pk)])
    agent_tokens.issue(Node.objects.order_by("name").last(), actor=users["admin"])


#: What the admin types when cancelling a job: a person's words, quoted as typed in the owner's notification.
CANCEL_REASON = "maintenance window"


def test_every_stored_sentence_of_the_demo_reads_in_chinese(settings):
    settings.SIMULATION_TIME_SCALE = 4e-5
    users = seed_structure()["users"]
    seed_history(users, timezone.now() - timedelta(days=2))
    seed_live_jobs(users)
    _history(users, seed_governance(users)["pending_request"])
    sentences = _stored_sentences()
    assert len(sentences) > 100 and {where.split(" ")[0] for where, _text, _stored in sentences} >= {
        "job", "node", "audit"}
    written = {msgid for _where, _text, stored in sentences if stored
               for msgid in phrases.msgids({phrases.DATA_KEY: stored})}
    assert {"Attempt %(a)d failed: %(msg)s Retrying (%(n)d of %(max)d)%(away)s%(resume)s.",  # a node fault, retried
            "Priority raised to %(t)s (%(p)d) by %(u)s's approval of request #%(r)d.", "Production training",
            "Max runtime extended from %(a)d to %(b)d minutes by %(u)s (request #%(r)d).",
            "Requeued after preemption (retry %(n)d).", "Held by %(user)s.", "Missed a poll: %(error)s"} <= written

    plain, seen_known = [], set()
    for where, text, stored in sentences:
        if stored is None:
            known = [pattern for pattern in KNOWN_PLAIN if re.search(pattern, text)]
            seen_known.update(known)
            if not known:
                plain.append(f"{where}: {text}")
    assert not plain, f"{len(plain)} sentence(s) stored as text, not as a phrase:\n" + "\n".join(sorted(
        set(plain))[:40])
    assert set(KNOWN_PLAIN) <= seen_known, f"no longer stored: remove from KNOWN_PLAIN: {set(KNOWN_PLAIN) - seen_known}"

    catalogue = {entry.msgid: entry for entry in polib.pofile(str(Path(settings.LOCALE_PATHS[0]) / CATALOGUE))}
    wanted = {msgid for _where, _text, stored in sentences if stored
              for msgid in phrases.msgids({phrases.DATA_KEY: stored})}
    missing = sorted(msgid for msgid in wanted if msgid not in catalogue or not catalogue[msgid].msgstr
                     or catalogue[msgid].fuzzy)
    assert not missing, f"{len(missing)} stored message id(s) without a Chinese translation:\n" + "\n".join(missing)

    allowed = LATIN_WORDS | _world_words() | _zone_words()
    english = {}
    with translation.override("zh-hans"):
        for where, text, stored in sentences:
            if stored is None:
                continue
            chinese = phrases.read(text, {phrases.DATA_KEY: stored})
            assert chinese != text or not WORD.search(text), f"{where} reads in English: {text}"
            rest = chinese
            for leaf in sorted(_leaves(stored), key=len, reverse=True):
                rest = rest.replace(leaf, " ")
            words = [w for w in WORD.findall(LITERAL.sub(" ", IDENTIFIER.sub(" ", rest))) if w.lower() not in allowed]
            if words:
                english[chinese] = where
    assert not english, f"{len(english)} stored sentence(s) keep English in Chinese:\n" + "\n".join(
        f"{where}: {text}" for text, where in sorted(english.items())[:40])

    # a notification is written in its recipient's language: alice reads Chinese
    typed = {text for pair in PriorityRequest.objects.values_list("comment", "justification") for text in pair}
    typed.add(CANCEL_REASON)
    notes = list(Notification.objects.filter(user=users["alice"]))
    assert notes, "alice was told of her decided requests and her jobs"
    for note in notes:
        for text in (note.title, note.body):
            for words_typed in typed:  # what people typed is quoted as typed
                text = text.replace(words_typed, " ") if words_typed else text
            words = [w for w in WORD.findall(LITERAL.sub(" ", IDENTIFIER.sub(" ", text))) if w.lower() not in allowed]
            assert not words, f"alice's notification keeps English: {text}"
