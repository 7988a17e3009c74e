"""The published OpenAPI schema as a contract, checked by Schemathesis.

Schemathesis's own engine (what ``st run`` drives) runs in-process against the portal's WSGI application, on
every operation of ``/api/schema/``, with every check: no server error; responses, status codes, content types
and headers as documented; schema-violating requests refused and schema-valid ones accepted; a deleted
resource gone; authentication not ignored; undocumented methods refused. It signs in through
``POST /api/auth/token/`` as a researcher, an approver, a manager and a platform admin in turn, each run a
bounded number of examples an operation, deterministically. Each role runs the schema's examples, random
positive and negative data and stateful sequences that follow the schema's links (create a job, read it, hold
or cancel it; ask for something, approve or deny it); the platform admin, whom no role check stops before
the validation, also runs the coverage phase (every field's limits and types, one by one).

One difference from Schemathesis's defaults, and why: a schema-valid request may be answered 422. The schema
cannot say which names exist or how many GPUs the fleet's nodes have, so the portal answers 400 for what the
schema refuses and 422, naming the field, for what its rules refuse (gpuportal/web/api.py).
"""

import collections

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from schemathesis.config._checks import POSITIVE_DATA_ACCEPTANCE_EXPECTED_STATUSES
from schemathesis.engine import events, from_schema
from schemathesis.transport.wsgi import WSGITransport

from tests.factories import PASSWORD

#: role -> (the user of tests/factories.py's world who has it, whether the coverage phase runs too, examples an
#: operation in the fuzzing phase). The approver (a researcher too) and the manager (read-only) fuzz fewer: their
#: random data reaches the validation the researcher's and the platform admin's already fuzz, or stops at the
#: same role check for every example; their examples, links and stateful sequences are the others' in number.
ROLES = {"researcher": ("alice", False, 5), "approver": ("carol", False, 2), "manager": ("dave", False, 2),
         "platform admin": ("admin", True, 5)}
MAX_EXAMPLES = 5
SEED = 13


def contract_config(username: str, coverage: bool, fuzzing_examples: int = MAX_EXAMPLES) -> schemathesis.Config:
    return schemathesis.Config.from_dict({
        "seed": SEED,
        "auth": {"dynamic": {"openapi": {"tokenAuth": {
            "path": "/api/auth/token/", "extract_selector": "/token", "retry_on": [401],
            "payload": {"username": username, "password": PASSWORD, "name": "contract tests"}}}}},
        "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True, "database": "none"},
        "phases": {"coverage": {"enabled": coverage}, "stateful": {"max-steps": 8},
                   "fuzzing": {"generation": {"max-examples": fuzzing_examples}}},
        "checks": {"positive_data_acceptance": {"expected-statuses": [
            *POSITIVE_DATA_ACCEPTANCE_EXPECTED_STATUSES, "422"]}},
        "cache": {"enabled": False},
        "warnings": False,
    })


@pytest.fixture
def wsgi_transport(monkeypatch):
    """Schemathesis 4.32's WSGI transport hands ``max_redirects``, ``verify``, ``cert`` and ``proxies`` on to
    Werkzeug when a check sends its own probe (``ignored_auth``), which Werkzeug refuses; in-process they mean
    nothing, so they are dropped there."""
    send = WSGITransport.send

    def send_without_socket_options(self, case, *, session=None, **kwargs):
        if session is None:
            for name in ("max_redirects", "verify", "cert", "proxies"):
                kwargs.pop(name, None)
        return send(self, case, session=session, **kwargs)

    monkeypatch.setattr(WSGITransport, "send", send_without_socket_options)


def run_schemathesis(username: str, coverage: bool, fuzzing_examples: int = MAX_EXAMPLES
                     ) -> tuple[list, collections.Counter]:
    """Every phase of Schemathesis against the in-process portal; the failures and what ran."""
    config = contract_config(username, coverage, fuzzing_examples)
    schema = schemathesis.openapi.from_wsgi("/api/schema/", WSGIHandler(), config=config)
    failures, ran = [], collections.Counter()
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            ran[event.phase.value] += len(event.recorder.interactions)
            if event.recorder.label != "Stateful tests":
                ran[f"operation {event.recorder.label}"] = 1
            failures += [(event.recorder.label, check.name, check.failure_info)
                         for checks in event.recorder.checks.values() for check in checks if check.failure_info]
        elif isinstance(event, events.PhaseStarted) and isinstance(event.payload, events.StatefulPhasePayload):
            ran["links"] = event.payload.transitions_selected
        elif isinstance(event, events.NonFatalError | events.FatalError):
            failures.append(("engine", "error", event))
    return failures, ran


def describe(failures) -> str:
    """One paragraph per distinct failure: the operation, the check, Schemathesis's message and a curl."""
    seen, text = set(), []
    for label, check, info in failures:
        failure = getattr(info, "failure", info)
        key = (label, check, getattr(failure, "title", ""))
        if key not in seen:
            seen.add(key)
            text.append(f"{label} [{check}] {getattr(failure, 'title', '')}\n"
                        f"{getattr(failure, 'message', failure)}\n{getattr(info, 'code_sample', '')}")
    return "\n\n".join(text)


@pytest.mark.usefixtures("connections_kept")
@pytest.mark.parametrize("role", ROLES)
def test_the_api_keeps_its_schema(world, wsgi_transport, role):
    username, coverage, fuzzing_examples = ROLES[role]
    failures, ran = run_schemathesis(username, coverage, fuzzing_examples)
    operations = sum(1 for key in ran if key.startswith("operation "))
    print(f"\n{role}: {operations} operations, requests by phase "
          f"{ {k: v for k, v in ran.items() if not k.startswith('operation ')} }")
    assert operations >= 33 and ran["links"] >= 10 and ran["stateful"] > 0, ran
    assert not failures, describe(failures)


def _schemas(node):
    """Every schema object inside ``node`` (properties, items, oneOf members...)."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _schemas(value)
    elif isinstance(node, list):
        for value in node:
            yield from _schemas(value)


def test_the_schema_documents_every_limit_and_every_answer(api):
    """Every request field has its limits in the schema, every operation its errors and a described body."""
    schema = api("alice").get("/api/schema/?format=json").json()
    components = schema["components"]["schemas"]
    pending = [part["$ref"] for methods in schema["paths"].values() for operation in methods.values()
               for part in _schemas(operation.get("requestBody", {})) if "$ref" in part]
    requests = {}
    while pending:  # the request bodies' components and those they refer to
        name = pending.pop().rsplit("/", 1)[-1]
        if name not in requests:
            requests[name] = components[name]
            pending += [part["$ref"] for part in _schemas(components[name]) if "$ref" in part]
    assert {"JobSubmitRequest", "BurstRequestRequest", "JobReportRequest"} <= set(requests), requests.keys()
    for name, body in requests.items():
        for field, spec in body.get("properties", {}).items():
            for part in _schemas(spec):
                if part.get("type") == "string" and not {"enum", "format"} & set(part) and part.get("maxLength") != 0:
                    assert "maxLength" in part and "pattern" in part, (name, field, part)
                if part.get("type") == "integer":
                    assert {"minimum", "maximum"} <= set(part), (name, field, part)
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            responses = operation["responses"]
            assert "429" in responses and any(code.startswith("2") for code in responses), (method, path)
            if operation.get("security") != [{}] and "tokenAuth" in str(operation.get("security")):
                assert {"401", "403"} <= set(responses), (method, path)
            if "requestBody" in operation:
                assert {"400", "415"} <= set(responses), (method, path)
            for code, response in responses.items():
                if code != "204":
                    assert "content" in response, (method, path, code)
