"""Splitting a program's LLVM IR into a std *library* part and a *cell* part, for the JIT
worker's split runs (issue 15).

Why: a notebook cell that imports std carries the reachable std functions in its IR (most of
it), and optimising them again after every edit of the cell dominates the run. The library part
(every definition named ``lexs_std.…`` and the private constants only it uses) is compiled once
and kept by its text; an edited cell then optimises only its own part.

How (text level, on the IR codegen emits): the module is cut into top-level entities (type
definitions, globals, declarations, function definitions). A symbol defined on one side and used
on the other keeps its name, loses ``internal``/``private`` linkage in its definition and gets a
declaration on the other side; private ``unnamed_addr`` constants are copied to each side that
uses them. The library part is canonical — definitions sorted by name, its private constants
renamed by order of use — so the same std functions give the same text whatever the cell.

Decision on generic std functions instantiated with user types (``lexs_std.vec.push[Point]``):
they go to the library side like every ``lexs_std.`` definition; the library's text (its cache
key) then includes the user type's layout, so changing that type recompiles the library, and
keeping that type reuses it.

The cell part is then cut per function (:func:`cell_parts`): its data first, then one piece per
strongly connected set of functions, callees first, so that the worker keeps each piece's object
code by its text and an edited function is the only piece compiled again.

Anything this module does not recognise raises :class:`SplitError`; the caller then runs the
whole program as one module, so a split never makes a run fail.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

LIBRARY_PREFIX = "lexs_std."
_CANON_PREFIX = "split.lib.c"

# A string constant `c"..."` (never a quoted name ending in c, like `%"mac"`).
_C_STRING = re.compile(r'(?<![-\w.$"])c"[^"]*"')
_SYMBOL = re.compile(r'@(?:"([^"\\]*)"|([-a-zA-Z$._][-a-zA-Z$._0-9]*))')
_TYPE_REF = re.compile(r'%"([^"\\]*)"')
# (a definition may carry attributes after its parameters: the CPU's AES builtins' target features)
_DEFINE = re.compile(r'^define\s+(?:(internal|private)\s+)?(.*?)@"([^"\\]*)"(\(.*\))(?:\s+[^()]*)?\s*$')
_GLOBAL = re.compile(r'^@"([^"\\]*)"\s*=\s*(.*)$')
_TYPE_DEF = re.compile(r'^%"([^"\\]*)"\s*=\s*type\b')
_DECLARE = re.compile(r'^declare\b.*?@"([^"\\]*)"\(')
_HEADER = ("; ModuleID", "target triple", "target datalayout", "source_filename")


class SplitError(Exception):
    """The IR has a shape the splitter does not handle; run the whole program instead."""


class NothingToSplit(SplitError):
    """The program uses no std function (or has no C ``main``): the whole program is the cell."""


class Kind(enum.Enum):
    """What a top-level entity of the module is."""

    TYPE = "type"
    DECLARE = "declare"  # a function declaration or an external global
    GLOBAL = "global"  # a global definition
    DEFINE = "define"  # a function definition


class Side(enum.Enum):
    LIBRARY = "library"
    CELL = "cell"


@dataclass
class Entity:
    """One top-level item: its kind, symbol (or type) name, text and the symbols it uses."""

    kind: Kind
    name: str
    text: str
    refs: set[str] = field(default_factory=set)
    types: set[str] = field(default_factory=set)
    copyable: bool = False  # a private unnamed_addr constant: copied to each side using it


@dataclass(frozen=True)
class Split:
    """The two parts, and the symbols each defines that the other uses."""

    library: str
    cell: str
    library_exports: frozenset[str]
    cell_exports: frozenset[str]


def _refs(text: str) -> set[str]:
    text = _C_STRING.sub('c""', text)
    return {m.group(1) if m.group(1) is not None else m.group(2) for m in _SYMBOL.finditer(text)}


RefsMemo = dict  # entity text -> (symbols it uses, types it names): the worker's, across runs
MEMO_LIMIT = 8192  # entries; the memo is emptied past it


def parse_entities(ir: str, memo: RefsMemo | None = None) -> tuple[list[str], list[Entity]]:
    """The header lines and the top-level entities of IR text, in order. ``memo`` keeps what
    each entity's text uses, so the same std functions are not scanned again next run."""
    header: list[str] = []
    entities: list[Entity] = []
    lines = ir.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if line.startswith(_HEADER):
            header.append(line)
            i += 1
            continue
        if line.startswith("define"):
            m = _DEFINE.match(line)
            if m is None:
                raise SplitError(f"unrecognised definition: {line[:120]}")
            j = i + 1
            while j < len(lines) and lines[j] != "}":
                j += 1
            if j == len(lines):
                raise SplitError(f"unterminated definition of {m.group(3)}")
            text = "\n".join(lines[i:j + 1])
            entities.append(Entity(Kind.DEFINE, m.group(3), text))
            i = j + 1
            continue
        if line.startswith("declare"):
            m = _DECLARE.match(line)
            if m is None:
                raise SplitError(f"unrecognised declaration: {line[:120]}")
            entities.append(Entity(Kind.DECLARE, m.group(1), line))
        elif (m := _TYPE_DEF.match(line)) is not None:
            entities.append(Entity(Kind.TYPE, m.group(1), line))
        elif (m := _GLOBAL.match(line)) is not None:
            rest = m.group(2)
            if rest.startswith("external "):
                entities.append(Entity(Kind.DECLARE, m.group(1), line))
            elif rest.startswith(("internal global ", "internal constant ")):
                entities.append(Entity(Kind.GLOBAL, m.group(1), line))
            elif rest.startswith("private unnamed_addr constant "):
                entities.append(Entity(Kind.GLOBAL, m.group(1), line, copyable=True))
            else:
                raise SplitError(f"unrecognised global: {line[:120]}")
        else:
            raise SplitError(f"unrecognised top-level line: {line[:120]}")
        i += 1
    for e in entities:
        body = e.text.split("=", 1)[1] if e.kind is Kind.TYPE else e.text
        known = memo.get(e.text) if memo is not None else None
        if known is None:
            known = (frozenset(_refs(e.text) - {e.name} if e.kind is not Kind.TYPE else ()),
                     frozenset(_TYPE_REF.findall(body)))
            if memo is not None:
                if len(memo) >= MEMO_LIMIT:
                    memo.clear()
                memo[e.text] = known
        e.refs, e.types = set(known[0]), set(known[1])
    names = [e.name for e in entities if e.kind is not Kind.TYPE]
    if len(names) != len(set(names)):
        raise SplitError("a symbol is defined twice")
    return header, entities


