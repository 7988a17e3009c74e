"""The container images (deploy/docker/), checked without a container engine.

No engine runs on these machines, so the Dockerfiles are parsed and held to the issue's rules: every base image
pinned by version (never ``latest``); a builder stage makes the wheelhouse and the final stage installs from it
with ``pip install --no-index`` — no compiler, no package manager, no download there (nor a ``# syntax=``
frontend pulled before the build); a fixed non-root uid; CMD, ENTRYPOINT and HEALTHCHECK in exec form; the
portal's HEALTHCHECK on ``/healthz``; no secret in the image; and the commands the images start exist and accept
their arguments (each program's own parser reads them).
Every rule is also shown to fire on a Dockerfile that breaks it, so a checker that accepts everything fails.

``command_problems`` is shared with the manifest and systemd checks (the same commands run there).
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import re
import shlex
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "deploy" / "docker"
TOOLING_MARKER = "# Tests and tooling"  # requirements.txt: what follows is not installed in the image

# --- parsing ------------------------------------------------------------------------------------------------


@dataclass
class Instruction:
    keyword: str
    value: str
    line: int


@dataclass
class Stage:
    base: str
    name: str
    line: int
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def parse_dockerfile(text: str) -> list[Stage]:
    """Stages with their instructions (continuation lines joined, comments and blank lines left out)."""
    stages: list[Stage] = []
    logical, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not logical and (not stripped or stripped.startswith("#")):
            continue
        if logical and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if not logical:
            start = number
        if stripped.endswith("\\"):
            logical += stripped[:-1] + " "
            continue
        logical += stripped
        keyword, _sep, value = logical.partition(" ")
        keyword, value = keyword.upper(), value.strip()
        if keyword == "FROM":
            words = value.split()
            words = [w for w in words if not w.startswith("--")]  # --platform=…
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else ""
            stages.append(Stage(base=words[0] if words else "", name=name, line=start))
        elif stages:
            stages[-1].instructions.append(Instruction(keyword, value, start))
        logical = ""
    return stages


def exec_form(value: str) -> list[str] | None:
    """The JSON array of an exec-form CMD/ENTRYPOINT, or None for the shell form."""
    if not value.startswith("["):
        return None
    try:
        words = json.loads(value)
    except ValueError:
        return None
    return words if isinstance(words, list) and all(isinstance(w, str) for w in words) else None


def run_command(instruction: Instruction) -> str:
    """A RUN's shell command without its ``--mount=…``/``--network=…`` flags."""
    words = instruction.value.split(" ")
    while words and words[0].startswith("--"):
        words.pop(0)
    return " ".join(words)


def healthcheck_command(value: str) -> tuple[str, list[str] | None]:
    """(``NONE``/``CMD``/"", the exec-form command or None) of a HEALTHCHECK's value."""
    words = value.split()
    while words and words[0].startswith("--"):
        words.pop(0)
    if not words:
        return "", None
    if words[0].upper() == "NONE":
        return "NONE", None
    padded = f" {value} "
    at = padded.upper().find(" CMD ")
    return words[0].upper(), exec_form(padded[at + 5:].strip()) if at >= 0 else None


def shell_segments(command: str) -> list[str]:
    """A shell command cut at ``&&``, ``||``, ``;`` and ``|``: each part is one program run."""
    return [part.strip() for part in re.split(r"&&|\|\||;|\|", command) if part.strip()]


# --- the rules ----------------------------------------------------------------------------------------------

# An exact release: major.minor.patch (python:3.11.7-…) or a dated build (debian:bookworm-20240110); "3.11" floats.
VERSION_TAG = re.compile(r"(?<![\d.])\d+\.\d+\.\d+(?![\d.])|(?<!\d)\d{8}(?!\d)")
COMPILERS = re.compile(r"(?<![\w.-])(gcc|g\+\+|cc|c\+\+|clang|make|cmake|build-essential|gfortran|rustc|cargo"
                       r"|[\w.-]+-dev|[\w.-]+-devel)(?![\w.-])")
PACKAGE_INSTALLS = re.compile(r"\b(apt-get|apt|aptitude)\s+(\S+\s+)*install\b|\bapk\s+add\b"
                              r"|\b(yum|dnf|microdnf|zypper)\s+(\S+\s+)*install\b")
