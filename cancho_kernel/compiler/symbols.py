"""What a name means, as text a person reads: declarations, std modules' public items, builtins,
prelude types and keywords, each as a :class:`Symbol` (signature, kind, where it is defined, doc).

This serves editor help (the kernel's completion and Shift-Tab), not checking: everything comes
from the compiler's own tables (``check/builtins.py``, ``check/typetable.py``, the lexer's
keywords) and from std sources parsed with the compiler's parser, so a new builtin, prelude type
or std function shows up here without a second list. Nothing here is type-checked.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from . import ast
from .check.builtins import (BUILTIN_EDITION, BUILTINS, CAP_VERBS, CAPABILITY_KINDS, LITERAL_CAPS,
                             PRELUDE_TYPE_EDITION, SIGNATURES, SPLIT_FIELDS)
from .check.builtin_calls import FS_VERBS
from .check.typetable import PRELUDE_DECLS
from .lexer import KEYWORDS
from .resolve import STD_DIR, std_source

MAX_DOC_LINES = 40  # a doc comment longer than this is cut (it is help text, not the file)


class SymbolKind(enum.Enum):
    """What a name is; ``jupyter_type`` is the completion kind JupyterLab shows for it."""

    FN = "fn"
    EXTERN = "extern fn"
    STRUCT = "struct"
    ENUM = "enum"
    STATIC = "static"
    BUILTIN = "builtin"
    FORM = "builtin form"          # alloc / alloc_slice: parsed forms, not calls
    PRELUDE_TYPE = "prelude type"
    CAPABILITY = "capability"
    KEYWORD = "keyword"
    MODULE = "module"

    @property
    def jupyter_type(self) -> str:
        return _JUPYTER_TYPE[self]


_JUPYTER_TYPE = {
    SymbolKind.FN: "function", SymbolKind.EXTERN: "function", SymbolKind.BUILTIN: "function",
    SymbolKind.FORM: "function", SymbolKind.STRUCT: "class", SymbolKind.ENUM: "class",
    SymbolKind.PRELUDE_TYPE: "class", SymbolKind.CAPABILITY: "class", SymbolKind.STATIC: "instance",
    SymbolKind.KEYWORD: "keyword", SymbolKind.MODULE: "module",
}

DECL_KIND = {ast.FnDecl: SymbolKind.FN, ast.ExternFn: SymbolKind.EXTERN, ast.StructDecl: SymbolKind.STRUCT,
             ast.EnumDecl: SymbolKind.ENUM, ast.StaticDecl: SymbolKind.STATIC}


@dataclass(frozen=True)
class Symbol:
    """One name as help text: ``signature`` is one line of cancho (a declaration without its body,
    with its effect row for functions); ``origin`` says where it is defined (``std/io.cho:8``,
    ``cell[3]:2``, ``builtin, edition 5``); ``doc`` holds the comment lines written above it."""

    name: str
    kind: SymbolKind
    signature: str
    origin: str
    doc: tuple[str, ...] = ()
    module: str = ""               # the dotted module declaring it ("" for the root and the prelude)
    note: str = ""                 # e.g. why a builtin is not visible at the cell's edition
    public: bool = False           # reachable through a module qualifier (`pub`, or a foreign fn)
    visible: bool = True           # a builtin or prelude type the asking edition can see


# -- declarations ----------------------------------------------------------------------------------


def declaration_text(decl: ast.Item) -> str:
    """Source text of a declaration up to its body (whitespace runs collapsed): a function's or a
    static's signature, a struct's or enum's whole declaration."""
    src = decl.span.source.text
    end = decl.span.end
    body = getattr(decl, "body", None)
    if isinstance(decl, (ast.FnDecl, ast.StaticDecl)) and body is not None:
        end = body.span.start
    text = src[decl.span.start:end].strip()
    if text.endswith(";"):
        text = text[:-1].rstrip()
    return " ".join(text.split())


def doc_comment(text: str, offset: int) -> tuple[str, ...]:
    """The ``//`` comment lines directly above the line holding ``offset`` (no blank line between),
    without their ``//`` markers; at most ``MAX_DOC_LINES`` of them (the closest ones)."""
    line_start = text.rfind("\n", 0, offset) + 1
    lines: list[str] = []
    while line_start > 0 and len(lines) < MAX_DOC_LINES:
        prev_start = text.rfind("\n", 0, line_start - 1) + 1
        line = text[prev_start:line_start - 1].strip()
        if not line.startswith("//"):
            break
        body = line[2:]
        lines.append(body[1:] if body.startswith(" ") else body)
        line_start = prev_start
    return tuple(reversed(lines))


