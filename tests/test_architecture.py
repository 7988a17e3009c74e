"""The import rules of docs/architecture.md that import-linter (``lint-imports`` in ``make test``) cannot say,
and the statements of that document that can be checked: no import cycle between the portal's modules
(imports inside functions and under ``TYPE_CHECKING`` included), an import inside a function only where it
must be, with a comment saying why; who imports the trigger module and the tasks; the layer table against the
import contract; permissions asked through the named predicates of ``tenants.access``. Read from the source
with ``ast`` (and ``tomllib``), so nothing needs to be imported to check it."""

from __future__ import annotations

import ast
import re
import tomllib
from collections import deque
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gpuportal", "tenants", "accounts", "audit", "fleet", "directory", "scheduling", "governance", "metering",
            "demo", "bench", "nodeagent", "kubefake", "cli/gpuportal_cli")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        top = (ROOT / package).parent  # the command-line client is a package of its own under cli/
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(top).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _targets(node: ast.ImportFrom | ast.Import, module: str, path: Path) -> list[str]:
    """The project modules an import statement names."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        if node.level:
            base = package.split(".")
            base = base[:len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        names = [f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in MODULES else prefix for alias in node.names]
    out = []
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name:
            out.append(name)
    return out


def imports_of(module: str, path: Path) -> set[str]:
    """The project modules ``module`` imports: every import statement, at the top, under ``if``/``try``, under
    ``TYPE_CHECKING`` and inside functions and methods alike. An import inside a function runs later, but it is
    a dependency all the same: a loop closed by one is a loop."""
    return {target for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Import | ast.ImportFrom)
            for target in _targets(node, module, path) if target != module}


@cache  # parsed once for the tests below; nothing changes the sources while they run
def all_imports() -> dict[str, set[str]]:
    return {module: imports_of(module, path) for module, path in MODULES.items()}


def importers_of(target: str, graph: dict[str, set[str]] | None = None) -> set[str]:
    graph = all_imports() if graph is None else graph
    return {module for module, edges in graph.items() if target in edges}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively: the groups of modules that import each other in a loop."""
    index, low, on_stack, stack, groups, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def shortest_cycle(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """One shortest loop through the first module of a strongly connected group, as a path that ends where it
    starts (breadth-first inside the group)."""
    start, members = group[0], set(group)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph.get(node, ())):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if child in members and child not in came_from:
                came_from[child] = node
                queue.append(child)
    return group


def test_no_import_cycles_between_modules():
    graph = all_imports()
    cycles = [" -> ".join(shortest_cycle(graph, group)) for group in strongly_connected(graph)]
    assert cycles == [], "modules that import each other in a loop:\n" + "\n".join(cycles)


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert shortest_cycle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_the_import_walk_sees_imports_inside_functions(tmp_path):
    """A loop closed by an import inside a function (or a method, or under ``TYPE_CHECKING``) is found: the walk
    does not stop at the module's top."""
    path = tmp_path / "inner.py"
    path.write_text("from typing import TYPE_CHECKING\n"
                    "if TYPE_CHECKING:\n    from scheduling.models import Job\n"
                    "class Later:\n    def run(self):\n        from scheduling import tasks  # why\n")
    assert imports_of("scheduling.jobs.inner", path) == {"scheduling.models", "scheduling.tasks"}


def _inner_imports_without_reason() -> list[str]:
    """Project imports inside functions with no comment on the line or just above it."""
    missing = []
    for module, path in MODULES.items():
        lines = path.read_text().splitlines()
        for function in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if not isinstance(node, ast.Import | ast.ImportFrom) or not _targets(node, module, path):
                    continue
                here, above = lines[node.lineno - 1], lines[node.lineno - 2].strip()
                block_comment = any(lines[i].strip().startswith("#") for i in range(
                    function.lineno, node.lineno - 1))
                if "#" not in here and not above.startswith("#") and not block_comment:
                    missing.append(f"{module}:{node.lineno}")
    return missing


def test_imports_inside_functions_say_why():
    assert _inner_imports_without_reason() == []


SPLIT_SERVICES = ("scheduling/jobs/submission.py", "scheduling/jobs/actions.py", "scheduling/jobs/queries.py",
                  "scheduling/passes/snapshots.py", "scheduling/passes/scheduler.py", "scheduling/tasks.py")


def test_scheduling_services_have_no_function_over_sixty_lines():
    long = [f"{path}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path in SPLIT_SERVICES for node in ast.walk(ast.parse((ROOT / path).read_text()))
            if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno + 1 > 60]
    assert long == []


# --- docs/architecture.md says what the code does -------------------------------------------------------------

DOC = ROOT / "docs" / "architecture.md"


def _doc_table(heading: str) -> list[tuple[str, list[str]]]:
    """The rows of the first table under ``heading``: (layer cell, the names in the second cell's backticks, each
    without its trailing ``/`` or ``.py``)."""
    lines = DOC.read_text().split(heading, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2:]:  # after the header and its rule
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows.append((cells[0], [re.sub(r"(/|\.py)$", "", name) for name in re.findall(r"`([^`]+)`", cells[1])]))
    return rows


