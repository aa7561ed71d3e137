"""Completion, inspection (Shift-Tab) and ``is_complete`` for cancho cells.

Every name a cell can use is a :class:`~cancho_kernel.compiler.symbols.Symbol` (signature with its
effect row, where it is defined, its doc comment): the cell's own declarations, the session's
items, builtins and prelude types at the cell's edition (an ``edition N;`` line in the cell, else
the session's), keywords, and through a module qualifier (``io.write_all``) the public items of a
std or session module imported by the session or by an ``import`` line above the cursor.

* Completion offers, after ``q.``, the members of the module ``q`` binds; after ``E::`` the
  variants of the enum ``E``; after ``import `` module names; after ``%`` directive names; after
  ``%bench`` program names; otherwise every visible name starting with the word typed (plus the
  cell's other words). Each match carries its kind for JupyterLab
  (``metadata._jupyter_types_experimental``).
* Inspection shows the name under or just before the cursor; with the cursor right after a call's
  ``(`` (or among its arguments) it shows the callee of the innermost open call.
* ``is_complete`` balances ``()[]{}`` outside strings, character literals and comments.

Bounded work: what the cursor sits on (the word, its qualifier, the innermost open call) is read
from at most ``WINDOW`` characters on each side of the cursor, so a word or line of any length
costs the same; a word longer than the window is longer than every name and completes to
nothing. The scans over the whole cell (edition, module, imports, declared words) are single
regex passes whose patterns cannot backtrack across lines, so a cell costs linear time.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

from ..compiler import api, ast
from ..compiler.check.builtins import BUILTIN_EDITION, PRELUDE_TYPE_EDITION
from ..compiler.check.typetable import PRELUDE_DECLS
from ..compiler.source import SourceFile
from ..compiler.symbols import (CONTEXTUAL_WORDS, DECL_KIND, FORMS, KEYWORD_WORDS, StdSymbols, Symbol, SymbolKind,
                                builtin_symbol, clamp_edition, decl_symbol, declaration_text, doc_comment,
                                keyword_symbol, prelude_symbol)
from .directives import REGISTRY
from .session import Session

WINDOW = 4096  # characters on each side of the cursor that the cursor analysis reads

_IDENT_CHARS = frozenset(string.ascii_letters + string.digits + "_")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = rf"{_IDENT}(?:\.{_IDENT})*"

# Whole-cell scans: every pattern starts at a line start and uses [ \t], never \s, so no match
# attempt can run past its own line (a cell of blank lines stays linear).
_EDITION = re.compile(r"^[ \t]*edition[ \t]+(\d{1,18})[ \t]*;", re.M)
_MODULE = re.compile(rf"^[ \t]*module[ \t]+({_DOTTED})[ \t]*;", re.M)
_IMPORT = re.compile(rf"^[ \t]*import[ \t]+({_DOTTED})(?:[ \t]+as[ \t]+({_IDENT}))?[ \t]*;", re.M)
_DECLARED = re.compile(
    rf"^[ \t]*(?:pub[ \t]+)?(extern[ \t]+fn|fn|(?:(?:res|val)[ \t]+)?(?:struct|enum)|static)[ \t]+({_IDENT})", re.M)
_WORD = re.compile(_IDENT)

# Cursor-line contexts (the line is at most WINDOW characters).
_DIRECTIVE_BEFORE = re.compile(r"^[ \t]*(%%?[A-Za-z_]*)$")
_BENCH_NAMES_BEFORE = re.compile(r"^[ \t]*%%?bench[ \t]+(?:[A-Za-z0-9_.:\-]+[ \t]+)*([A-Za-z0-9_.:\-]*)$")
_IMPORT_BEFORE = re.compile(r"^[ \t]*import[ \t]+([A-Za-z0-9_.]*)$")
_CHAR_LITERAL = re.compile(r"'(\\.|[^'\\])'")

DECLARED_KIND = {"fn": SymbolKind.FN, "extern fn": SymbolKind.EXTERN, "struct": SymbolKind.STRUCT,
                 "enum": SymbolKind.ENUM, "static": SymbolKind.STATIC}
DIRECTIVE_TYPE = "magic"
PROGRAM_TYPE = "instance"
VARIANT_TYPE = "property"
WORD_TYPE = "text"


# -- the text around the cursor --------------------------------------------------------------------


@dataclass(frozen=True)
class Near:
    """The text around the cursor, at most ``WINDOW`` characters on each side."""

    before: str
    after: str
    before_clipped: bool    # the window starts after the cell's start
    after_clipped: bool     # the window ends before the cell's end

    @classmethod
    def at(cls, code: str, pos: int) -> "Near":
        lo, hi = max(0, pos - WINDOW), min(len(code), pos + WINDOW)
        return cls(code[lo:pos], code[pos:hi], lo > 0, hi < len(code))

    def line_before(self) -> str | None:
        """The cursor's line up to the cursor, or None when it is longer than the window."""
        i = self.before.rfind("\n")
        if i < 0 and self.before_clipped:
            return None
        return self.before[i + 1:]

    def line_after(self) -> str:
        i = self.after.find("\n")
        return self.after if i < 0 else self.after[:i]