def decl_symbol(decl: ast.Item, module: str, origin_path: str | None = None) -> Symbol:
    """A declaration as a symbol; ``origin_path`` names its file (default: its source's path)."""
    span = decl.span
    path = origin_path if origin_path is not None else span.source.path
    return Symbol(decl.name.name, DECL_KIND[type(decl)], declaration_text(decl), f"{path}:{span.line}",
                  doc_comment(span.source.text, span.start), module,
                  public=decl.pub or isinstance(decl, ast.ExternFn))


# -- std modules -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StdModule:
    """One std module's public items by name, and its doc (the comment at the top of the file)."""

    name: str
    path: str                      # as shown to a person: std/io.cho
    members: dict[str, Symbol]
    doc: tuple[str, ...] = ()


def std_display_path(module: str) -> str:
    return "std/" + module[4:].replace(".", "/") + ".cho"


class StdSymbols:
    """The std library's public items, each module parsed once on first use and kept.

    Keyed by module name alone: a std file fixes its own edition (an ``edition N;`` line), so what
    it declares does not depend on the edition of the cell that imports it. Hold one per session.
    """

    def __init__(self, std_dir: Path = STD_DIR) -> None:
        self._std_dir = std_dir
        self._modules: dict[str, StdModule | None] = {}

    def module_names(self) -> list[str]:
        """Every std module there is (``std.io``, ``std.fmt``, ...), sorted."""
        return sorted("std." + p.relative_to(self._std_dir).with_suffix("").as_posix().replace("/", ".")
                      for p in self._std_dir.rglob("*.cho"))

    def module(self, name: str) -> StdModule | None:
        """The std module ``name`` (``std.io``), or None when there is none or it does not parse."""
        if name not in self._modules:
            self._modules[name] = self._load(name)
        return self._modules[name]

    def members(self, name: str) -> dict[str, Symbol]:
        mod = self.module(name)
        return mod.members if mod is not None else {}

    def _load(self, name: str) -> StdModule | None:
        from .parser import parse_file

        src = std_source(name)
        if src is None:
            return None
        parsed, diags = parse_file(src)
        if parsed is None or diags:
            return None
        path = std_display_path(name)
        members: dict[str, Symbol] = {}
        for decl in parsed.items:
            sym = decl_symbol(decl, name, path)
            if sym.public:
                members.setdefault(sym.name, sym)
        first = parsed.module.span.start if parsed.module is not None else 0
        return StdModule(name, path, members, doc_comment(src.text, first))


# -- builtins, prelude types, keywords ---------------------------------------------------------------

# Builtins checked at the call site (their signature depends on the arguments), described here.
CALL_SITE_SIGNATURES = {
    "release": "fn release[C](c: C) -> [] int   // C: any owned capability, consumed",
    "narrow": ('fn narrow(c: C(p), lit: "...", ...) -> [] C(lit)   '
               "// Ffi/Fs/Net/Signals/Exec; several literals give a tuple"),
    "contents": "fn contents[&r, T](b: &r Box[T]) -> [] &r T",
    "alloc": "alloc[a](value: T) -> &!a T   // a: an open arena (region a { }), T: val",
    "alloc_slice": "alloc_slice[a](count: int, fill: T) -> &!a [T]   // traps if count < 0; T: val",
    "spawn": ("fn spawn(payload: T, body: fn(T) -> [row] R) -> [conc, row] Thread[T, R]   "
              "// a real OS thread; T and R: one int, bool, byte, c_ptr, fn value, non-slice reference, "
              "or an owned File/Io/Ffi/Fs/Args/Heap/Net/Clock"),
    "join": "fn join(t: Thread[T, R]) -> [] R   // waits for the thread; a `&!` lent to it comes back",
    "fork_heap": "fn fork_heap[&x](h: &!x Heap) -> [heap] Heap   // a second owned Heap, for a worker",
}
_FS_VERB_PARAMS = {None: "", "unique": ", into: &!b [byte]", "shared": ", bytes: &b [byte]"}
_FS_VERB_REGIONS = {None: "&f, &a", "unique": "&f, &a, &b", "shared": "&f, &a, &b"}
FORMS = ("alloc", "alloc_slice")


