"""The Simplified Chinese catalogue stays complete and consistent.

``makemessages`` runs here on a copy of the catalogue, so a string added to the code or a template without a
translation fails the suite instead of showing English on a Chinese page; the committed ``django.mo`` must
match the ``.po``; every translation keeps the placeholders and tags of its English text; and the terms of
``docs/glossary-zh.md`` are used the same way everywhere.
"""

from __future__ import annotations

import gettext
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import polib
import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.utils import translation

REPO = Path(django_settings.BASE_DIR)
LOCALE_DIR = REPO / "locale"
CATALOGUE = LOCALE_DIR / "zh_Hans" / "LC_MESSAGES" / "django.po"
GLOSSARY = REPO / "docs" / "glossary-zh.md"
#: The command-line client's own catalogue (standard gettext, domain gpuportal_cli): Simplified Chinese is
#: found under zh_CN, the name a POSIX locale gives it (LANG=zh_CN.UTF-8).
CLI_PACKAGE = REPO / "cli" / "gpuportal_cli"
CLI_CATALOGUE = CLI_PACKAGE / "locale" / "zh_CN" / "LC_MESSAGES" / "gpuportal_cli.po"

#: What makemessages leaves out, as in docs/glossary-zh.md: the virtualenv, packages that are not the portal
#: (the CLI has its own catalogue, the fake API server and the node agent print nothing a portal user reads),
#: the tests, deployment files and build output.
MAKEMESSAGES_IGNORE = [".venv", "cli", "tests", "kubefake", "nodeagent", "deploy", "staticfiles", "var"]

#: Entries whose English text xgettext mistakes for a format string ("% u" of "(% utilisation)" reads as a
#: directive): the catalogue marks them no-python-format, which msgmerge then flags fuzzy. Remove an entry once
#: its source line carries a "# xgettext:no-python-format" comment (the test says when).
KNOWN_FALSE_FORMAT_FLAGS: set[str] = set()  # msgids xgettext wrongly flags as python-format (none left)

#: (first English form of a glossary row, msgid) -> why that msgid uses the English word in another sense.
GLOSSARY_EXCEPTIONS = {
    ("request", "The request body is larger than %(n)d MiB."): "an HTTP request: 请求",
    ("request", "Refused: this request comes from another site than the workload's."): "an HTTP request: 请求",
    ("request", "Bad request."): "an HTTP request: 请求",
    ("request", "The request was refused."): "an HTTP request: 请求",
    ("request", "The request was refused"): "an HTTP request: 请求",
    ("request", "Server error: the portal could not finish this request. Try again in a minute."):
        "an HTTP request: 请求",
    ("request", "The portal could not finish this request. The error was recorded in the server's log for the "
                "platform admins."): "an HTTP request: 请求",
    ("request", "The browser's request was refused because: %(reason)s"): "an HTTP request: 请求",
    ("request", "This key was used for a different request; use a new key."): "an HTTP request: 请求",
    ("request", "Created at the same moment by another request: %(fields)s must be unique."): "an HTTP request",
    ("request", "Needs %(nodes)d %(gpu_model)s nodes with %(gpus_per_node)d GPUs each, but the largest request "
                "this cluster can ever hold is %(max_nodes)d nodes x %(max_per_node)d GPUs."):
        "a job's resource request (Kubernetes sense): 资源请求",
    ("request", "%(n)d nodes with %(g)d %(model)s GPUs each can never fit: only %(k)d nodes have %(g)d GPUs (the "
                "largest possible request is %(k)d x %(g)d)."): "a job's resource request: 资源请求",
    ("job", "Deleted Kubernetes Job %(ns)s/%(name)s (foreground propagation)."):
        "the Kubernetes object kind Job, named as Kubernetes names it",
    ("job", "Kubernetes Job %(ns)s/%(name)s was already gone."): "the Kubernetes object kind Job",
    ("report", "Jobs report checkpoints to POST /api/jobs/{id}/report/ (see docs/kubernetes.md)."):
        "the verb: a job reports (上报) a checkpoint",
    ("image", "Screenshot: only a PNG or JPEG image (at most %(max)d MB); this file is neither."):
        "a picture file (图片), not a container image",
    ("report", "No readings yet: they appear once the node agents report on its GPUs."):
        "the verb: agents report (上报) readings",
    # the command-line client's catalogue
    ("request", "The portal refused the request (HTTP %(status)s):"): "an HTTP request: 请求",
    ("request", "The portal refused the request (HTTP %(status)s): %(detail)s"): "an HTTP request: 请求",
    ("limit", "%(shown)s of %(count)s jobs; --limit N to see more."): "the option --limit, not a quota limit",
    ("node", "order by a column of the job page (name, status, submitted, start, end, elapsed, wait, exit_code, "
             "gpus, model, node, efficiency, …); --sort=-column for descending; newest first when left out"):
        "a column's key, typed as it is",
}

PY_DIRECTIVE = re.compile(r"%(?:\([^)]*\))?[#0 +\-]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[diouxXeEfFgGcrsa%]")
NAMED_PLACEHOLDER = re.compile(r"%\([^)]*\)")
BRACE_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
HTML_TAG = re.compile(r"</?[A-Za-z][^>]*>")