def _side_of(e: Entity) -> Side | None:
    """Where a definition lives (None: declarations, types and copyable constants)."""
    if e.kind is Kind.DEFINE or (e.kind is Kind.GLOBAL and not e.copyable):
        return Side.LIBRARY if e.name.startswith(LIBRARY_PREFIX) else Side.CELL
    return None


def _declaration(e: Entity) -> str:
    """A declaration of a definition, for the other side."""
    if e.kind is Kind.DEFINE:
        m = _DEFINE.match(e.text.split("\n", 1)[0])
        assert m is not None
        return f'declare {m.group(2)}@"{e.name}"{m.group(4)}'
    m = re.match(r'^@"[^"]*"\s*=\s*internal (global|constant) ', e.text)
    if m is None:
        raise SplitError(f"cannot declare {e.name}")
    rest = e.text[m.end():]
    return f'@"{e.name}" = external {m.group(1)} {_leading_type(rest)}'


def _leading_type(text: str) -> str:
    """The type at the start of ``text`` (balanced brackets, or one token)."""
    if text[:1] in "[{<":
        depth = 0
        for k, ch in enumerate(text):
            if ch in "[{<":
                depth += 1
            elif ch in "]}>":
                depth -= 1
                if depth == 0:
                    return text[:k + 1]
        raise SplitError("unbalanced type")
    if text.startswith("%\""):
        end = text.index('"', 2)
        return text[:end + 1]
    return text.split(" ", 1)[0]


def _exported(e: Entity) -> str:
    """The definition's text with external linkage (it crosses the split)."""
    if e.kind is Kind.DEFINE:
        return re.sub(r"^define\s+(?:internal|private)\s+", "define ", e.text, count=1)
    return re.sub(r'^(@"[^"]*"\s*=\s*)internal ', r"\1", e.text, count=1)


def _rename(text: str, mapping: dict[str, str]) -> str:
    if not mapping:
        return text
    return re.sub(r'@"([^"\\]*)"', lambda m: f'@"{mapping.get(m.group(1), m.group(1))}"', text)


