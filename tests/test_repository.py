"""What the repository's own files promise a newcomer, checked where no linter looks.

- No reference to an issue tracker that is not in the repository ("issue" and a number): such a reference
  means nothing to whoever reads the file, and the history (git log) already says why a line changed.
- No path of a developer's machine: a file that names one works only there.
- The README fits on a few screens; the details live in docs/, one subject per file.
- Every relative link of the README and of docs/ leads to a file, and docs/README.md lists every doc, so
  that moving or renaming a doc cannot leave a reader at a dead end.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: The word "issue" (or "issues"), a space, an optional "#" and a number: a reference to a tracker. An issue
#: that is not followed by its number ("an issue with three nodes") is not one.
ISSUE_REFERENCE = re.compile(r"\b[Ii]ssues?[ -]?#?\d+")

#: Paths that exist only on someone's machine: the workspace, a home directory, root's, a Mac's or a
#: Windows user's. A path must start there (not inside a URL or a longer path).
MACHINE_PATH = re.compile(r"(?<![\w.~/-])(?:/(?:work|root)/|/home/(?P<home>[\w.-]+)/|/Users/[\w.-]+"
                          r"|[A-Za-z]:\\{1,2}Users\\)")

#: Home directories allowed as illustrations: the demo's users (``demo/world.py``), e.g. where the
#: command-line client saves its settings in a documented session, are examples, not someone's machine.
ILLUSTRATIVE_HOMES = {"alice", "bob", "carol", "dave", "erin", "frank"}

#: Not text a person writes: translation catalogues (msgids copy the code), compiled catalogues.
SKIPPED_SUFFIXES = {".po", ".mo"}

README_MAX_LINES = 200

#: [text](target) in Markdown; images too.
MARKDOWN_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _repository_files() -> list[str]:
    """Tracked files, and new ones git does not ignore (so the check holds before a commit too)."""
    try:
        listing = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                 cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"not a git checkout: {error}")
    return sorted({name for name in listing.decode().split("\0") if name})


def _text_files() -> list[tuple[str, str]]:
    """(path, text) of every repository file that is text: binary files (a NUL byte) and catalogues skipped."""
    files = []
    for name in _repository_files():
        path = ROOT / name
        if path.suffix in SKIPPED_SUFFIXES or not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue
        files.append((name, data.decode("utf-8", errors="replace")))
    return files


def _hits(pattern: re.Pattern, allowed=lambda match: False) -> list[str]:
    hits = []
    for name, text in _text_files():
        for number, line in enumerate(text.splitlines(), start=1):
            if any(not allowed(match) for match in pattern.finditer(line)):
                hits.append(f"{name}:{number}: {line.strip()[:160]}")
    return hits


def test_no_issue_tracker_reference():
    hits = _hits(ISSUE_REFERENCE)
    assert hits == [], "say what and why in words; the tracker is not in the repository:\n" + "\n".join(hits)


def test_no_path_of_a_developer_machine():
    hits = _hits(MACHINE_PATH, lambda match: match.group("home") in ILLUSTRATIVE_HOMES)
    assert hits == [], "use a path relative to the repository (or allow-list an example):\n" + "\n".join(hits)


def test_readme_fits_on_a_few_screens():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move the details to docs/")


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _relative_links(document: Path) -> list[str]:
    targets = []
    in_code = False
    for line in document.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for target in MARKDOWN_LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a URL (https:, mailto:) or an anchor in the same page
            targets.append(target.split("#", 1)[0])
    return targets


def test_relative_links_lead_to_files():
    broken = []
    for document in _documents():
        for target in _relative_links(document):
            if not (document.parent / target).exists():
                broken.append(f"{document.relative_to(ROOT)}: {target}")
    assert broken == [], "links to nothing:\n" + "\n".join(broken)


def test_docs_index_lists_every_doc():
    index = ROOT / "docs" / "README.md"
    linked = {(index.parent / target).resolve() for target in _relative_links(index)}
    missing = [doc.name for doc in sorted((ROOT / "docs").glob("*.md")) if doc != index and doc.resolve() not in linked]
    assert missing == [], f"docs/README.md does not link: {missing}"
    assert "docs/README.md" in _relative_links(ROOT / "README.md"), "README.md links the index of docs/"