@pytest.fixture(scope="module", autouse=True)
def gettext_tools():
    """makemessages and these checks run GNU gettext's tools; say which package brings them."""
    missing = [tool for tool in ("xgettext", "msgmerge", "msguniq", "msgattrib", "msgfmt") if not shutil.which(tool)]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: install Debian's gettext package (apt-get install gettext)")


def _entries(po: polib.POFile) -> list[polib.POEntry]:
    return [e for e in po if not e.obsolete]


def _translations(entry: polib.POEntry) -> list[str]:
    return [entry.msgstr_plural[k] for k in sorted(entry.msgstr_plural)] if entry.msgid_plural else [entry.msgstr]


@pytest.fixture(scope="module")
def catalogue() -> polib.POFile:
    return polib.pofile(str(CATALOGUE))


@pytest.fixture(scope="module", params=[CATALOGUE, CLI_CATALOGUE], ids=["portal", "cli"])
def any_catalogue(request) -> tuple[Path, polib.POFile]:
    return request.param, polib.pofile(str(request.param))


def test_the_catalogue_declares_simplified_chinese_with_one_plural_form(catalogue):
    assert catalogue.metadata["Language"] == "zh_Hans"
    assert catalogue.metadata["Content-Type"] == "text/plain; charset=UTF-8"
    assert catalogue.metadata["Plural-Forms"].replace(" ", "") == "nplurals=1;plural=0;"
    assert not catalogue.metadata_is_fuzzy
    with translation.override("en"):
        assert ("zh-hans", "Simplified Chinese") in [(code, str(name)) for code, name in django_settings.LANGUAGES]
    assert LOCALE_DIR in [Path(p) for p in django_settings.LOCALE_PATHS]