def _canonical(lib_body: list[str], private: set[str], names: set[str]) -> list[str]:
    """The library's texts with its private constants named by order of first use, sorted:
    the same std functions give the same text whatever the cell's constants."""
    mapping: dict[str, str] = {}
    for text in lib_body:
        if not text.startswith("define"):
            continue
        for m in _SYMBOL.finditer(_C_STRING.sub('c""', text)):
            name = m.group(1) if m.group(1) is not None else m.group(2)
            if name in private and name not in mapping:
                mapping[name] = f"{_CANON_PREFIX}{len(mapping)}"
    if any(n.startswith(_CANON_PREFIX) for n in names) or len(mapping) != len(private):
        raise SplitError("cannot name the library's constants")
    return sorted((_rename(t, mapping) for t in lib_body),
                  key=lambda t: (0 if t.startswith("declare") or " = external " in t
                                 else 1 if t.startswith("@") else 2, t))


def split_ir(ir: str, memo: RefsMemo | None = None) -> Split:
    """Cut ``ir`` into a library and a cell part (see the module docstring). Raises
    :class:`SplitError` when there is no library part, no cell part or an unknown shape."""
    header, entities = parse_entities(ir, memo)
    by_name = {e.name: e for e in entities if e.kind is not Kind.TYPE}
    types = {e.name: e for e in entities if e.kind is Kind.TYPE}
    side = {e.name: s for e in entities if (s := _side_of(e)) is not None}
    if Side.LIBRARY not in side.values() or "main" not in side:
        raise NothingToSplit("no std function or no main")
    # Globals std functions use (the program's argument count and vector, read by std.flags)
    # live with the library, so that it never needs the cell's symbols.
    lib_refs = {r for e in entities if side.get(e.name) is Side.LIBRARY for r in e.refs}
    for e in entities:
        if e.kind is Kind.GLOBAL and not e.copyable and e.name in lib_refs:
            side[e.name] = Side.LIBRARY
    # So do the code generator's own helpers std functions call (the AES and GHASH functions of
    # codegen/crypto.py and crypto_hw.py, and what they use), to a fixed point; never `main`
    # or a function of the program's own.
    moved = True
    while moved:
        moved = False
        lib_refs = {r for e in entities if side.get(e.name) is Side.LIBRARY for r in e.refs}
        for e in entities:
            if (side.get(e.name) is Side.CELL and e.name in lib_refs and e.name != "main"
                    and not e.name.startswith("lexs_")):
                side[e.name] = Side.LIBRARY
                moved = True
    for e in entities:
        for r in e.refs:
            if r not in by_name and r in side:
                raise SplitError(f"unknown symbol {r}")

    def closure(own: Side) -> tuple[list[Entity], set[str]]:
        """The entities a side needs, and the other side's definitions it uses."""
        chosen = [e for e in entities if side.get(e.name) is own]
        seen = {e.name for e in chosen}
        foreign: set[str] = set()
        todo = [r for e in chosen for r in e.refs]
        while todo:
            r = todo.pop()
            if r in seen or r not in by_name:
                continue  # intrinsics and libc symbols without a declaration never occur
            seen.add(r)
            e = by_name[r]
            if side.get(r) is not None:
                foreign.add(r)
            else:
                chosen.append(e)
                todo.extend(e.refs)
        return chosen, foreign

    lib_entities, lib_uses = closure(Side.LIBRARY)
    cell_entities, cell_uses = closure(Side.CELL)
    exported = lib_uses | cell_uses

    def body(chosen: list[Entity], uses: set[str]) -> list[str]:
        out = [_exported(e) if e.name in exported and side.get(e.name) is not None else e.text
               for e in chosen]
        out += [_declaration(by_name[u]) for u in sorted(uses)]
        return out

    def type_defs(texts: list[str]) -> list[str]:
        return _type_closure(texts, types, entities)

    order = {Kind.TYPE: 0, Kind.DECLARE: 1, Kind.GLOBAL: 2, Kind.DEFINE: 3}
    lib_entities.sort(key=lambda e: (order[e.kind], e.name))
    lib_body = _canonical(body(lib_entities, lib_uses),
                          {e.name for e in lib_entities if e.copyable}, set(by_name))
    cell_body = body(cell_entities, cell_uses)
    library = "\n".join([*header, *type_defs(lib_body), "", *lib_body, ""])
    cell = "\n".join([*header, *type_defs(cell_body), "", *cell_body, ""])
    return Split(library, cell, frozenset(cell_uses), frozenset(lib_uses))


