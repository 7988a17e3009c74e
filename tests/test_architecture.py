"""The import rules of docs/architecture.md that import-linter (``lint-imports`` in ``make test``) cannot say:
no import cycle between the portal's modules, and an import inside a function only where it must be, with a
comment saying why. Read from the source with ``ast``, so nothing needs to be imported to check it."""

from __future__ import annotations

import ast
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


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def module_level_imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        edges = graph.setdefault(module, set())
        stack = list(tree.body)
        while stack:
            node = stack.pop()
            if isinstance(node, ast.If) and not _is_type_checking(node):
                stack += node.body + node.orelse
            elif isinstance(node, ast.Try):
                stack += node.body + node.orelse + node.finalbody + list(node.handlers)
            elif isinstance(node, ast.ExceptHandler):
                stack += node.body
            elif isinstance(node, ast.Import | ast.ImportFrom):
                edges.update(t for t in _targets(node, module, path) if t != module)
    return graph


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


def test_no_import_cycles_between_modules():
    assert strongly_connected(module_level_imports()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


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
