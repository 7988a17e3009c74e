"""The settings package stays readable: every setting is bound in one place on each profile's path (no later
module rebinds or mutates it), the environment is read only through settings/environment.py, whose errors name
the variable, and the demo's seed data and the benchmarks are installed only where they are used."""

import ast
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from gpuportal.settings import environment
from tests.gpuportal.test_settings import PRODUCTION, run

PACKAGE = Path(environment.__file__).parent
PROFILES = ("embedded", "production", "test")


def _tree(module: str) -> ast.Module:
    return ast.parse((PACKAGE / f"{module}.py").read_text())


def _statements(body: list[ast.stmt]):
    """The module-level statements, those under a module-level ``if`` or ``try`` included."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _statements([*node.body, *node.orelse])
        elif isinstance(node, ast.Try):
            yield from _statements([*node.body, *(s for h in node.handlers for s in h.body), *node.orelse,
                                    *node.finalbody])


def _bound(module: str) -> list[str]:
    """Every name the module binds at module level, in order (a name twice if bound twice)."""
    names = []
    for node in _statements(_tree(module).body):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.append(node.name)
    return names


def _drawn_on(module: str, seen: set[str] | None = None) -> set[str]:
    """The package's modules ``module`` is built from (its relative imports, followed), itself included."""
    seen = set() if seen is None else seen
    seen.add(module)
    for node in ast.walk(_tree(module)):
        name = (node.module or "").removeprefix("gpuportal.settings.") if isinstance(node, ast.ImportFrom) else None
        if name and name != node.module and name not in seen:
            _drawn_on(name, seen)
    return seen


def test_no_module_binds_a_name_twice_nor_changes_a_setting_after_binding_it():
    for path in sorted(PACKAGE.glob("*.py")):
        names = _bound(path.stem)
        assert sorted({n for n in names if names.count(n) > 1}) == [], path.name
        for node in _statements(_tree(path.stem).body):
            assert not isinstance(node, ast.AugAssign), f"{path.name}:{node.lineno} changes a setting"
            if isinstance(node, ast.Assign):
                assert all(isinstance(t, ast.Name) for t in node.targets), f"{path.name}:{node.lineno} mutates"
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):  # SETTING.insert(…), .append(…)
                called = node.value.func
                assert not (isinstance(called, ast.Attribute) and isinstance(called.value, ast.Name)
                            and called.value.id.isupper()), f"{path.name}:{node.lineno} mutates {called.value.id}"


@pytest.mark.parametrize("profile", PROFILES)
def test_each_setting_is_bound_once_on_a_profiles_path(profile):
    """The profiles are alternatives (one process loads one); within one, every setting comes from one module."""
    where: dict[str, list[str]] = {}
    for module in sorted(_drawn_on(profile)):
        for name in set(_bound(module)):
            if name.isupper():
                where.setdefault(name, []).append(module)
    assert {name: modules for name, modules in where.items() if len(modules) > 1} == {}


def test_the_environment_is_read_only_by_the_environment_module():
    for path in sorted(PACKAGE.glob("*.py")):
        if path.stem == "environment":
            continue
        tree = ast.parse(path.read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        reads = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                 and isinstance(node.value, ast.Name) and node.value.id == "os" and node.attr in ("environ", "getenv")]
        assert reads == [], f"{path.name} reads os.environ at lines {reads}: use settings/environment.py"
        assert "dotenv" not in imported, path.name


def test_no_comment_fences_in_the_settings():
    for path in sorted(PACKAGE.glob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            assert not line.lstrip().startswith("# ---"), f"{path.name}:{number}: a fence, not a topic module"


@pytest.mark.parametrize(("reader", "raw", "expected"), [
    (environment.env_int, "many", "GPUPORTAL_SOME_SETTING must be a whole number, not 'many'"),
    (environment.env_float, "1,5", "GPUPORTAL_SOME_SETTING must be a number, not '1,5'"),
    (environment.env_bool, "true", "GPUPORTAL_SOME_SETTING must be 1 (on) or 0 (off), not 'true'"),
])
def test_a_value_of_the_wrong_type_is_refused_naming_the_variable(monkeypatch, reader, raw, expected):
    monkeypatch.setenv("GPUPORTAL_SOME_SETTING", raw)
    with pytest.raises(ImproperlyConfigured) as refused:
        reader("GPUPORTAL_SOME_SETTING", 1)
    assert str(refused.value) == expected


def test_the_readers_give_the_default_when_unset_and_take_an_empty_value_as_given(monkeypatch):
    monkeypatch.delenv("GPUPORTAL_SOME_SETTING", raising=False)
    assert environment.env_int("GPUPORTAL_SOME_SETTING", 7) == 7
    assert environment.env_bool("GPUPORTAL_SOME_SETTING", True) is True
    assert environment.env_list("GPUPORTAL_SOME_SETTING", "a, b,,c") == ["a", "b", "c"]
    monkeypatch.setenv("GPUPORTAL_SOME_SETTING", "")
    assert environment.env_list("GPUPORTAL_SOME_SETTING", "a,b") == []
    assert environment.env_str_or_default("GPUPORTAL_SOME_SETTING", "fallback") == "fallback"
    with pytest.raises(ImproperlyConfigured, match="^GPUPORTAL_SOME_SETTING must be set when GPUPORTAL_ENV=production"):
        environment.env_required("GPUPORTAL_SOME_SETTING")
    monkeypatch.setenv("GPUPORTAL_SOME_SETTING", "10.0.0.0/8, nonsense")
    with pytest.raises(ImproperlyConfigured, match="^GPUPORTAL_SOME_SETTING must be a comma-separated list of CIDRs: "):
        environment.env_networks("GPUPORTAL_SOME_SETTING")


def test_a_wrong_value_stops_start_up_naming_the_variable():
    result = run({"GPUPORTAL_POLL_WORKERS": "many"})
    assert result.returncode != 0
    assert "ImproperlyConfigured: GPUPORTAL_POLL_WORKERS must be a whole number, not 'many'" in result.stderr


APPS = "import django; django.setup(); from django.conf import settings; print(' '.join(settings.INSTALLED_APPS))"


def test_demo_and_bench_are_installed_for_the_demo_and_the_tests_only():
    embedded = run({}, code=APPS)
    assert embedded.returncode == 0, embedded.stderr
    assert {"demo", "bench", "directory"} <= set(embedded.stdout.split())
    production = run(PRODUCTION, code=APPS)
    assert production.returncode == 0, production.stderr
    assert {"demo", "bench"}.isdisjoint(production.stdout.split()) and "directory" in production.stdout.split()
    from django.conf import settings

    assert {"demo", "bench"} <= set(settings.INSTALLED_APPS)  # the tests seed the demo's world


def test_every_profile_module_is_a_settings_module_of_its_own():
    """``gpuportal.settings.production`` is the same as ``gpuportal.settings`` with ``GPUPORTAL_ENV=production``."""
    show = "import django; django.setup(); from django.conf import settings as s; print(s.ENVIRONMENT, s.DEBUG)"
    for module, env, expected in (("gpuportal.settings", PRODUCTION, "production False"),
                                  ("gpuportal.settings.production", PRODUCTION, "production False"),
                                  ("gpuportal.settings.embedded", {}, "embedded False"),
                                  ("gpuportal.settings.embedded", {"DEBUG": "1"}, "embedded True"),
                                  ("gpuportal.settings", {}, "embedded False")):
        result = run(env, code=show, module=module)
        assert result.stdout.split() == expected.split(), (module, result.stderr)