DOWNLOADERS = re.compile(r"(?<![\w.-])(curl|wget|git\s+clone|pip\s+download|pip\s+wheel)(?![\w.-])")
SECRET_NAME = re.compile(r"(SECRET|PASSWORD|PASSWD|TOKEN|_KEY$|^KEY$|CREDENTIAL)", re.I)
CREDENTIALS_IN_URL = re.compile(r"\w+://[^/\s:@]+:[^/\s@]+@")  # scheme://user:password@host
SECRET_FILES = re.compile(r"(^|/)(\.env|[\w.-]*\.env|secret[\w.-]*|[\w.-]*\.pem|[\w.-]*\.key|id_rsa[\w.-]*)$")


def _env_assignments(value: str) -> list[tuple[str, str]]:
    """``ENV a=1 b=2`` and the legacy ``ENV a 1`` as (name, value) pairs (ARG: a name with or without one)."""
    words = shlex.split(value, posix=True)
    if len(words) >= 2 and "=" not in words[0]:
        return [(words[0], " ".join(words[1:]))]
    return [tuple(w.split("=", 1)) if "=" in w else (w, "") for w in words]


def rule_pinned_base(stages: list[Stage]) -> list[str]:
    problems, names = [], set()
    for stage in stages:
        base = stage.base
        if base.lower() in names:
            pass  # FROM an earlier stage
        elif "$" in base:
            problems.append(f"[pinned-base] line {stage.line}: FROM {base} comes from a build argument; name the "
                            "pinned image itself")
        elif "@sha256:" in base:
            pass  # pinned by digest
        else:
            image, _sep, tag = base.rpartition(":") if ":" in base.rsplit("/", 1)[-1] else (base, "", "")
            if not tag or tag == "latest" or not VERSION_TAG.search(tag):
                problems.append(f"[pinned-base] line {stage.line}: FROM {base} is not pinned to an exact version tag")
        if stage.name:
            names.add(stage.name.lower())
    return problems


def rule_multi_stage(stages: list[Stage]) -> list[str]:
    if len(stages) < 2:
        return ["[multi-stage] a builder stage must make the wheels the final stage installs"]
    builds = [i for s in stages[:-1] for i in s.all("RUN") if re.search(r"\bpip\s+wheel\b", run_command(i))]
    return [] if builds else ["[multi-stage] no builder stage runs `pip wheel` (the wheelhouse)"]


def rule_non_root_user(final: Stage) -> list[str]:
    users = final.all("USER")
    if not users:
        return ["[non-root-user] the final stage has no USER: it would run as root"]
    user, _sep, group = users[-1].value.partition(":")
    if not user.isdigit() or int(user) == 0 or (group and (not group.isdigit() or int(group) == 0)):
        return [f"[non-root-user] line {users[-1].line}: USER {users[-1].value} must be a fixed numeric uid (and "
                "gid) other than 0, so that runAsNonRoot can check it"]
    return []


def rule_no_compilers(final: Stage) -> list[str]:
    return [f"[no-compilers] line {i.line}: the final stage installs or runs a compiler/toolchain "
            f"({COMPILERS.search(run_command(i)).group(1)})"
            for i in final.all("RUN") if COMPILERS.search(run_command(i))]


def rule_offline_final(final: Stage) -> list[str]:
    problems = []
    for instruction in final.instructions:
        if instruction.keyword == "ADD" and re.search(r"\b(https?|ftp)://|\bgit@", instruction.value):
            problems.append(f"[offline-final] line {instruction.line}: ADD from the network in the final stage")
        if instruction.keyword != "RUN":
            continue
        command = run_command(instruction)
        if any(PACKAGE_INSTALLS.search(segment) for segment in shell_segments(command)):
            problems.append(f"[offline-final] line {instruction.line}: a package manager installs in the final stage")
        if found := DOWNLOADERS.search(command):
            problems.append(f"[offline-final] line {instruction.line}: {found.group(1)} in the final stage")
        for segment in shell_segments(command):
            if re.search(r"\bpip3?\s+install\b|-m\s+pip\s+install\b", segment) and "--no-index" not in segment:
                problems.append(f"[offline-final] line {instruction.line}: pip install without --no-index")
    return problems


def rule_wheelhouse(final: Stage) -> list[str]:
    installs = [s for i in final.all("RUN") for s in shell_segments(run_command(i))
                if re.search(r"\bpip3?\s+install\b", s)]
    if not any("--no-index" in s and "--find-links" in s for s in installs):
        return ["[wheelhouse] the final stage does not install with pip install --no-index --find-links <wheels>"]
    return []