def _ident_start(text: str, end: int) -> int:
    """Start of the run of identifier characters that ends at ``end``."""
    i = end
    while i > 0 and text[i - 1] in _IDENT_CHARS:
        i -= 1
    return i


def _ident_end(text: str, start: int) -> int:
    i = start
    while i < len(text) and text[i] in _IDENT_CHARS:
        i += 1
    return i


@dataclass(frozen=True)
class Ref:
    """A name as written at the cursor: ``name``, ``q.name`` or ``E::name``."""

    name: str
    qualifier: str | None = None    # `q` in `q.name`: a module qualifier (or a value's field)
    enum: str | None = None         # `E` in `E::name`


def _qualified(before: str, start: int, clipped: bool, name: str) -> Ref | None:
    """The reference whose last name starts at ``before[start]``: looks for `q.` or `E::` in front."""
    if start >= 1 and before[start - 1] == "." and not before.endswith("..", 0, start):
        q_start = _ident_start(before, start - 1)
        if q_start == 0 and clipped:
            return None
        if q_start < start - 1:
            return Ref(name, qualifier=before[q_start:start - 1])
    if start >= 2 and before[start - 2:start] == "::":
        e_start = _ident_start(before, start - 2)
        if e_start == 0 and clipped:
            return None
        if e_start < start - 2:
            return Ref(name, enum=before[e_start:start - 2])
    return Ref(name)


@dataclass(frozen=True)
class WordAt:
    """The word under or just before the cursor; ``typed`` is its part before the cursor."""

    ref: Ref
    typed: str


def word_at(near: Near) -> WordAt | None:
    """The word at the cursor, or None when it (or its qualifier) is longer than the window."""
    start = _ident_start(near.before, len(near.before))
    if start == 0 and near.before_clipped:
        return None
    end = _ident_end(near.after, 0)
    if end == len(near.after) and near.after_clipped:
        return None
    typed = near.before[start:]
    ref = _qualified(near.before, start, near.before_clipped, typed + near.after[:end])
    return WordAt(ref, typed) if ref is not None else None


def open_call(near: Near) -> Ref | None:
    """The callee of the innermost call still open at the cursor (`f(a, |` gives `f`), or None
    when the innermost open bracket is not a call's ``(``."""
    text = near.before
    # Start at a line start when the window holds one: strings and comments never span lines.
    # A line longer than the window is read from the window's start (best effort).
    i = text.find("\n") + 1 if near.before_clipped else 0
    opened: list[int] = []
    n = len(text)
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            nl = text.find("\n", i)
            if nl < 0:
                return None  # the cursor is in a comment
            i = nl + 1
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c == "'":
            m = _CHAR_LITERAL.match(text, i)
            i = m.end() if m else i + 1
            continue
        if c in "([{":
            opened.append(i)
        elif c in ")]}" and opened:
            opened.pop()
        i += 1
    if not opened or text[opened[-1]] != "(":
        return None
    j = opened[-1]
    while j > 0 and text[j - 1] in " \t\n":
        j -= 1
    if j > 0 and text[j - 1] == "]":  # explicit arguments: `alloc[a](`, `f[&r](`
        depth = 0
        while j > 0:
            j -= 1
            depth += {"]": 1, "[": -1}.get(text[j], 0)
            if depth == 0:
                break
        if depth != 0:
            return None
    start = _ident_start(text, j)
    if start == j or text[start].isdigit():
        return None
    return _qualified(text, start, near.before_clipped, text[start:j])


