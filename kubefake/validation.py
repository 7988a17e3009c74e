"""Strict schema validation with kubernetes-validate's own schemas, compiled once per kind.

``kubernetes_validate.validate`` reads the kind's schema and the 9 MB definitions file on every call
(about 6 ms per object); the fake API server validates every body it receives, so it keeps one compiled
validator per (kind, apiVersion) and gets the same verdicts (a test compares them).
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

import jsonschema
import kubernetes_validate
from kubernetes_validate.utils import all_versions, major_minor, schema_contents
from referencing import Registry, Resource

KUBERNETES_VERSION = "1.30"
_lock = threading.Lock()


@lru_cache(maxsize=1)
def _definitions(schema_dir: str):
    return Resource.from_contents(schema_contents(f"kubernetes-json-schema/{schema_dir}/_definitions.json",
                                                  KUBERNETES_VERSION))


def _schema_dir() -> str:
    version = [v for v in all_versions() if major_minor(v) <= KUBERNETES_VERSION][-1]
    return f"v{version}-local-strict"


@lru_cache(maxsize=64)
def validator(kind: str, api_version: str):
    schema_dir = _schema_dir()
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = schema_contents(f"kubernetes-json-schema/{schema_dir}/{kind.lower()}-{group_version}.json",
                             KUBERNETES_VERSION)
    registry = _definitions(schema_dir) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


def errors(body: dict) -> str:
    """"" when ``body`` is valid in strict mode, else the first error as kubernetes-validate words it."""
    try:
        with _lock:
            check = validator(body["kind"], body["apiVersion"])
    except (KeyError, TypeError):
        return "kind and apiVersion are required"
    except FileNotFoundError:
        return f"no schema for {body.get('kind')} {body.get('apiVersion')}"
    error = jsonschema.exceptions.best_match(check.iter_errors(body))
    return "" if error is None else error.message


def same_verdict_as_kubernetes_validate(body: dict) -> bool:
    """For the test that keeps this cache honest."""
    try:
        kubernetes_validate.validate(body, KUBERNETES_VERSION, strict=True)
        reference = ""
    except kubernetes_validate.ValidationError as exc:
        reference = exc.message
    return bool(reference) == bool(errors(body))
