"""Completion, inspection (Shift-Tab) and ``is_complete`` for cancho cells.

Completion offers keywords, contextual words, builtins and prelude types *visible at the cell's
edition* (an ``edition N;`` line in the cell, else the session's), the session's items, the
directive names after ``%``, and after ``q.`` the members of the module an import binds to
``q``. Inspection shows a builtin's signature with its effect row (``check/builtins.py``) or the
declaration text of a session item. ``is_complete`` balances ``()[]{}`` outside strings,
character literals and comments.
"""

from __future__ import annotations

import re

from ..compiler.check.builtins import BUILTIN_EDITION, PRELUDE_TYPE_EDITION, SIGNATURES, SPLIT_FIELDS
from .directives import REGISTRY
from .session import Session

KEYWORDS = ("fn let var if else while return defer true false struct enum match res val extern "
            "module import pub borrow region as in mut where").split()
CONTEXTUAL = ["edition", "static", "alloc", "alloc_slice"]

SPECIAL_SIGNATURES = {
    "split": "fn split(world: World) -> [] Split   // Split's fields at this edition: {fields}",
    "release": "fn release[C](c: C) -> [] int   // C: any capability, taken by value",
    "narrow": "fn narrow(c: C(p), lit: \"...\", ...) -> [] C(lit)   // Ffi/Fs/Net/Signals/Exec",
    "alloc": "alloc[a](value: T) -> &!a T   // a: an open arena (region a { }), T: val",
    "alloc_slice": "alloc_slice[a](count: int, fill: T) -> &!a [T]   // traps if count < 0; T: val",
}

KEYWORD_HELP = {
    "fn": "fn NAME[&r, T](params) -> [row] RET { ... } — every function writes its effect row and return type",
    "borrow": "borrow x as &r in { ... } / borrow mut x as &!r in { ... } — lend a binding for a block",
    "region": "region a { ... } — an arena; alloc[a](v) and alloc_slice[a](n, fill) allocate in it",
    "edition": "edition N; — first line of a file: the names editions 1..N add (session-wide in a notebook)",
    "defer": "defer E; — run E at every exit of the enclosing block, in reverse order",
    "while": "while COND { ... } — the only loop (no break/continue)",
    "match": "match e { E::V(x) => { ... } _ => { ... } } — exhaustive, variants written qualified",
    "static": "static NAME: [T] { ... } — compile-time data, read-only at run time as &static [T]",
    "extern": "extern fn NAME[&f](ffi: &f Ffi(\"lib\"), ...) -> [ffi(\"lib\")] int; — a C function",
}

_WORD_BEFORE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)?$")
_QUALIFIED_BEFORE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)?$")
_DIRECTIVE_BEFORE = re.compile(r"^\s*(%%?[A-Za-z_]*)$")
_BENCH_NAMES_BEFORE = re.compile(r"^\s*%%?bench\s+(?:[A-Za-z0-9_.:\-]+\s+)*([A-Za-z0-9_.:\-]*)$")
_EDITION = re.compile(r"^\s*edition\s+(\d+)\s*;", re.M)


def cell_edition(code: str, session: Session) -> int:
    m = _EDITION.search(code)
    if m:
        try:
            return max(1, min(8, int(m.group(1))))
        except ValueError:
            pass
    return session.edition


def _names(session: Session, edition: int) -> list[str]:
    names = list(KEYWORDS) + CONTEXTUAL
    names += [n for n, e in BUILTIN_EDITION.items() if e <= edition]
    names += [n for n, e in PRELUDE_TYPE_EDITION.items() if e <= edition]
    names += [name for (mod, name) in session.items if mod == ""]
    names += [q for (mod, q) in session.imports if mod == ""]
    return names