# -- what the cell says about itself ---------------------------------------------------------------


def cell_edition(code: str, session: Session) -> int:
    """The cell's ``edition N;`` (clamped to the editions there are), else the session's."""
    m = _EDITION.search(code)
    if m:
        return clamp_edition(int(m.group(1)))
    return session.edition


@dataclass(frozen=True)
class CellFacts:
    """What the cell's text says: its edition, its module, the imports above the cursor."""

    edition: int
    module: str
    imports: dict[str, str]  # qualifier -> module


def cell_facts(code: str, pos: int, session: Session) -> CellFacts:
    m = _MODULE.search(code)
    imports = {(m_.group(2) or m_.group(1).rsplit(".", 1)[-1]): m_.group(1)
               for m_ in _IMPORT.finditer(code, 0, pos)}
    return CellFacts(cell_edition(code, session), m.group(1) if m else "", imports)


def _program_text(code: str) -> str:
    """The cell with its directive lines blanked, so line numbers stay the cell's."""
    lines = code.split("\n")
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("%"):
            break
        lines[i] = ""
    return "\n".join(lines)


# -- the names a cell can use ------------------------------------------------------------------------


class Names:
    """Every name the cell can use at the cursor, as symbols (see the module docstring)."""

    def __init__(self, code: str, pos: int, session: Session, std: StdSymbols) -> None:
        self.code = code
        self.session = session
        self.std = std
        self.facts = cell_facts(code, pos, session)
        self._cell_items: dict[str, ast.Item] | None = None

    @property
    def edition(self) -> int:
        return self.facts.edition

    # modules

    def aliases(self) -> dict[str, str]:
        """Qualifier -> module, for the session's imports into the cell's module and the cell's own."""
        found = {q: imp.node.dotted for (mod, q), imp in self.session.imports.items() if mod == self.facts.module}
        found.update(self.facts.imports)
        return found

    def module_of(self, qualifier: str) -> str | None:
        return self.aliases().get(qualifier)

    def session_modules(self) -> set[str]:
        return {it.module for it in self.session.items.values() if it.module}

    def members(self, module: str) -> dict[str, Symbol]:
        """The items ``q.name`` can reach in ``module``: a session module's, else a std module's."""
        own = {name: decl_symbol(it.decl, module) for (mod, name), it in self.session.items.items() if mod == module}
        if own:
            return {n: s for n, s in own.items() if s.public or module == self.facts.module}
        if module.startswith("std."):
            return self.std.members(module)
        return {}

    def module_symbol(self, qualifier: str, module: str) -> Symbol:
        alias = "" if qualifier == module.rsplit(".", 1)[-1] else f" as {qualifier}"
        std = self.std.module(module) if module.startswith("std.") and module not in self.session_modules() else None
        where = std.path if std is not None else "defined in the session's cells"
        return Symbol(qualifier, SymbolKind.MODULE, f"import {module}{alias};", where,
                      std.doc if std is not None else (), module)

    # the cell's own declarations

    def cell_decls(self) -> dict[str, ast.Item]:
        """The cell's declarations by name when the cell parses (parsed once), else none."""
        if self._cell_items is None:
            parsed, diags = api.parse_source(SourceFile("this cell", _program_text(self.code)))
            self._cell_items = {} if parsed is None or diags else {d.name.name: d for d in parsed.items}
        return self._cell_items

    def cell_symbol(self, name: str) -> Symbol | None:
        """A declaration written in this cell: parsed when the cell parses, else its header line."""
        found = next((m for m in _DECLARED.finditer(self.code) if m.group(2) == name), None)
        if found is None:
            return None
        decl = self.cell_decls().get(name)
        if decl is not None:
            return decl_symbol(decl, self.facts.module)
        line_end = self.code.find("\n", found.start(1))
        header = self.code[found.start(1):line_end if line_end >= 0 else len(self.code)]
        header = " ".join(re.split(r"[{;]", header, maxsplit=1)[0].split())
        line = self.code.count("\n", 0, found.start(1)) + 1
        return Symbol(name, _declared_kind(found), header, f"this cell:{line}",
                      doc_comment(self.code, found.start(1)), self.facts.module)

    # lookups

    def session_symbol(self, name: str) -> Symbol | None:
        it = self.session.find(name, self.facts.module)
        return decl_symbol(it.decl, it.module) if it is not None else None

    def lookup(self, name: str) -> Symbol | None:
        """A plain name: the cell's or session's item, a builtin or prelude type the cell's edition
        sees, a keyword, a module alias; then builtins and types of later editions (with a note)."""
        if not name:
            return None
        for find in (self.cell_symbol, self.session_symbol):
            sym = find(name)
            if sym is not None:
                return sym
        builtin = builtin_symbol(name, self.edition)
        prelude = prelude_symbol(name, self.edition)
        for sym in (builtin, prelude):
            if sym is not None and sym.visible:
                return sym
        keyword = keyword_symbol(name)
        if keyword is not None:
            return keyword
        module = self.module_of(name)
        if module is not None:
            return self.module_symbol(name, module)
        return builtin or prelude

    def resolve(self, ref: Ref) -> Symbol | None:
        if ref.qualifier is not None:
            module = self.module_of(ref.qualifier)
            return self.members(module).get(ref.name) if module is not None else None
        if ref.enum is not None:
            sym = self.lookup(ref.enum)
            return sym if sym is not None and sym.kind in (SymbolKind.ENUM, SymbolKind.PRELUDE_TYPE) else None
        return self.lookup(ref.name)

    def variants(self, enum: str) -> list[tuple[str, str]] | None:
        """(variant, its written form) of the enum named ``enum``, or None when it is no enum."""
        decl = self.cell_decls().get(enum) if self.cell_symbol(enum) is not None else None
        if decl is None:
            it = self.session.find(enum, self.facts.module)
            decl = it.decl if it is not None else None
        if isinstance(decl, ast.EnumDecl):
            src = decl.span.source.text
            return [(v.name.name, " ".join(src[v.span.start:v.span.end].split())) for v in decl.variants]
        prelude = PRELUDE_DECLS.get("::" + enum)
        if prelude is not None and PRELUDE_TYPE_EDITION.get(enum, 1) <= self.edition:
            return [(v, v + (f"({', '.join(map(str, p))})" if p else "")) for v, p in prelude.variants]
        return None

    def candidates(self) -> dict[str, tuple[str, str]]:
        """Every plain name visible here: name -> (Jupyter type, signature), the most specific
        meaning of a name winning (an item over a word of the cell)."""
        out: dict[str, tuple[str, str]] = {}
        for (mod, name), it in self.session.items.items():
            if mod == self.facts.module:
                out.setdefault(name, (DECL_KIND[type(it.decl)].jupyter_type, declaration_text(it.decl)))
        for m in _DECLARED.finditer(self.code):
            out.setdefault(m.group(2), (_declared_kind(m).jupyter_type, ""))
        for name, since in BUILTIN_EDITION.items():
            if since <= self.edition:
                sym = builtin_symbol(name, self.edition)
                out.setdefault(name, (SymbolKind.BUILTIN.jupyter_type, sym.signature if sym else ""))
        for name in FORMS:
            sym = builtin_symbol(name, self.edition)
            out.setdefault(name, (SymbolKind.FORM.jupyter_type, sym.signature if sym else ""))
        for name, since in PRELUDE_TYPE_EDITION.items():
            if since <= self.edition:
                sym = prelude_symbol(name, self.edition)
                out.setdefault(name, (sym.kind.jupyter_type if sym else "class", sym.signature if sym else ""))
        for q, module in self.aliases().items():
            out.setdefault(q, (SymbolKind.MODULE.jupyter_type, f"import {module}"))
        for word in KEYWORD_WORDS + CONTEXTUAL_WORDS:
            out.setdefault(word, (SymbolKind.KEYWORD.jupyter_type, ""))
        return out