def split_signature(edition: int) -> str:
    fields = ", ".join(f"{f}: {t}" for f, t in SPLIT_FIELDS[clamp_edition(edition)])
    return f"fn split(world: World) -> [] Split   // Split at edition {clamp_edition(edition)}: {{ {fields} }}"


def _fs_signature(name: str) -> str:
    labels, third, ret = FS_VERBS[name]
    params = ", to: &b [byte]" if name == "fs_rename" else _FS_VERB_PARAMS[third]
    row = ", ".join(f'{label}("p")' for label in labels)
    return (f'fn {name}[{_FS_VERB_REGIONS[third]}](fs: &f Fs("p"), path: &a [byte]{params}) '
            f'-> [{row}] {ret}   // "p": the capability\'s prefix; a path outside it traps')


def _cap_verb_signature(name: str) -> str:
    kind, _label, template = CAP_VERBS[name]
    return (template.replace('""', '"p"') + f'   // "p": the {kind} capability\'s '
            f'{_CAP_LITERAL[kind]}, named in the label')


def _not_visible(since: int, edition: int) -> str:
    return f"not visible here: needs `edition {since};` (this cell is at edition {edition})"


def clamp_edition(edition: int) -> int:
    return max(1, min(max(SPLIT_FIELDS), edition))


def builtin_symbol(name: str, edition: int) -> Symbol | None:
    """A builtin function or form by name, whatever the edition; ``note`` says when ``edition``
    cannot see it or when this compiler does not support it."""
    if name in FORMS:
        return Symbol(name, SymbolKind.FORM, CALL_SITE_SIGNATURES[name], "builtin form, every edition")
    since = BUILTIN_EDITION.get(name)
    if since is None:
        return None
    if name in SIGNATURES:
        signature, note = SIGNATURES[name], ""
    elif name == "split":
        signature, note = split_signature(edition), ""
    elif name in FS_VERBS:
        signature, note = _fs_signature(name), ""
    elif name in CAP_VERBS:
        signature = _cap_verb_signature(name)
        note = "" if BUILTINS[name].supported else "checked, but not compiled by this compiler yet"
    elif name in CALL_SITE_SIGNATURES:
        signature, note = CALL_SITE_SIGNATURES[name], ""
    else:
        signature, note = f"fn {name}(...)", "not supported by this compiler yet"
    if since > edition:
        note = "; ".join(filter(None, [_not_visible(since, edition), note]))
    return Symbol(name, SymbolKind.BUILTIN, signature, f"builtin, edition {since}", note=note,
                  visible=since <= edition)


# What the literal of a narrowable capability means (runtime.md §2.2).
_CAP_LITERAL = {"Ffi": "scope", "Fs": "prefix", "Net": "bound", "Signals": "set", "Exec": "prefix"}

_PRELUDE_HELP = {
    "int": "a 64-bit signed integer; + - * trap on overflow, / and % on a zero divisor",
    "bool": "true or false",
    "byte": "an 8-bit unsigned integer (byte_of(n) traps outside 0..255)",
    "float": "a 64-bit IEEE float; its arithmetic never traps",
    "f32": "a 32-bit IEEE float",
    "c_int": "a C int, legal only as an extern fn's return type",
    "c_ptr": "an opaque C pointer, for extern fn signatures only; null_ptr() makes one",
    "World": "the root capability main receives; split(world) takes it apart",
    "Io": "the console: borrow it uniquely to read stdin (io_read) or write stdout (io_write) or stderr (err_write)",
    "Ffi": 'foreign calls, Ffi(scope); narrow(ffi, "lib") scopes it to one library (label ffi("lib"))',
    "Fs": 'the file system under a path prefix, Fs(prefix); labels fs_read("p"), fs_write("p")',
    "Heap": "the heap: box, unbox, box_slice (label heap)",
    "Args": "the command line: arg_count, arg (label args)",
    "Net": "the network, Net(bound) (labels net_out, net_in)",
    "Clock": "clocks: clock_ms, clock_unix_ms (label clock)",
    "Signals": "signal delivery, Signals(set)",
    "Exec": "running programs under a path prefix, Exec(prefix)",
    "Box": "Box[T]: one heap value (res); box(h, v) makes it, unbox(h, b) ends it",
    "File": "an open file (res): file_read, file_write, file_pread, file_pwrite, file_size, file_close",
    "Dir": "an open directory (res): dir_enter, dir_open_read, dir_list, dir_stat, dir_close; names are one component",
    "DirList": "a listing of a Dir (res): dir_next, dir_list_close",
    "Child": "a started program (res): child_kill, and child_wait, which reaps it",
    "Pipe": "the parent's end of a channel to a child (res): pipe_read, pipe_write, pipe_close",
    "ChildEnd": "the child's end of a channel (res): given to exec_spawn as Stdio::Pipe, or child_end_close",
    "Thread": "Thread[T, R]: a running thread (res); join(t) ends it",
}


