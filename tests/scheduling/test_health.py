"""The health state machine, step by step."""

from fleet.health import HEALTHY, SUSPECT, UNHEALTHY, Observation, step

MISS = Observation(answered=False, error="timed out")
GOOD = Observation()


def run(observations, state=HEALTHY, k=3, m=3):
    missed = good = 0
    states = []
    for obs in observations:
        result = step(state, missed, good, obs, k, m)
        state, missed, good = result.state, result.missed, result.good
        states.append(state)
    return states


def test_missed_polls_go_suspect_then_unhealthy_after_k():
    assert run([MISS, MISS, MISS]) == [SUSPECT, SUSPECT, UNHEALTHY]
    assert run([MISS, GOOD, MISS, MISS]) == [SUSPECT, SUSPECT, SUSPECT, SUSPECT]  # the count restarts


def test_recovers_only_after_m_good_polls():
    assert run([MISS, MISS, MISS, GOOD, GOOD, GOOD]) == [SUSPECT, SUSPECT, UNHEALTHY, UNHEALTHY, UNHEALTHY, HEALTHY]
    assert run([GOOD, GOOD], state=SUSPECT) == [SUSPECT, SUSPECT]


def test_critical_is_unhealthy_at_once_and_soft_is_suspect():
    critical = step(HEALTHY, 0, 5, Observation(critical="XID 79"), 3, 3)
    assert (critical.state, critical.reason) == (UNHEALTHY, "XID 79")
    soft = step(HEALTHY, 0, 5, Observation(soft="SBE rose"), 3, 3)
    assert (soft.state, soft.reason, soft.good) == (SUSPECT, "SBE rose", 0)
    assert not step(UNHEALTHY, 0, 0, Observation(soft="SBE rose"), 3, 3).changed


def test_reasons_name_the_numbers():
    result = None
    state, missed, good = HEALTHY, 0, 0
    for _ in range(3):
        result = step(state, missed, good, MISS, 3, 3)
        state, missed, good = result.state, result.missed, result.good
    assert result.reason == "3 polls in a row missed (limit 3): timed out"
    back = step(UNHEALTHY, 0, 2, GOOD, 3, 3)
    assert back.reason == "3 good polls in a row (needed 3)."