def _declared_kind(m: re.Match) -> SymbolKind:
    """The kind a ``_DECLARED`` match declares (`res struct` is a struct, `extern fn` a foreign fn)."""
    words = m.group(1).split()
    return DECLARED_KIND["extern fn" if words[0] == "extern" else words[-1]]


def _std_of(session: Session, std: StdSymbols | None) -> StdSymbols:
    """The std symbol cache: given, else the session's (``session.std_symbols``), else a fresh one."""
    if std is not None:
        return std
    held = getattr(session, "std_symbols", None)
    return held if isinstance(held, StdSymbols) else StdSymbols()


# -- complete_request --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Match:
    text: str
    type: str
    signature: str = ""


def complete(code: str, cursor_pos: int, session: Session, std: StdSymbols | None = None) -> dict:
    """The ``complete_reply`` content for the cursor at ``cursor_pos`` (a character offset)."""
    pos = min(max(cursor_pos, 0), len(code))
    near = Near.at(code, pos)
    line = near.line_before()
    if line is not None:
        m = _DIRECTIVE_BEFORE.match(line)
        if m:
            prefix = m.group(1)
            found = [Match(n, DIRECTIVE_TYPE, REGISTRY[n].usage) for n in REGISTRY if n.startswith(prefix)]
            return _reply(found, pos - len(prefix), pos)
        m = _BENCH_NAMES_BEFORE.match(line)
        if m:  # program names after %bench / %%bench
            prefix = m.group(1)
            programs = getattr(session, "programs", None)
            names = programs.names() if programs is not None else []
            return _reply([Match(n, PROGRAM_TYPE) for n in names if n.startswith(prefix)], pos - len(prefix), pos)
        m = _IMPORT_BEFORE.match(line)
        if m:
            prefix = m.group(1)
            std = _std_of(session, std)
            modules = set(std.module_names()) | {it.module for it in session.items.values() if it.module}
            found = [Match(n, SymbolKind.MODULE.jupyter_type) for n in modules if n.startswith(prefix)]
            return _reply(found, pos - len(prefix), pos)
    word = word_at(near)
    if word is None:  # longer than every name
        return _reply([], pos, pos)
    prefix, ref = word.typed, word.ref
    start = pos - len(prefix)
    names = Names(code, pos, session, _std_of(session, std))
    if ref.qualifier is not None:
        module = names.module_of(ref.qualifier)
        if module is not None:
            found = [Match(n, s.kind.jupyter_type, s.signature) for n, s in names.members(module).items()
                     if n.startswith(prefix)]
            return _reply(found, start, pos)
    if ref.enum is not None:
        variants = names.variants(ref.enum)
        if variants is not None:
            return _reply([Match(v, VARIANT_TYPE, text) for v, text in variants if v.startswith(prefix)], start, pos)
    if not prefix:
        return _reply([], pos, pos)
    pool = names.candidates()
    found = [Match(n, t, sig) for n, (t, sig) in pool.items() if n.startswith(prefix) and n != prefix]
    word_end = pos + len(ref.name) - len(prefix)
    words = set(_WORD.findall(code, 0, start)) | set(_WORD.findall(code, word_end))
    found += [Match(w, WORD_TYPE) for w in words if w.startswith(prefix) and w != prefix and w not in pool]
    return _reply(found, start, pos)


