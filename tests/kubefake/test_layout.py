"""The fake API server stays split by concern: every module says why it exists and none grows past a few
hundred lines (a newcomer reads one part without the others)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "kubefake"
MODULES = sorted(PACKAGE.glob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_module_says_why_it_exists_and_stays_small(path):
    source = path.read_text()
    assert ast.get_docstring(ast.parse(source)), f"{path.name} has no docstring"
    assert len(source.splitlines()) <= 400

