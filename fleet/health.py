"""The health state machine for nodes and GPUs: pure functions, no database.

* healthy -> suspect: one missed poll, or a soft error (single-bit ECC errors, pending row remapping);
* -> unhealthy: K missed polls in a row, a critical XID, a double-bit ECC error, a GPU that stopped answering;
* suspect / unhealthy -> healthy: M good polls in a row.
Cordoned and draining are admin states kept apart from health (see ``Node.admin_state``).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext_noop

from gpuportal.text.phrases import Phrase

HEALTHY, SUSPECT, UNHEALTHY = "healthy", "suspect", "unhealthy"


@dataclass(frozen=True)
class Observation:
    """What one poll said: did it answer, and what was wrong (a critical or a soft finding, in words)."""

    answered: bool = True
    critical: str = ""
    soft: str = ""
    error: str = ""


@dataclass(frozen=True)
class Step:
    state: str
    missed: int
    good: int
    reason: str = ""  # set when the state changed (a stored phrase: ``gpuportal.text.phrases``)

    @property
    def changed(self) -> bool:
        return bool(self.reason)


def step(state: str, missed: int, good: int, obs: Observation, k_missed: int, m_good: int) -> Step:
    if not obs.answered:
        missed += 1
        if missed >= k_missed and state != UNHEALTHY:
            return Step(UNHEALTHY, missed, 0, Phrase(gettext_noop(
                "%(n)d polls in a row missed (limit %(k)d): %(error)s"), {
                "n": missed, "k": k_missed, "error": obs.error}))
        if state == HEALTHY:
            return Step(SUSPECT, missed, 0, Phrase(gettext_noop("Missed a poll: %(error)s"), {"error": obs.error}))
        return Step(state, missed, 0)
    if obs.critical:
        if state != UNHEALTHY:
            return Step(UNHEALTHY, 0, 0, obs.critical)
        return Step(state, 0, 0)
    if obs.soft:
        if state == HEALTHY:
            return Step(SUSPECT, 0, 0, obs.soft)
        return Step(state, 0, 0)
    good = min(good + 1, m_good)  # capped: a steady healthy node writes nothing new
    if state != HEALTHY and good >= m_good:
        return Step(HEALTHY, 0, good, Phrase(gettext_noop("%(n)d good polls in a row (needed %(m)d)."), {
            "n": good, "m": m_good}))
    return Step(state, 0, good)