# -- the cell part cut per function ----------------------------------------------------------------

C_MAIN = "main"
LEXS_MAIN = "lexs_main"


@dataclass(frozen=True)
class Part:
    """One piece of a cell part, compiled and loaded on its own: its IR ``text`` (its cache key:
    the same function with the same declarations is the same text whatever the rest of the
    cell), the symbols it defines for later pieces (``exports``) and the earlier pieces' or the
    library's symbols it uses (``imports``)."""

    text: str
    exports: tuple[str, ...]
    imports: tuple[str, ...]


def _components(names: list[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of the call graph, callees before callers (Tarjan's order),
    iteratively (a long chain of calls must not exhaust Python's stack)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in names:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    n = stack.pop()
                    on_stack.discard(n)
                    comp.append(n)
                    if n == node:
                        break
                out.append(sorted(comp))
    return out


def cell_parts(cell_ir: str, memo: RefsMemo | None = None) -> list[Part]:
    """Cut a cell part (``Split.cell``) into pieces in load order: its data (globals that are
    not copyable constants) first, then one piece per function — functions calling each other
    share one, and the C ``main`` shares ``lexs_main``'s — callees before callers. Every
    definition is exported (later pieces import it); copyable constants are copied into each
    piece using them; declarations stay declarations. Raises :class:`SplitError` on a shape it
    does not know.

    Why: an edited function is then the only piece optimised and compiled again (the others'
    objects are kept by their text), at the price of no inlining between the cell's functions —
    the same price the library part already pays; ``%%bench`` keeps the whole program."""
    header, entities = parse_entities(cell_ir, memo)
    by_name = {e.name: e for e in entities if e.kind is not Kind.TYPE}
    types = {e.name: e for e in entities if e.kind is Kind.TYPE}
    defs = [e.name for e in entities if e.kind is Kind.DEFINE]
    data = [e.name for e in entities if e.kind is Kind.GLOBAL and not e.copyable]
    if C_MAIN not in defs:
        raise SplitError("the cell part has no C main")
    edges = {d: {r for r in by_name[d].refs if r in by_name and by_name[r].kind is Kind.DEFINE} for d in defs}
    if LEXS_MAIN in edges:
        edges[LEXS_MAIN].add(C_MAIN)  # the entry and its wrapper: one piece
    components = _components(defs, edges)
    users: dict[str, set[int]] = {d: set() for d in data}
    for i, comp in enumerate(components):
        for n in comp:
            for r in by_name[n].refs:
                if r in users:
                    users[r].add(i)
    shared = [d for d in data if len(users[d]) != 1]
    for d in data:
        if len(users[d]) == 1:
            components[next(iter(users[d]))].append(d)  # its only user's piece defines it
    groups = ([shared] if shared else []) + components
    placed: set[str] = set()
    parts: list[Part] = []
    for group in groups:
        own = set(group)
        chosen = [by_name[n] for n in group]
        imports: set[str] = set()
        copied: list[Entity] = []
        declared: list[str] = []
        seen = set(own)
        todo = sorted({r for e in chosen for r in e.refs})
        while todo:
            r = todo.pop()
            if r in seen or r not in by_name:
                continue
            seen.add(r)
            e = by_name[r]
            if e.kind is Kind.DECLARE:
                declared.append(e.text)
            elif e.copyable:
                copied.append(e)
                todo.extend(e.refs)
            elif r in placed:
                imports.add(r)
                declared.append(_declaration(e))
            else:
                raise SplitError(f"{r} is used before its piece")
        texts = sorted(declared) + [e.text for e in sorted(copied, key=lambda e: e.name)]
        texts += [_exported(e) for e in chosen]
        type_texts = _type_closure(texts, types, entities)
        parts.append(Part("\n".join([*header, *type_texts, "", *texts, ""]), tuple(group), tuple(sorted(imports))))
        placed |= own
    return parts


def _type_closure(texts: list[str], types: dict[str, Entity], entities: list[Entity]) -> list[str]:
    """The type definitions these texts use, with those their bodies use, in module order."""
    wanted: set[str] = set()
    todo = [t for text in texts for t in _TYPE_REF.findall(text)]
    while todo:
        t = todo.pop()
        if t in wanted or t not in types:
            continue
        wanted.add(t)
        todo.extend(types[t].types)
    return [e.text for e in entities if e.kind is Kind.TYPE and e.name in wanted]