def test_makemessages_finds_nothing_untranslated_fuzzy_or_stale(tmp_path, settings, monkeypatch, catalogue):
    """Run makemessages on a copy: the sources are linked into a scratch directory whose ``locale`` is a copy
    of the repository's, so the catalogue in the working tree is never rewritten by the test."""
    scratch = tmp_path / "src"
    scratch.mkdir()
    for entry in REPO.iterdir():
        if entry.name != "locale" and entry.name not in MAKEMESSAGES_IGNORE and not entry.name.startswith("."):
            (scratch / entry.name).symlink_to(entry)
    shutil.copytree(LOCALE_DIR, scratch / "locale")
    settings.LOCALE_PATHS = [scratch / "locale"]
    monkeypatch.chdir(scratch)
    call_command("makemessages", locale=["zh_Hans"], ignore_patterns=list(MAKEMESSAGES_IGNORE), add_location="file",
                 symlinks=True, verbosity=0)
    fresh = polib.pofile(str(scratch / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"))

    untranslated = [e.msgid for e in _entries(fresh) if not all(_translations(e))]
    assert untranslated == [], f"{len(untranslated)} new string(s) without a Chinese translation: {untranslated}"
    fuzzy = [e.msgid for e in _entries(fresh) if "fuzzy" in e.flags and e.msgid not in KNOWN_FALSE_FORMAT_FLAGS]
    assert fuzzy == [], f"changed English text, check the translation and remove 'fuzzy': {fuzzy}"
    no_longer_false = [m for m in KNOWN_FALSE_FORMAT_FLAGS if "fuzzy" not in fresh.find(m).flags]
    assert no_longer_false == [], f"fixed in the code: remove from KNOWN_FALSE_FORMAT_FLAGS: {no_longer_false}"
    stale = [e.msgid for e in fresh if e.obsolete]
    assert stale == [], f"strings the code no longer has: run makemessages (docs/glossary-zh.md): {stale}"
    committed = {(e.msgctxt, e.msgid) for e in _entries(catalogue)}
    assert {(e.msgctxt, e.msgid) for e in _entries(fresh)} == committed


def test_the_cli_catalogue_covers_every_message_of_the_client(tmp_path):
    """xgettext over the client's modules, with the keywords of its i18n module (``_`` is its gettext_)."""
    template = tmp_path / "gpuportal_cli.pot"
    subprocess.run(["xgettext", "--language=Python", "--keyword=_", "--keyword=gettext_", "--keyword=ngettext:1,2",
                    "--from-code=UTF-8", "-o", str(template), *sorted(str(p) for p in CLI_PACKAGE.glob("*.py"))],
                   check=True)
    wanted = {(e.msgctxt, e.msgid) for e in polib.pofile(str(template))}
    catalogue = polib.pofile(str(CLI_CATALOGUE))
    translated = {(e.msgctxt, e.msgid) for e in _entries(catalogue) if all(_translations(e)) and "fuzzy" not in e.flags}
    assert len(wanted) > 150
    assert wanted - translated == set(), "new messages of the client without a Chinese translation"
    assert translated - wanted == set(), "messages the client no longer has: remove them from its catalogue"
    assert catalogue.metadata["Plural-Forms"].replace(" ", "") == "nplurals=1;plural=0;"


def test_the_committed_mo_passes_msgfmt_and_matches_the_po(any_catalogue, tmp_path):
    path, catalogue = any_catalogue
    checked = subprocess.run(["msgfmt", "--check", "-o", str(tmp_path / "compiled.mo"), str(path)],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    with path.with_suffix(".mo").open("rb") as compiled:
        translations = gettext.GNUTranslations(compiled)
    stale = []
    for entry in _entries(catalogue):
        if entry.msgid_plural:
            shown = translations.ngettext(entry.msgid, entry.msgid_plural, 2)
        elif entry.msgctxt:
            shown = translations.pgettext(entry.msgctxt, entry.msgid)
        else:
            shown = translations.gettext(entry.msgid)
        if shown != _translations(entry)[0]:
            stale.append(entry.msgid)
    assert stale == [], f"the .mo is older than the .po: compile it (docs/glossary-zh.md): {stale}"


def _placeholders(text: str, flags: list[str]) -> Counter:
    found = Counter(NAMED_PLACEHOLDER.findall(text)) + Counter(HTML_TAG.findall(text))
    if "python-format" in flags:
        found += Counter("directive " + d for d in PY_DIRECTIVE.findall(text))
    if "python-brace-format" in flags:
        found += Counter(BRACE_PLACEHOLDER.findall(text))
    return found


def test_every_translation_keeps_the_placeholders_and_tags_of_its_english_text(any_catalogue):
    _path, catalogue = any_catalogue
    broken = []
    for entry in _entries(catalogue):
        # one Chinese form serves every count, so it carries the placeholders of the plural English text
        expected = _placeholders(entry.msgid_plural or entry.msgid, entry.flags)
        for text in _translations(entry):
            if _placeholders(text, entry.flags) != expected:
                broken.append((entry.msgid, text))
    assert broken == []
    assert sum(1 for e in _entries(catalogue) if "python-format" in e.flags) > 50  # the check saw real cases


def _glossary() -> list[tuple[list[str], str]]:
    """(English forms, Chinese term) of each row of the glossary's table."""
    text = GLOSSARY.read_text(encoding="utf-8")
    start = text.index("## Terms")
    table = text[start:text.index("\n## ", start + 1)]  # up to the next section (words with several senses)
    rows = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("English", "") and not set(cells[0]) <= set("-"):
            rows.append(([form.strip() for form in cells[0].split(" / ")], cells[1]))
    return rows


def _form_pattern(form: str) -> re.Pattern:
    """A whole-word match: not inside an identifier, a path or an environment variable; "fair share" also
    matches across a hyphen or a line of spaces."""
    words = r"[\s-]+".join(re.escape(word) for word in form.split())
    return re.compile(rf"(?<![\w/.$]){words}(?![\w/])", re.IGNORECASE)


def _terms_used(msgid: str, forms: list[tuple[str, re.Pattern, int]]) -> set[int]:
    """Rows whose term the msgid uses; a longer term wins over a shorter one inside it, and placeholder names
    (``%(nodes)s``) are not words."""
    taken = [False] * len(msgid)
    for placeholder in NAMED_PLACEHOLDER.finditer(msgid):
        taken[placeholder.start():placeholder.end()] = [True] * (placeholder.end() - placeholder.start())
    used = set()
    for _, pattern, row in forms:
        for match in pattern.finditer(msgid):
            if not any(taken[match.start():match.end()]):
                used.add(row)
                taken[match.start():match.end()] = [True] * (match.end() - match.start())
    return used


def test_glossary_terms_are_translated_the_same_way_everywhere(catalogue):
    """In the portal's catalogue and in the command-line client's."""
    rows = _glossary()
    assert len(rows) >= 40 and ["job", "jobs"] in [forms for forms, _ in rows]
    required = {"quota": "配额", "queue position": "排队位置", "wait reason": "等待原因", "preempt": "抢占",
                "reservation": "预约", "approval": "审批", "audit": "审计", "metering": "计量"}
    assert {forms[0]: chinese for forms, chinese in rows if forms[0] in required} == required
    forms = sorted(((form, _form_pattern(form), row) for row, (row_forms, _) in enumerate(rows)
                    for form in row_forms), key=lambda f: -len(f[0]))
    inconsistent, excepted = [], set()
    for entry in _entries(catalogue) + _entries(polib.pofile(str(CLI_CATALOGUE))):
        for row in _terms_used(entry.msgid, forms):
            english, chinese = rows[row][0][0], rows[row][1]
            if all(chinese in t for t in _translations(entry)):
                continue
            if (english, entry.msgid) in GLOSSARY_EXCEPTIONS:
                excepted.add((english, entry.msgid))
            else:
                inconsistent.append(f"{english} -> {chinese}: {entry.msgid!r} -> {_translations(entry)[0]!r}")
    assert inconsistent == [], "\n".join(inconsistent)
    assert excepted == set(GLOSSARY_EXCEPTIONS), f"exceptions no longer needed: {set(GLOSSARY_EXCEPTIONS) - excepted}"