def rule_exec_form(stages: list[Stage]) -> list[str]:
    problems = []
    for stage in stages:
        for instruction in stage.instructions:
            if instruction.keyword in ("CMD", "ENTRYPOINT") and exec_form(instruction.value) is None:
                problems.append(f"[exec-form] line {instruction.line}: {instruction.keyword} in shell form (signals "
                                "would go to a shell, not to the program)")
            if instruction.keyword == "HEALTHCHECK":
                kind, command = healthcheck_command(instruction.value)
                if kind == "CMD" and command is None:
                    problems.append(f"[exec-form] line {instruction.line}: HEALTHCHECK CMD in shell form")
    return problems


def rule_healthcheck(final: Stage) -> list[str]:
    checks = final.all("HEALTHCHECK")
    if not checks:
        return ["[healthcheck] the portal image has no HEALTHCHECK"]
    kind, command = healthcheck_command(checks[-1].value)
    if kind != "CMD" or not any("/healthz" in word for word in command or []):
        return [f"[healthcheck] line {checks[-1].line}: HEALTHCHECK must ask /healthz"]
    return []


def rule_expose(final: Stage, port: int) -> list[str]:
    exposed = {word.split("/")[0] for i in final.all("EXPOSE") for word in i.value.split()}
    return [] if str(port) in exposed else [f"[expose] the final stage does not EXPOSE {port}"]


def rule_no_secrets(stages: list[Stage]) -> list[str]:
    problems = []
    for stage in stages:
        for instruction in stage.instructions:
            if instruction.keyword in ("ENV", "ARG"):
                for name, value in _env_assignments(instruction.value):
                    if SECRET_NAME.search(name) or CREDENTIALS_IN_URL.search(value):
                        problems.append(f"[no-secrets] line {instruction.line}: {instruction.keyword} {name} would "
                                        "stay in the image (give it at run time)")
            if instruction.keyword in ("COPY", "ADD"):
                sources = [w for w in (exec_form(instruction.value) or instruction.value.split())
                           if not w.startswith("--")][:-1]
                for source in sources:
                    if SECRET_FILES.search(source):
                        problems.append(f"[no-secrets] line {instruction.line}: {source} looks like a secret file")
            if instruction.keyword == "RUN":
                assignments = re.findall(r"\b([A-Z][A-Z0-9_]*)=(\"[^\"]*\"|'[^']*'|\S+)", run_command(instruction))
                for name, value in assignments:
                    if (SECRET_NAME.search(name) and not value.strip("\"'").startswith("$(")) or \
                            CREDENTIALS_IN_URL.search(value):
                        problems.append(f"[no-secrets] line {instruction.line}: RUN sets {name} to a literal value "
                                        "(kept in the image's history); generate a throwaway one with $(…)")
    return problems


def rule_collectstatic(final: Stage) -> list[str]:
    runs = [run_command(i) for i in final.all("RUN") if "collectstatic" in i.value]
    if not runs:
        return ["[collectstatic] the portal image does not collect its static files at build time"]
    if not any(re.search(r"\bGPUPORTAL_ENV=production\b", run) for run in runs):
        return ["[collectstatic] collectstatic must run with GPUPORTAL_ENV=production: production serves whitenoise's "
                "manifest storage, which only a production collectstatic writes"]
    return []


def rule_commands(final: Stage) -> list[str]:
    entrypoint, cmd = final.all("ENTRYPOINT"), final.all("CMD")
    if not entrypoint and not cmd:
        return ["[commands] the image names no command (CMD/ENTRYPOINT)"]
    argv = (exec_form(entrypoint[-1].value) or [] if entrypoint else []) + (
        exec_form(cmd[-1].value) or [] if cmd else [])
    if not argv:
        return ["[commands] the command is not in exec form, so it cannot be checked"]
    return [f"[commands] {problem}" for problem in command_problems(argv)]


def rule_offline_build(text: str) -> list[str]:
    """A ``# syntax=`` parser directive makes BuildKit pull that frontend image from a registry before anything
    else: an air-gapped build fails there. The engine's built-in frontend reads everything these files use."""
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        if re.match(r"#\s*syntax\s*=", line, re.I):
            return [f"[offline-build] {line.strip()} pulls the Dockerfile frontend from a registry"]
    return []