def complete(code: str, cursor_pos: int, session: Session) -> dict:
    before = code[:cursor_pos]
    line = before.rsplit("\n", 1)[-1]
    m = _DIRECTIVE_BEFORE.match(line)
    if m:
        prefix = m.group(1)
        matches = sorted(n for n in REGISTRY if n.startswith(prefix))
        return _reply(matches, cursor_pos - len(prefix), cursor_pos)
    m = _BENCH_NAMES_BEFORE.match(line)
    if m:  # program names after %bench / %%bench
        prefix = m.group(1)
        programs = getattr(session, "programs", None)
        names = programs.names() if programs is not None else []
        return _reply([n for n in names if n.startswith(prefix)], cursor_pos - len(prefix), cursor_pos)
    m = _QUALIFIED_BEFORE.search(before)
    if m:
        qualifier, prefix = m.group(1), m.group(2) or ""
        module = session.module_of_qualifier(qualifier)
        if module is not None:
            members = sorted({name for (mod, name) in session.items if mod == module and name.startswith(prefix)})
            return _reply(members, cursor_pos - len(prefix), cursor_pos)
    m = _WORD_BEFORE.search(before)
    prefix = m.group(1) or "" if m else ""
    if not prefix:
        return _reply([], cursor_pos, cursor_pos)
    local = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code[:cursor_pos - len(prefix)] + code[cursor_pos:]))
    pool = set(_names(session, cell_edition(code, session))) | local
    matches = sorted(n for n in pool if n.startswith(prefix) and n != prefix)
    return _reply(matches, cursor_pos - len(prefix), cursor_pos)


def _reply(matches: list[str], start: int, end: int) -> dict:
    return {"matches": matches, "cursor_start": start, "cursor_end": end, "metadata": {}, "status": "ok"}


def word_at(code: str, cursor_pos: int) -> tuple[str | None, str]:
    """(qualifier, name) of the identifier under or just before the cursor."""
    pos = min(max(cursor_pos, 0), len(code))
    start = pos
    while start > 0 and (code[start - 1].isalnum() or code[start - 1] == "_"):
        start -= 1
    end = pos
    while end < len(code) and (code[end].isalnum() or code[end] == "_"):
        end += 1
    name = code[start:end]
    qualifier = None
    if start > 1 and code[start - 1] == ".":
        q = _WORD_BEFORE.search(code[:start - 1])
        qualifier = q.group(1) if q else None
    return qualifier, name


def describe(qualifier: str | None, name: str, session: Session, edition: int) -> str | None:
    """The text Shift-Tab shows for a name, or None."""
    if not name:
        return None
    if qualifier is not None:
        module = session.module_of_qualifier(qualifier)
        if module is not None:
            it = session.find(name, module)
            if it is not None:
                return f"{it.header()}\n\n(module {module}, defined in {it.source.path})"
        return None
    it = session.find(name)
    if it is not None:
        return f"{it.header()}\n\n(defined in {it.source.path}, edition {it.edition})"
    if name in SIGNATURES:
        since = BUILTIN_EDITION.get(name, 1)
        note = "" if since <= edition else f"   (not visible: needs edition {since}, the cell is at {edition})"
        return f"{SIGNATURES[name]}\n\nbuiltin since edition {since}{note}"
    if name in SPECIAL_SIGNATURES:
        text = SPECIAL_SIGNATURES[name]
        if name == "split":
            fields = ", ".join(f"{f}: {t}" for f, t in SPLIT_FIELDS[max(1, min(8, edition))])
            text = text.format(fields="{ " + fields + " }")
        return text + "\n\nbuiltin (checked at the call site)"
    if name in BUILTIN_EDITION:
        return f"builtin `{name}`, since edition {BUILTIN_EDITION[name]} (not supported by this compiler yet)"
    if name in PRELUDE_TYPE_EDITION:
        return f"prelude type `{name}`, since edition {PRELUDE_TYPE_EDITION[name]}"
    if name in KEYWORD_HELP:
        return KEYWORD_HELP[name]
    if name in KEYWORDS:
        return f"keyword `{name}`"
    return None


def inspect(code: str, cursor_pos: int, session: Session) -> dict:
    qualifier, name = word_at(code, cursor_pos)
    text = describe(qualifier, name, session, cell_edition(code, session))
    if text is None:
        return {"status": "ok", "found": False, "data": {}, "metadata": {}}
    return {"status": "ok", "found": True, "data": {"text/plain": text}, "metadata": {}}


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
                m = re.match(r"'(\\.|[^'\\])'", raw[i:])
                if m:
                    i += m.end()
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