def _reply(found: list[Match], start: int, end: int) -> dict:
    found = sorted(found, key=lambda m: m.text)
    types = [{"start": start, "end": end, "text": m.text, "type": m.type, "signature": m.signature}
             for m in found]
    return {"matches": [m.text for m in found], "cursor_start": start, "cursor_end": end,
            "metadata": {"_jupyter_types_experimental": types}, "status": "ok"}


# -- inspect_request ---------------------------------------------------------------------------------


def symbol_at(code: str, cursor_pos: int, session: Session, std: StdSymbols | None = None) -> Symbol | None:
    """The symbol Shift-Tab shows: the name under or just before the cursor, or the callee of the
    innermost open call (first when the cursor is not inside a name, e.g. right after ``(``)."""
    pos = min(max(cursor_pos, 0), len(code))
    near = Near.at(code, pos)
    names = Names(code, pos, session, _std_of(session, std))
    word = word_at(near)
    callee = open_call(near)
    refs: list[Ref | None]
    if word is not None and word.ref.name and word.typed:
        refs = [word.ref, callee]
    else:
        refs = [callee, word.ref if word is not None else None]
    for ref in refs:
        if ref is not None and not ref.name and ref.qualifier:  # right after `q.`: the module
            ref = Ref(ref.qualifier)
        if ref is not None and ref.name:
            sym = names.resolve(ref)
            if sym is not None:
                return sym
    return None