def dockerfile_problems(text: str, role: str) -> list[str]:
    """Every rule broken by a Dockerfile's ``text``; ``role`` is "portal" or "agent"."""
    stages = parse_dockerfile(text)
    if not stages:
        return ["[multi-stage] no FROM at all"]
    final = stages[-1]
    problems = [*rule_offline_build(text), *rule_pinned_base(stages), *rule_multi_stage(stages),
                *rule_non_root_user(final), *rule_no_compilers(final), *rule_offline_final(final),
                *rule_wheelhouse(final), *rule_exec_form(stages), *rule_no_secrets(stages), *rule_commands(final)]
    if role == "portal":
        problems += [*rule_healthcheck(final), *rule_expose(final, 8000), *rule_collectstatic(final)]
    else:
        problems += rule_expose(final, 9400)
    return problems


# --- the commands -------------------------------------------------------------------------------------------


@cache
def runtime_requirements() -> tuple[Requirement, ...]:
    """requirements.txt above its tooling marker, without editable lines: what the image installs (the
    Dockerfile's sed does the same cut)."""
    lines = (REPO / "requirements.txt").read_text().splitlines()
    assert TOOLING_MARKER in [line.strip() for line in lines], f"requirements.txt lost its {TOOLING_MARKER!r} line"
    kept = []
    for line in lines[:[line.strip() for line in lines].index(TOOLING_MARKER)]:
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith(("#", "-")):
            kept.append(Requirement(line))
    return tuple(kept)


@cache
def runtime_distributions() -> frozenset[str]:
    """The runtime requirements and everything they require (with their extras), as installed here."""
    seen: set[str] = set()
    pending = [(r.name, frozenset(r.extras)) for r in runtime_requirements()]
    while pending:
        name, extras = pending.pop()
        key = canonicalize_name(name)
        if (key, extras) in seen:
            continue
        seen.add((key, extras))
        try:
            requirement_texts = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue  # a dependency for another platform, not installed here
        for text in requirement_texts:
            requirement = Requirement(text)
            if requirement.marker is None or any(requirement.marker.evaluate({"extra": e}) for e in extras or {""}):
                pending.append((requirement.name, frozenset(requirement.extras)))
    return frozenset(name for name, _extras in seen)


def _provided_console_script(program: str) -> bool:
    """Is ``program`` a console script of a runtime requirement (so the image's venv has it)?"""
    for distribution in runtime_distributions():
        try:
            entry_points = importlib.metadata.distribution(distribution).entry_points
        except importlib.metadata.PackageNotFoundError:
            continue
        for entry in entry_points:
            if entry.group == "console_scripts" and entry.name == program:
                return True
    return False


