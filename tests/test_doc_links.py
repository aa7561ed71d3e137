"""No dangling references: every document a user is sent to exists in this repository.

Scanned: every Markdown file of the repository, the notebooks' markdown cells, and the strings a
user reads (the CLI's usage text and messages, the compiler's messages, the kernel's directive
help from `REGISTRY` and every other string literal in the kernel's modules; docstrings and
comments are for developers and are not scanned). Three kinds of reference:

* a relative Markdown link or image, `[text](target)`: the target must exist, relative to the
  document it is in;
* a document name, `name.md`: it must exist relative to the document it is in or to the
  repository's root (a string in code resolves against the root only);
* a section, `§N` or `§N.M`: the document it refers to (the `.md` named just before it, else the
  document it is in) must have a heading numbered so. A string in code has no sections of its
  own, so a bare `§` there is dangling, and so is `runtime.md §7` while no `runtime.md` exists
  here.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

import mistune
import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "cancho_kernel"

# Never scanned: build output, caches, other projects' files.
SKIP_DIRS = {".git", "node_modules", "build", "dist", "out", ".venv", ".pytest_cache",
             ".hypothesis", ".ipynb_checkpoints", "__pycache__", "lib"}

URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+|mailto:\S+", re.I)
# A link that leaves the repository: its text names a document elsewhere, e.g.
# `[bulk-io.md §4](https://...)`, so that text is not looked for here.
EXTERNAL_LINK = re.compile(r"\[[^\]\n]*\]\((?:[a-z][a-z0-9+.-]*://|mailto:)[^)\s]*\)", re.I)
TOKEN = re.compile(
    r"(?P<doc>(?<![\w/.-])(?:\.{1,2}/)?\w[\w./-]*\.md)(?![\w-])"
    r"|(?P<sec>§\s?(?P<num>\d+(?:\.\d+)*))")
# What may stand between a document's name and the sections that belong to it.
CONNECTOR = re.compile(r"^(?:[\s`,;()]|\band\b|\bor\b)*$")
HEADING = re.compile(r"^#{1,6}\s+(\d+(?:\.\d+)*)\.?(?:\s|$)", re.M)


@dataclass(frozen=True)
class Text:
    """A piece of text a user reads, and where it lives (None for a string in code)."""

    label: str
    body: str
    document: Path | None = None
    markdown: bool = False


@dataclass(frozen=True)
class Dangling:
    """One reference that leads nowhere."""

    where: str
    reference: str
    why: str

    def __str__(self) -> str:
        return f"{self.where}: {self.reference!r} ({self.why})"


def _is_skipped(path: Path) -> bool:
    return any(part in SKIP_DIRS for part in path.relative_to(REPO).parts[:-1])


def markdown_files() -> list[Path]:
    return sorted(p for p in REPO.rglob("*.md") if not _is_skipped(p))


def user_notebooks() -> list[Path]:
    return sorted((REPO / "notebooks").glob("*.ipynb"))


def _notebook_markdown(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def headings(path: Path) -> set[str]:
    """The section numbers a document's headings carry (`## 7.` and `### 7.2` give 7 and 7.2)."""
    text = _notebook_markdown(path) if path.suffix == ".ipynb" else path.read_text()
    return set(HEADING.findall(text))


def _resolve(name: str, document: Path | None, root: Path) -> Path | None:
    """The file `name` means, seen from `document` or from the root; never outside the root."""
    bases = ([document.parent] if document is not None else []) + [root]
    for base in bases:
        candidate = (base / name).resolve()
        if candidate.exists() and candidate.is_relative_to(root.resolve()):
            return candidate
    return None


def _markdown_links(text: str) -> list[str]:
    """The targets of a Markdown text's links and images (not those shown inside code)."""
    if int(mistune.__version__.split(".")[0]) >= 3:
        tokens = mistune.create_markdown(renderer=None, plugins=["table"])(text)
    else:  # mistune 2
        tokens = mistune.create_markdown(renderer="ast", plugins=["table"])(text)
    found: list[str] = []

    def walk(items) -> None:
        for tok in items:
            if not isinstance(tok, dict):
                continue
            if tok.get("type") in ("link", "image"):
                attrs = tok.get("attrs") or {}
                found.append(attrs.get("url") or tok.get("link") or tok.get("src") or "")
            walk(tok.get("children") or [])

    walk(tokens)
    return found


