"""A stored failure diagnosis as a reader sees it: the sentences in their language, the evidence in words.

The diagnosis (``kubernetes/diagnosis.py``) is written once, by a worker, and read later by anyone: its cause
and next step are stored as English text beside their message ids and parameters (``phrases``), and read here
in the reader's language. A sentence someone replaced after the diagnosis (a job failed for good by the
pass, a next step rewritten once retries ran out) no longer matches its stored phrase: it is shown as stored
rather than as a phrase that says something else. The evidence keeps Kubernetes' and the agents' facts as they
came (the API returns them so); the page says them in sentences, never as a dictionary.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.html import conditional_escape, format_html
from django.utils.safestring import mark_safe
from django.utils.translation import gettext, gettext_noop, override

from fleet import vendors
from gpuportal.text import phrases
from gpuportal.text.phrases import Phrase
from scheduling.models import FailureCategory

#: What a pod's (or container's) reason means, in words; an unknown reason is named as it came.
POD_REASONS = {
    "Error": gettext_noop("its container exited with an error"),
    "OOMKilled": gettext_noop("its container was killed for using more memory than it may (OOMKilled)"),
    "Evicted": gettext_noop("the node evicted it (short of memory or disk)"),
    "NodeLost": gettext_noop("its node stopped answering"),
    "NotReady": gettext_noop("its node was not ready"),
    "Preempting": gettext_noop("Kubernetes preempted it for a pod of higher priority"),
    "Unknown": gettext_noop("its state is unknown (its node stopped reporting)"),
    "ContainerCannotRun": gettext_noop("its container could not run its command"),
    "DeadlineExceeded": gettext_noop("it ran past its deadline"),
    "ErrImagePull": gettext_noop("its image could not be pulled"),
    "ImagePullBackOff": gettext_noop("its image could not be pulled (Kubernetes keeps trying)"),
    "InvalidImageName": gettext_noop("its image name is not valid"),
    "ErrImageNeverPull": gettext_noop("its image is not on the node and may not be pulled"),
    "CreateContainerConfigError": gettext_noop("its container's settings are wrong (a missing secret or "
                                               "config map)"),
    "CreateContainerError": gettext_noop("its container could not be created"),
}
#: Why Kubernetes marked a Job failed, in words.
JOB_REASONS = {
    "DeadlineExceeded": gettext_noop("it ran longer than its max runtime"),
    "BackoffLimitExceeded": gettext_noop("its pod failed and no retry was left"),
    "PodFailurePolicy": gettext_noop("a pod failed in a way its failure policy ends the job for"),
}


@dataclass(frozen=True)
class FailureView:
    """What the job page shows of a failure: the cause and the next step (in the reader's language), the node,
    the decisive log line, the other evidence as sentences, and the log tail that was kept."""

    message: str
    advice: str = ""
    node: str = ""
    log_line: str = ""
    facts: tuple[str, ...] = ()
    log_tail: tuple[str, ...] = ()


def category_phrase(category: str) -> Phrase:
    """A failure category's label as a phrase (inside a stored sentence: read in the reader's language)."""
    try:
        label = FailureCategory(category).label
    except ValueError:
        return Phrase(category or "")
    with override(None):  # no catalogue: the label's message id
        return Phrase(str(label))


def read_text(text: str, stored: dict | None) -> str:
    """``text`` in the reader's language when ``stored`` (a phrase's ``{"msgid", "params"}``) is still the
    phrase of it; as stored otherwise."""
    if not isinstance(stored, dict):
        return text or ""
    try:
        if _english(stored) != text:
            return text or ""
    except (KeyError, TypeError, ValueError):
        return text or ""
    return phrases.read(text, {phrases.DATA_KEY: stored})


def _english(stored: dict) -> str:
    params = {name: _english(value) if isinstance(value, dict) and "msgid" in value else value
              for name, value in (stored.get("params") or {}).items()}
    return stored["msgid"] % params if params else stored["msgid"]


def read_diagnosis(diagnosis: dict | None, message: str = "") -> FailureView:
    """A stored diagnosis (``Diagnosis.as_dict()``) for the reader; ``message`` is the job's failure message
    (the job's own field wins over the diagnosis' where the two differ)."""
    diagnosis = diagnosis or {}
    stored = diagnosis.get("phrases") or {}
    evidence = diagnosis.get("evidence") or {}
    tail = evidence.get("log_tail") or evidence.get("log") or ()
    return FailureView(
        message=read_text(message or diagnosis.get("message", ""), stored.get("message")),
        advice=read_text(diagnosis.get("advice", ""), stored.get("advice")),
        node=diagnosis.get("node") or "", log_line=evidence.get("log_line") or "",
        facts=tuple(evidence_facts(evidence)), log_tail=tuple(str(line) for line in tail))


def failure_of(job) -> FailureView | None:
    """The failure of ``job`` as its page shows it, or None when it did not fail."""
    if not (job.failure_category or job.failure_message):
        return None
    return read_diagnosis((job.executor_state or {}).get("diagnosis"), job.failure_message)


def _with_name(sentence: str, pod: str, **values) -> str:
    """``sentence`` with the pod's name as code: a name Kubernetes made up ("job-6-0") is no word of the page's
    language, so a reader (and the Chinese pages' check) sees it set apart."""
    return mark_safe(conditional_escape(sentence) % {  # noqa: S308 - every part escaped here
        "pod": format_html("<code>{}</code>", pod), **{k: conditional_escape(v) for k, v in values.items()}})


def evidence_facts(evidence: dict) -> list[str]:
    """The evidence as sentences in the reader's language: the pod and what Kubernetes said of it, the Job's
    condition, the node agent's report, the ranks of a gang, the devices; the log line and tail are shown
    apart. A key no sentence knows is shown as ``key: value``; empty values say nothing."""
    facts, seen = [], {"log_line", "log_tail", "log", "signature", "library"}
    pod, reason = evidence.get("pod"), evidence.get("reason")
    if pod:
        what = gettext(POD_REASONS[reason]) if reason in POD_REASONS else (
            gettext("it ended with reason %(reason)s") % {"reason": reason} if reason else "")
        facts.append(_with_name(gettext("Pod %(pod)s: %(what)s.") if what else gettext("It ran in pod %(pod)s."),
                                pod, what=what))
    if evidence.get("message"):
        facts.append(gettext("Kubernetes said: %(message)s") % {"message": evidence["message"]})
    if evidence.get("node_not_ready"):
        facts.append(gettext("Its node was not ready when it failed."))
    condition = evidence.get("condition") or {}
    if condition:
        why = condition.get("reason", "")
        facts.append(gettext("The Kubernetes Job failed: %(why)s (%(message)s).") % {
            "why": gettext(JOB_REASONS[why]) if why in JOB_REASONS else why, "message": condition.get("message", "")})
    agent = evidence.get("agent") or {}
    if agent:
        facts.append(gettext("The node agent on %(node)s reported: %(message)s") % {
            "node": agent.get("node", ""), "message": agent.get("message", "")})
        if agent.get("evidence"):
            facts.append(gettext("The agent's reading: %(reading)s") % {"reading": agent["evidence"]})
    if "failed_rank" in evidence:
        facts.append(gettext("Rank %(rank)s failed first; %(n)d other rank(s) were still waiting for it.") % {
            "rank": evidence["failed_rank"], "n": len(evidence.get("hanging_ranks") or ())})
    if evidence.get("vendor") in vendors.VENDORS:
        facts.append(gettext("Devices: %(device)s.") % {"device": vendors.VENDORS[evidence["vendor"]].device})
    if evidence.get("error"):
        facts.append(gettext("The cluster answered: %(error)s") % {"error": evidence["error"]})
    seen |= {"pod", "reason", "message", "node_not_ready", "condition", "agent", "failed_rank", "hanging_ranks",
             "vendor", "error"}
    facts += [f"{key}: {value}" for key, value in evidence.items()
              if key not in seen and value not in (None, "", {}, [])]
    return facts