def _module_in_repo(module: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:  # its parent package is missing
        return None
    if spec is None or spec.origin is None or not Path(spec.origin).resolve().is_relative_to(REPO):
        return None
    return Path(spec.origin)


def _defines(path: Path, name: str) -> bool:
    tree = ast.parse(path.read_text())
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name == name:
            return True
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            return True
    return False


def _gunicorn_problems(args: list[str]) -> list[str]:
    from gunicorn.config import Config

    try:
        parsed = Config().parser().parse_args(args)
    except SystemExit:
        return [f"gunicorn refuses its arguments {args}"]
    if len(parsed.args) != 1:
        return [f"gunicorn needs exactly one application, got {parsed.args}"]
    module, _sep, attribute = parsed.args[0].partition(":")
    path = _module_in_repo(module)
    if path is None:
        return [f"gunicorn's application module {module} is not in the project"]
    if not _defines(path, attribute or "application"):
        return [f"{module} defines no {attribute or 'application'}"]
    return []


def _celery_problems(args: list[str]) -> list[str]:
    import click
    from celery.bin.base import CLIContext
    from celery.bin.beat import beat
    from celery.bin.worker import worker

    if len(args) < 3 or args[0] not in ("-A", "--app") or args[2] not in ("worker", "beat"):
        return [f"celery must be started as `celery -A <app> worker|beat …`, not {args}"]
    app_module = args[1]
    if _module_in_repo(app_module) is None or _module_in_repo(f"{app_module}.celery") is None:
        return [f"celery's -A {app_module} is not the project's Celery app"]
    from gpuportal.celery import app

    command = worker if args[2] == "worker" else beat
    try:
        command.make_context(command.name, list(args[3:]),
                             obj=CLIContext(app=app, no_color=True, workdir=None, quiet=True))
    except click.ClickException as exc:
        return [f"celery {args[2]} refuses its arguments: {exc.format_message()}"]
    return []


def _manage_problems(args: list[str]) -> list[str]:
    from django.core.management import CommandError, get_commands, load_command_class

    if not args:
        return ["manage.py without a command"]
    commands = get_commands()
    if args[0] not in commands:
        return [f"manage.py has no command {args[0]!r}"]
    parser = load_command_class(commands[args[0]], args[0]).create_parser("manage.py", args[0])
    try:
        parser.parse_args(args[1:])
    except (CommandError, SystemExit) as exc:
        return [f"manage.py {args[0]} refuses its arguments {args[1:]}: {exc}"]
    return []


def _python_problems(args: list[str]) -> list[str]:
    if args[:1] == ["-c"] and len(args) >= 2:
        try:
            compile(args[1], "<command>", "exec")
        except SyntaxError as exc:
            return [f"python -c code does not compile: {exc}"]
        return []
    if args[:1] == ["-m"] and len(args) >= 2:
        module = args[1]
        if _module_in_repo(module) is None:
            return [f"python -m {module}: no such module"]
        if module == "nodeagent":
            from nodeagent.cli import build_parser

            try:
                build_parser().parse_args(args[2:])
            except SystemExit:
                return [f"the node agent refuses its arguments {args[2:]}"]
        return []
    if args and args[0].endswith("manage.py"):
        if not (REPO / "manage.py").is_file():
            return ["manage.py is missing"]
        return _manage_problems(args[1:])
    return [f"python {args}: neither -m, -c nor manage.py"]


def command_problems(argv: list[str]) -> list[str]:
    """What is wrong with a command the deployment starts (a Dockerfile's CMD, a container's command and args,
    a unit's ExecStart): the program must be one the image provides and its own parser must accept the
    arguments. Variables (``$(NODE_NAME)``, ``${AGENT_BIND}``) are taken as plain words."""
    if not argv:
        return ["an empty command"]
    argv = [re.sub(r"\$\((\w+)\)|\$\{(\w+)\}", lambda m: m.group(1) or m.group(2), word) for word in argv]
    program, args = Path(argv[0]).name, argv[1:]
    if program in ("python", "python3", "python3.11"):
        return _python_problems(args)
    if program in ("gunicorn", "celery"):
        if not _provided_console_script(program):
            return [f"{program} is not installed by a runtime requirement (above {TOOLING_MARKER!r})"]
        return _gunicorn_problems(args) if program == "gunicorn" else _celery_problems(args)
    return [f"unknown program {argv[0]!r}"]


# --- the tests ----------------------------------------------------------------------------------------------

PORTAL = DOCKER / "Dockerfile"
AGENT = DOCKER / "Dockerfile.agent"


@pytest.mark.parametrize(("path", "role"), [(PORTAL, "portal"), (AGENT, "agent")], ids=["portal", "agent"])
def test_the_dockerfiles_keep_every_rule(path, role):
    assert dockerfile_problems(path.read_text(), role) == []


def test_the_final_stages_run_as_uid_10001_from_the_same_pinned_python():
    """Both images share their base (one patch release of Python to track) and their uid (the manifests'
    runAsUser)."""
    bases = set()
    for path in (PORTAL, AGENT):
        stages = parse_dockerfile(path.read_text())
        bases |= {s.base for s in stages}
        assert stages[-1].all("USER")[-1].value == "10001:10001"
    assert bases == {"python:3.11.7-slim-bookworm"}


BROKEN = """\
# syntax=docker/dockerfile:1.6
FROM python:latest AS builder
FROM python
RUN apt-get update && apt-get install -y gcc build-essential
RUN pip install -r requirements.txt
ADD https://example.com/tool /usr/local/bin/tool
RUN curl -fsSL https://example.com/install.sh | sh
ENV SECRET_KEY=abc DJANGO_SETTINGS_MODULE=gpuportal.settings
COPY secret.env /app/secret.env
RUN GPUPORTAL_AUDIT_KEY=0123456789 python manage.py collectstatic --noinput
USER 0
HEALTHCHECK CMD curl -f http://localhost/
CMD gunicorn gpuportal.wsgi:application
"""


def test_each_rule_fires_on_a_dockerfile_that_breaks_it():
    problems = dockerfile_problems(BROKEN, "portal")
    fired = {re.match(r"\[([\w-]+)\]", p).group(1) for p in problems}
    assert fired == {"offline-build", "pinned-base", "multi-stage", "non-root-user", "no-compilers", "offline-final",
                     "wheelhouse", "exec-form", "no-secrets", "commands", "healthcheck", "expose", "collectstatic"}
    text = "\n".join(problems)
    for expected in ("FROM python:latest", "FROM python is not", "package manager", "(gcc)", "without --no-index",
                     "ADD from the network", "curl in the final stage", "ENV SECRET_KEY", "secret.env",
                     "RUN sets GPUPORTAL_AUDIT_KEY", "USER 0", "GPUPORTAL_ENV=production"):
        assert expected in text, expected


@pytest.mark.parametrize("mutation", [
    ("python:3.11.7-slim-bookworm AS builder", "python:3.11-slim AS builder", "pinned-base"),  # no patch: floats
    ("USER 10001:10001\n", "", "non-root-user"),
    ("USER 10001:10001", "USER gpuportal", "non-root-user"),
    ("USER 10001:10001", "USER 10001:0", "non-root-user"),
    ("--no-index --find-links /wheels", "--find-links /wheels", "offline-final"),
    ("python -m compileall -q /app", "python -m compileall -q /app && apt-get install -y --no-install-recommends "
                                     "libpq5", "offline-final"),
    ("python -m compileall -q /app", "python -m compileall -q /app && pip download celery", "offline-final"),
    ("8000/healthz'", "8000/'", "healthcheck"),
    ("\"gunicorn\", \"gpuportal.wsgi:application\"", "\"gunicorn\", \"gpuportal.wsgi:app\"", "commands"),
    ("\"--no-control-socket\"", "\"--no-such-flag\"", "commands"),
    ("GPUPORTAL_ENV=production \\", "\\", "collectstatic"),
    ("EXPOSE 8000", "EXPOSE 80", "expose"),
    ("# GPU Portal: one image", "# syntax=docker/dockerfile:1\n# GPU Portal: one image", "offline-build"),
    ("ENV PYTHONDONTWRITEBYTECODE=1", "ENV DATABASE_URL=postgres://u:p@db/x PYTHONDONTWRITEBYTECODE=1", "no-secrets"),
], ids=lambda m: m[2])
def test_one_change_to_the_portal_dockerfile_breaks_its_rule(mutation):
    """The real file, changed in one place, fails the rule that change breaks (and the checker says which)."""
    old, new, rule = mutation
    text = PORTAL.read_text()
    assert old in text, f"the mutation's anchor {old!r} left the Dockerfile"
    problems = dockerfile_problems(text.replace(old, new, 1), "portal")
    assert any(p.startswith(f"[{rule}]") for p in problems), problems


@pytest.mark.parametrize(("argv", "fragment"), [
    (["gunicorn", "gpuportal.nowhere:application"], "not in the project"),
    (["celery", "-A", "gpuportal", "worker", "--concurrency", "four"], "refuses its arguments"),
    (["celery", "-A", "gpuportal", "flower"], "worker|beat"),
    (["celery", "-A", "nosuchapp", "beat"], "not the project's Celery app"),
    (["python", "-m", "nodeagent", "--port", "9400"], "refuses its arguments"),  # --token-file is required
    (["python", "-m", "nosuchmodule"], "no such module"),
    (["python", "manage.py", "liveness", "scheduler"], "refuses its arguments"),
    (["python", "manage.py", "no_such_command"], "has no command"),
    (["uwsgi", "--http", ":8000"], "unknown program"),
])
def test_commands_that_would_not_start_are_refused(argv, fragment):
    problems = command_problems(argv)
    assert problems and fragment in problems[0], problems


def test_the_commands_the_deployment_starts_are_accepted():
    for argv in (["gunicorn", "gpuportal.wsgi:application", "--bind", "0.0.0.0:8000"],
                 ["celery", "-A", "gpuportal", "worker", "-Q", "agents", "--concurrency", "8"],
                 ["celery", "-A", "gpuportal", "beat", "--schedule", "/tmp/celerybeat-schedule"],
                 ["python", "manage.py", "migrate", "--noinput"],
                 ["python", "manage.py", "liveness", "worker"],
                 ["python", "-m", "nodeagent", "--bind", "$(HOST_IP)", "--token-file", "/run/$(NODE_NAME)"]):
        assert command_problems(argv) == [], argv


# --- what the images hold -------------------------------------------------------------------------------------

FIRST_PARTY = {p.name for p in REPO.iterdir() if (p / "__init__.py").is_file()} | {"gpuportal_cli"}


def _copied_paths() -> list[str]:
    """The paths the portal's builder copies into /app (its `for path in …; do cp` loop)."""
    text = " ".join(run_command(i) for s in parse_dockerfile(PORTAL.read_text()) for i in s.all("RUN"))
    found = re.search(r"for path in (.*?); do cp -a", text)
    assert found, "the portal Dockerfile's copy loop was not found"
    return found.group(1).split()


def _imports(paths) -> set[str]:
    """Top-level modules imported anywhere in the Python files under ``paths`` (lazy imports included)."""
    modules = set()
    for root in paths:
        for path in [root] if root.suffix == ".py" else root.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    modules |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules.add(node.module.split(".")[0])
    return modules - set(sys.stdlib_module_names) - {"__future__"}


def _third_party_gaps(imported: set[str], installed: frozenset[str]) -> dict[str, list[str]]:
    providers = importlib.metadata.packages_distributions()
    return {module: providers.get(module, []) for module in sorted(imported - FIRST_PARTY)
            if not {canonicalize_name(d) for d in providers.get(module, [])} & installed}


#: Vendor libraries the node agent imports only when its node has that vendor's devices (``--backend amd``): they
#: come with the vendor's driver stack on such nodes (ROCm installs ``amdsmi``), never with our images.
VENDOR_LIBRARIES = {"amdsmi"}


def test_the_portal_image_holds_every_app_and_every_package_its_code_imports():
    from django.conf import settings

    copied = _copied_paths()
    for path in copied:
        assert (REPO / path).exists(), f"the Dockerfile copies {path}, which is not in the repository"
    local_apps = {app.split(".")[0] for app in settings.INSTALLED_APPS if (REPO / app.split(".")[0]).is_dir()}
    assert local_apps - set(copied) == set(), "INSTALLED_APPS the image would lack"
    assert {"manage.py", "templates", "static"} <= set(copied)
    imported = _imports([REPO / p for p in copied if p.endswith(".py") or (REPO / p / "__init__.py").is_file()])
    assert (imported & FIRST_PARTY) - set(copied) == set(), "first-party packages imported but not copied"
    assert _third_party_gaps(imported - VENDOR_LIBRARIES, runtime_distributions()) == {}, (
        "modules imported by the image's code that no runtime requirement provides (move the pin above "
        f"{TOOLING_MARKER!r} in requirements.txt)")


def test_the_agent_image_needs_nothing_but_nvml():
    imported = _imports([REPO / "nodeagent"])
    assert imported & FIRST_PARTY <= {"nodeagent"}
    stages = parse_dockerfile(AGENT.read_text())
    pins = [r for r in runtime_requirements() if r.name == "nvidia-ml-py"]
    assert len(pins) == 1 and str(pins[0].specifier).startswith("=="), "the agent's wheel is pinned in requirements"
    assert any("nvidia-ml-py==" in i.value for i in stages[0].all("RUN"))
    closure = frozenset({"nvidia-ml-py"})
    assert _third_party_gaps(imported - VENDOR_LIBRARIES, closure) == {}
    assert "amdsmi" in imported  # the AMD backend reads the vendor's own library where the node has it


def test_a_gap_in_the_runtime_requirements_is_found():
    """The import check sees a module no runtime requirement provides (pytest: a tool, below the marker)."""
    assert "pytest" in _third_party_gaps({"pytest", "django"}, runtime_distributions())
    assert "django" not in _third_party_gaps({"pytest", "django"}, runtime_distributions())


def test_runtime_requirements_hold_the_servers_and_no_tooling():
    names = {canonicalize_name(r.name) for r in runtime_requirements()}
    assert {"gunicorn", "celery", "django", "whitenoise", "psycopg"} <= names
    assert not names & {"pytest", "ruff", "playwright", "hypothesis", "schemathesis", "kubernetes-validate"}
    assert all(str(r.specifier).startswith("==") for r in runtime_requirements()), "every runtime pin is exact"