def prelude_symbol(name: str, edition: int) -> Symbol | None:
    """A prelude type or capability by name, whatever the edition (``note`` when not visible)."""
    since = PRELUDE_TYPE_EDITION.get(name)
    if since is None:
        return None
    kind = SymbolKind.CAPABILITY if name in CAPABILITY_KINDS else SymbolKind.PRELUDE_TYPE
    decl = PRELUDE_DECLS.get("::" + name)
    if decl is not None:
        variants = ", ".join(v + (f"({', '.join(map(str, p))})" if p else "") for v, p in decl.variants)
        signature = f"{decl.mode + ' ' if decl.mode else ''}enum {name} {{ {variants} }}"
    elif name == "Split":
        fields = ", ".join(f"{f}: {t}" for f, t in SPLIT_FIELDS[clamp_edition(edition)])
        signature = f"struct Split {{ {fields} }}   // at edition {clamp_edition(edition)}"
    elif kind is SymbolKind.CAPABILITY:
        signature = f"capability {name}" + (f"({_CAP_LITERAL.get(name, 'literal')})" if name in LITERAL_CAPS else "")
    else:
        signature = f"type {name}"
    help_line = _PRELUDE_HELP.get(name)
    note = _not_visible(since, edition) if since > edition else ""
    return Symbol(name, kind, signature, f"prelude, edition {since}", (help_line,) if help_line else (), note=note,
                  visible=since <= edition)


# Words that are keywords only where an item starts (the lexer reads them as identifiers).
CONTEXTUAL_WORDS = ("edition", "static")
KEYWORD_WORDS = tuple(sorted(w for w in KEYWORDS if w != "_"))

KEYWORD_HELP = {
    "fn": "fn NAME[&r, T](params) -> [row] RET { ... } — every function writes its effect row and return type",
    "borrow": "borrow x as &r in { ... } / borrow mut x as &!r in { ... } — lend a binding for a block",
    "region": "region a { ... } — an arena; alloc[a](v) and alloc_slice[a](n, fill) allocate in it",
    "edition": "edition N; — first line of a file: the names editions 1..N add (session-wide in a notebook)",
    "defer": "defer E; — run E at every exit of the enclosing block, in reverse order",
    "while": "while COND { ... } — the only loop (no break/continue)",
    "match": "match e { E::V(x) => { ... } _ => { ... } } — exhaustive, variants written qualified",
    "static": "static NAME: [T] { ... } — compile-time data, read-only at run time as &static [T]",
    "extern": 'extern fn NAME[&f](ffi: &f Ffi("lib"), ...) -> [ffi("lib")] int; — a C function',
    "import": "import std.io; / import a.b as q; — bind a module to a qualifier: q.name",
    "module": "module a.b; — the module this file's items belong to",
    "pub": "pub fn / pub struct ... — visible to other modules through their qualifier",
    "let": "let x = e; / let x: T = e; — a binding that is never assigned again",
    "var": "var x = e; — a mutable binding",
    "res": "res struct / res enum — a resource: every value must be consumed exactly once",
    "val": "val struct / val enum — a copyable value (checked, not trusted)",
}


def keyword_symbol(name: str) -> Symbol | None:
    if name not in KEYWORDS and name not in CONTEXTUAL_WORDS:
        return None
    text = KEYWORD_HELP.get(name, f"keyword `{name}`")
    signature, _, doc = text.partition(" — ")
    return Symbol(name, SymbolKind.KEYWORD, signature, "keyword", (doc,) if doc else ())