def dangling(text: Text, root: Path = REPO) -> list[Dangling]:
    """Every reference in ``text`` that does not lead to something under ``root`` (the
    repository)."""
    out: list[Dangling] = []
    if text.markdown:
        for target in _markdown_links(text.body):
            path = target.split("#", 1)[0]
            if not path or URL.match(target) or target.startswith("mailto:"):
                continue
            target_path = (text.document.parent / path).resolve() if text.document else None
            if target_path is None or not target_path.exists() \
                    or not target_path.is_relative_to(root.resolve()):
                out.append(Dangling(text.label, target, "link target does not exist"))
    body = URL.sub(" ", EXTERNAL_LINK.sub(" ", text.body) if text.markdown else text.body)
    context: Path | None = text.document
    context_name = text.document.name if text.document is not None else None
    last_end = 0
    for m in TOKEN.finditer(body):
        gap = body[last_end:m.start()]
        last_end = m.end()
        if m.group("doc"):
            name = m.group("doc")
            context, context_name = _resolve(name, text.document, root), name
            if context is None:
                out.append(Dangling(text.label, name, "no such document in the repository"))
            continue
        if not CONNECTOR.match(gap):  # a section with no document named just before it
            context = text.document
            context_name = text.document.name if text.document is not None else None
        section = m.group("num")
        if context_name is None:
            out.append(Dangling(text.label, m.group("sec"),
                                "a section of no document: a string in code has no sections"))
        elif context is None:
            out.append(Dangling(text.label, f"{context_name} {m.group('sec')}",
                                "the document does not exist"))
        elif context.suffix in (".md", ".ipynb") and section not in headings(context):
            out.append(Dangling(text.label, f"{context_name} {m.group('sec')}",
                                "the document has no heading with that number"))
    once: dict[str, Dangling] = {}  # a link's target is also a name in the text: report it once
    for d in out:
        once.setdefault(d.reference, d)
    return list(once.values())


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def code_strings(path: Path) -> list[Text]:
    """A module's string literals, f-string parts included, docstrings left out."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = _docstring_nodes(tree)
    rel = path.relative_to(REPO)
    return [Text(f"{rel}:{node.lineno}", node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


def _modules(*parts: str) -> list[Path]:
    found: list[Path] = []
    for part in parts:
        p = PACKAGE / part
        found += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return found


CLI_AND_COMPILER = _modules("cli.py", "testing.py", "compiler")
KERNEL = _modules("kernel", "install.py")


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(REPO)) for p in paths]


def _assert_none(found: list[Dangling]) -> None:
    assert not found, "dangling references:\n" + "\n".join(f"  {d}" for d in found)


# ---------------------------------------------------------------------------------------------
# the checker itself


def test_the_checker_finds_what_it_should(tmp_path: Path) -> None:
    doc = REPO / "docs" / "cli.md"
    assert dangling(Text("x", "see runtime.md §7")) == [
        Dangling("x", "runtime.md", "no such document in the repository"),
        Dangling("x", "runtime.md §7", "the document does not exist")]
    assert dangling(Text("x", "See docs/foreign-authority.md.")) == []
    assert [d.why for d in dangling(Text("x", "as §3 says"))] == [
        "a section of no document: a string in code has no sections"]
    assert dangling(Text("x", "[a](authority-report.md#the-json-form)", doc, True)) == []
    assert dangling(Text("x", "[a](missing/page.md)", doc, True)) == [
        Dangling("x", "missing/page.md", "link target does not exist")]
    assert dangling(Text("x", "[a](https://example.org/x.md) and `docs/cli.md`", doc, True)) == []
    assert dangling(Text("x", "[bulk-io.md §4](https://example.org/bulk-io.md)", doc, True)) == []
    inside = dangling(Text("x", "[bulk-io.md §4](bulk-io.md)", doc, True))
    assert [d.reference for d in inside] == ["bulk-io.md", "bulk-io.md §4"]
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## 2. Two\n\n### 2.1 Sub\n")
    assert dangling(Text("p", "see §2, §2.1 and `page.md` §2", page), tmp_path) == []
    assert [d.reference for d in dangling(Text("p", "see §3; `page.md` §4", page), tmp_path)] == [
        "page.md §3", "page.md §4"]
    assert [d.reference for d in dangling(Text("p", "[up](../page.md) `../page.md`", page, True),
                                          tmp_path)] == ["../page.md"]


# ---------------------------------------------------------------------------------------------
# what users read


@pytest.mark.parametrize("path", markdown_files(), ids=_ids(markdown_files()))
def test_markdown_documents(path: Path) -> None:
    rel = path.relative_to(REPO)
    _assert_none(dangling(Text(str(rel), path.read_text(), path, markdown=True)))


@pytest.mark.parametrize("path", user_notebooks(), ids=_ids(user_notebooks()))
def test_notebook_markdown_cells(path: Path) -> None:
    rel = path.relative_to(REPO)
    _assert_none(dangling(Text(str(rel), _notebook_markdown(path), path, markdown=True)))


def test_cli_usage_texts() -> None:
    from cancho_kernel import cli, testing

    _assert_none(dangling(Text("cli.USAGE", cli.USAGE)) + dangling(Text("testing.USAGE",
                                                                       testing.USAGE)))


@pytest.mark.parametrize("path", CLI_AND_COMPILER, ids=_ids(CLI_AND_COMPILER))
def test_cli_and_compiler_messages(path: Path) -> None:
    _assert_none([d for t in code_strings(path) for d in dangling(t)])


def test_kernel_directive_help() -> None:
    from cancho_kernel.kernel import directives

    texts = [Text("%help", directives.help_text())]
    texts += [Text(f"{d.name} usage", d.usage) for d in directives.REGISTRY.values()]
    texts += [Text(f"{d.name} help", d.help) for d in directives.REGISTRY.values()]
    _assert_none([d for t in texts for d in dangling(t)])


@pytest.mark.parametrize("path", KERNEL, ids=_ids(KERNEL))
def test_kernel_messages(path: Path) -> None:
    _assert_none([d for t in code_strings(path) for d in dangling(t)])
