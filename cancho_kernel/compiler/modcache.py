"""A bounded in-memory cache of parsed and checked std modules and of whole compiled programs.

Why: a cell that imports `std.io`, `std.fmt` and `std.vec` spent most of its compile parsing,
checking and lowering those modules again (benchmarks/README.md, issue 15). The parsed tree is
never written after parsing and a checked function is frozen (``check/typed.py``), so what a std
module's parse and check produced can be shared by every later program that imports it.

Keys are content, never time or identity:

* a parse: the file's display path, a hash of its text, the compiler version;
* a checked module: its name, the hash of its text, its edition, the names and text hashes of the
  modules it imports (transitively) and the compiler version — so an edit of a dependency, of the
  edition line or of the compiler is a different key;
* a compiled program: every file's module, edition, imports and items (each item by the text of
  the source it came from and its place there), plus the compiler version. Source *paths* are
  not in it: a kernel cell re-run unchanged is ``cell[N+1]``, not ``cell[N]``, and the IR never
  names a path. Only accepted programs are kept, so no cached diagnostic can name a stale path.

No global state: the kernel session owns one cache, API callers pass one or none. Entries are
bounded (least recently used goes first) and every access takes the cache's lock, because the
kernel compiles from its warm-up thread too.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Generic, Hashable, Mapping, Optional, TypeVar

from . import ast
from .diagnostics import Diagnostic
from .source import SourceFile

if TYPE_CHECKING:
    from .resolve import ItemRef, ModuleScope

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def text_hash(text: str) -> str:
    """A content hash of one source text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class _Lru(Generic[K, V]):
    """A bounded mapping; the least recently used entry is dropped first. Not locked itself."""

    def __init__(self, limit: int) -> None:
        self.limit = max(0, limit)
        self._data: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> Optional[V]:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        if self.limit == 0:
            return
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.limit:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


@dataclass(frozen=True)
class ParseKey:
    path: str
    text_hash: str
    version: str


@dataclass(frozen=True)
class ModuleKey:
    """What a checked std module's result depends on."""

    name: str
    text_hash: str
    edition: int
    deps: tuple[tuple[str, str], ...]  # (module, text hash) of every module it imports, transitively
    version: str


@dataclass(frozen=True, eq=False)
class CheckedModule:
    """One std module as checking left it: its parsed file (kept alive: the side tables key on
    its nodes), its scope with signed ItemRefs, its struct/enum declarations, its frozen checked
    functions, its externs and its statics' values. Shared read-only by every program using it."""

    key: ModuleKey
    file: ast.File
    scope: "ModuleScope"
    type_decls: Mapping[str, object]  # item key -> check.signatures.TypeDecl
    fns: Mapping[str, object]  # item key -> check.body.CheckedFn
    externs: Mapping[str, "ItemRef"]
    statics: Mapping[str, object]  # item key -> evaluate.SliceV


@dataclass(frozen=True)
class ProgramKey:
    digest: str


@dataclass
class CacheStats:
    """How often each layer answered (tests read these to prove a layer was or was not used)."""

    parse_hits: int = 0
    parse_misses: int = 0
    module_hits: int = 0
    module_misses: int = 0
    program_hits: int = 0
    program_misses: int = 0


@dataclass
class ModuleCache:
    """Parsed std files, checked std modules and compiled programs, by content (see module doc).

    ``version`` is the compiler's identity (``cache.compiler_fingerprint()`` unless given); it
    is part of every key, so entries made by another compiler are never answered."""

    max_parsed: int = 64
    max_modules: int = 64
    max_programs: int = 32
    max_lowered: int = 4096  # lowered function instances (codegen/fncache.py)
    version: Optional[str] = None
    stats: CacheStats = field(default_factory=CacheStats)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._parsed: _Lru[ParseKey, ast.File] = _Lru(self.max_parsed)
        self._modules: _Lru[ModuleKey, CheckedModule] = _Lru(self.max_modules)
        self._programs: _Lru[ProgramKey, object] = _Lru(self.max_programs)
        from .codegen.fncache import LoweredCache

        # Lowered function instances by key: editing one function lowers only it again.
        self.lowered = LoweredCache(self.max_lowered)

    def compiler_version(self) -> str:
        if self.version is None:
            from .cache import compiler_fingerprint

            self.version = compiler_fingerprint()
        return self.version

    # -- parses ------------------------------------------------------------------------------

    def parse(self, source: SourceFile) -> tuple[Optional[ast.File], list[Diagnostic]]:
        """Parse ``source``, or answer the tree an identical text parsed to. Only clean parses
        are kept (a refusal is reparsed, so its diagnostics are always fresh)."""
        from .parser import parse_file

        key = ParseKey(source.path, text_hash(source.text), self.compiler_version())
        with self._lock:
            hit = self._parsed.get(key)
            if hit is not None:
                self.stats.parse_hits += 1
                return hit, []
            self.stats.parse_misses += 1
        f, diags = parse_file(source)
        if f is not None and not diags:
            with self._lock:
                self._parsed.put(key, f)
        return f, list(diags)

    # -- checked modules ---------------------------------------------------------------------

    def module_key(self, name: str, file: ast.File, deps: Mapping[str, str]) -> ModuleKey:
        return ModuleKey(name, text_hash(file.source.text), file.edition, tuple(sorted(deps.items())),
                         self.compiler_version())

    def checked(self, key: ModuleKey) -> Optional[CheckedModule]:
        with self._lock:
            hit = self._modules.get(key)
            if hit is not None:
                self.stats.module_hits += 1
            else:
                self.stats.module_misses += 1
            return hit

    def put_checked(self, entry: CheckedModule) -> None:
        with self._lock:
            self._modules.put(entry.key, entry)

    # -- whole programs ------------------------------------------------------------------------

    def program_key(self, files: list[ast.File], extra: str = "") -> ProgramKey:
        """The content of a program made of these parsed files (paths left out: module doc)."""
        h = hashlib.sha256()
        h.update(self.compiler_version().encode() + b"\0" + extra.encode() + b"\0")
        texts: dict[int, str] = {}

        def source_id(src: SourceFile) -> str:
            got = texts.get(id(src))
            if got is None:
                got = texts[id(src)] = text_hash(src.text) + f"+{src.line_offset}"
            return got

        for f in files:
            h.update(f"file {f.module_name!r} {f.edition}\0".encode())
            for imp in f.imports:
                alias = imp.alias.name if imp.alias is not None else ""
                h.update(f"import {imp.dotted} {alias}\0".encode())
            for item in f.items:
                sp = item.span
                h.update(f"item {type(item).__name__} {source_id(sp.source)} {sp.start} {sp.end}\0".encode())
        return ProgramKey(h.hexdigest())

    def program(self, key: ProgramKey) -> Optional[object]:
        with self._lock:
            hit = self._programs.get(key)
            if hit is not None:
                self.stats.program_hits += 1
            else:
                self.stats.program_misses += 1
            return hit

    def put_program(self, key: ProgramKey, result: object) -> None:
        with self._lock:
            self._programs.put(key, result)

    def sizes(self) -> dict[str, int]:
        with self._lock:
            return {"parsed": len(self._parsed), "modules": len(self._modules), "programs": len(self._programs)}


def frozen(d: dict) -> Mapping:
    """A read-only view of a fresh copy (cached entries are shared)."""
    return MappingProxyType(dict(d))