def _directive_at(near: Near) -> str | None:
    """The directive name under the cursor on a ``%`` line, if any."""
    line = near.line_before()
    if line is None or not line.lstrip().startswith("%"):
        return None
    head = line.lstrip()
    if any(c in " \t" for c in head):
        return None  # the cursor is past the directive name
    name = head + near.line_after().split(" ", 1)[0].split("\t", 1)[0]
    return name if name in REGISTRY else None


def render(sym: Symbol) -> dict[str, str]:
    """text/plain and text/markdown for a symbol: signature, note, doc lines, where it is defined."""
    where = _where(sym)
    plain = [sym.signature]
    if sym.note:
        plain.append(f"({sym.note})")
    if sym.doc:
        plain += ["", *sym.doc]
    plain += ["", where]
    md = ["```cancho", sym.signature, "```"]
    if sym.note:
        md += ["", f"*{sym.note}*"]
    if sym.doc:
        md += ["", "\n".join(sym.doc)]
    md += ["", f"*{where}*"]
    return {"text/plain": "\n".join(plain), "text/markdown": "\n".join(md)}


def _where(sym: Symbol) -> str:
    if sym.kind in (SymbolKind.FN, SymbolKind.EXTERN, SymbolKind.STRUCT, SymbolKind.ENUM, SymbolKind.STATIC):
        module = f" (module {sym.module})" if sym.module else ""
        return f"{sym.kind.value} `{sym.name}`, defined at {sym.origin}{module}"
    if sym.kind is SymbolKind.MODULE:
        return f"module {sym.module}, {sym.origin}"
    return sym.origin


def inspect(code: str, cursor_pos: int, session: Session, std: StdSymbols | None = None) -> dict:
    """The ``inspect_reply`` content for the cursor at ``cursor_pos``."""
    pos = min(max(cursor_pos, 0), len(code))
    directive = _directive_at(Near.at(code, pos))
    if directive is not None:
        d = REGISTRY[directive]
        text = f"{d.usage}\n\n{d.help}"
        return {"status": "ok", "found": True, "metadata": {},
                "data": {"text/plain": text, "text/markdown": f"`{d.usage}`\n\n{d.help}"}}
    sym = symbol_at(code, pos, session, std)
    if sym is None:
        return {"status": "ok", "found": False, "data": {}, "metadata": {}}
    return {"status": "ok", "found": True, "data": render(sym), "metadata": {}}


# -- is_complete_request -----------------------------------------------------------------------------

_CLOSE = {")": "(", "]": "[", "}": "{"}


def is_complete(code: str) -> dict:
    """``complete`` when brackets balance, ``incomplete`` (with an indent) while some are open,
    ``invalid`` for a closer without its opener or a string left open at the end of a line."""
    stack: list[str] = []
    lines = code.split("\n")
    for raw in lines:
        if raw.lstrip().startswith("%") and not stack:
            continue
        i = 0
        while i < len(raw):
            c = raw[i]
            if c == "/" and raw.startswith("//", i):
                break
            if c == '"':
                j = i + 1
                while j < len(raw) and raw[j] != '"':
                    j += 2 if raw[j] == "\\" else 1
                if j >= len(raw):
                    return {"status": "invalid"}
                i = j + 1
                continue
            if c == "'":
                m = _CHAR_LITERAL.match(raw, i)
                if m:
                    i = m.end()
                    continue
            if c in "([{":
                stack.append(c)
            elif c in _CLOSE:
                if not stack or stack[-1] != _CLOSE[c]:
                    return {"status": "invalid"}
                stack.pop()
            i += 1
    if stack:
        return {"status": "incomplete", "indent": "    " * len(stack)}
    return {"status": "complete"}