def _doc_layers(heading: str) -> list[set[str]]:
    """The layers of a table, highest first: a row with a number starts a layer, a row with an empty layer cell
    adds its names to the one above; rows "aside" are left out."""
    layers: list[set[str]] = []
    for layer, names in _doc_table(heading):
        if layer == "aside":
            continue
        if layer:
            assert layer.isdigit(), f"{heading}: layer {layer!r} is not a number"
            layers.append(set())
        layers[-1].update(names)
    return layers


def _contract(name_starts: str) -> dict:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["name"].startswith(name_starts))


def _contract_layers(contract: dict) -> list[set[str]]:
    return [{part.strip() for part in re.split(r"[|:]", layer)} for layer in contract["layers"]]


def test_the_layer_table_is_the_import_contract():
    assert _doc_layers("## Apps and what they own") == _contract_layers(_contract("Layers:"))
    numbers = [int(layer) for layer, _names in _doc_table("## Apps and what they own") if layer.isdigit()]
    assert numbers == sorted(numbers, reverse=True), "the table lists the layers from the top down"
    root = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
    aside = {name.rpartition("/")[2] for layer, names in _doc_table("## Apps and what they own")
             if layer == "aside" for name in names}
    assert aside == set(root) - set().union(*_contract_layers(_contract("Layers:")))


def test_the_scheduling_table_is_its_import_contract():
    contract = _contract("Inside scheduling:")
    assert contract["containers"] == ["scheduling"]
    assert _doc_layers("## Inside `scheduling/`") == _contract_layers(contract)
    documented = set().union(*_doc_layers("## Inside `scheduling/`"))
    package = {module.split(".")[1] for module in MODULES if module.startswith("scheduling.")}
    assert package - {"migrations"} == documented, "every package and module of scheduling/ has its layer"


def _documented_importers(bullet: str) -> set[str]:
    """The modules the bullet ``bullet`` of docs/architecture.md names after "Imported by"."""
    text = DOC.read_text().split(f"\n- {bullet} — ", 1)[1].split("\n- ", 1)[0].split("\n## ", 1)[0]
    return set(re.findall(r"`([a-z_.]+)`", text.split("Imported by", 1)[1]))


def test_who_imports_the_trigger_module_is_what_the_document_says():
    assert importers_of("scheduling.triggers") == _documented_importers("`triggers.py`")


def test_no_portal_module_imports_the_tasks():
    """Only entry points import ``scheduling/tasks.py``: the management commands and, above scheduling, the
    demo's seed and the benchmarks. Services reach the tasks by name, through ``scheduling.triggers``."""
    graph = all_imports()
    others = {module for module in importers_of("scheduling.tasks", graph)
              if ".management.commands." not in module and module.split(".")[0] not in ("demo", "bench")}
    assert others == set()
    assert importers_of("scheduling.triggers", graph) - {"scheduling.tasks"}, "the services ask through triggers"
    assert imports_of("scheduling.triggers", MODULES["scheduling.triggers"]) <= {"gpuportal.observability.telemetry"}


def test_the_trigger_names_tasks_that_exist():
    """``scheduling.triggers`` queues tasks by their names: each name is a ``shared_task`` of ``tasks.py``."""
    tree = ast.parse(MODULES["scheduling.triggers"].read_text())
    names = {node.value for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("scheduling.")}
    tasks = {f"scheduling.tasks.{node.name}" for node in ast.parse(MODULES["scheduling.tasks"].read_text()).body
             if isinstance(node, ast.FunctionDef) and any(
                 getattr(d, "id", None) == "shared_task" for d in node.decorator_list)}
    assert names and names <= tasks, names - tasks


# --- permissions are named predicates -------------------------------------------------------------------------

ROLE_VALUES = {"researcher", "approver", "tenant_admin", "viewer", "platform_admin", "manager", "auditor"}
ROLE_ATTRIBUTES = {"role", "held_by"}


def test_no_module_reads_platform_admin_but_access():
    """``access.is_platform_admin(user)`` (or another predicate of ``tenants.access``), never
    ``access.for_user(user).platform_admin`` inline."""
    readers = [f"{module}:{node.lineno}" for module, path in MODULES.items() if module != "tenants.access"
               for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.Attribute) and node.attr == "platform_admin"]
    assert readers == []


def test_the_role_values_are_declared_once():
    """The stored value of a role appears only where its enumeration is declared (``tenants/roles.py``)."""
    roles = set()
    for node in ast.walk(ast.parse(MODULES["tenants.roles"].read_text())):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple) and node.value.elts:
            first = node.value.elts[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                roles.add(first.value)
    assert roles == ROLE_VALUES
    found = [f"{module}:{node.lineno} {node.value!r}" for module, path in MODULES.items() if module != "tenants.roles"
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Constant) and node.value in ROLE_VALUES]
    assert found == []


def _name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def test_no_role_is_compared_as_a_string():
    """``job.held_by == HeldBy.ADMIN``, not ``== "admin"``: a role or a holder compared with ``==``, ``!=`` or
    ``in`` is compared with its enumeration."""
    found = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            if any(_name(o) in ROLE_ATTRIBUTES for o in operands) and any(
                    isinstance(o, ast.Constant) and isinstance(o.value, str) and o.value for o in operands):
                found.append(f"{module}:{node.lineno}")
    assert found == []
