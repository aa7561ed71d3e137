"""Lowered code kept per function instance, so that editing one function lowers only it again.

Why (issue 15): after a one-function edit of a cell that imports std, every reachable function —
dozens of std ones — was lowered again (~15 ms of llvmlite building and printing), although only
one body changed. A :class:`LoweredFn` is one instance's definition text plus what it needs from
the module around it (the instances it calls, in the order it asked for them; the globals,
declarations and named types its text names), so the lowering can put it back without lowering.

What a function's text depends on, and so its key (:class:`FnKeys`), in two tiers:

* **std tier** — an instance of a function of a cacheable std module (``check/program.py``
  ``std_module_keys``: its text, edition, transitive std imports and the compiler version) whose
  type arguments only name types of such modules: the module keys of its own module and of those
  types' modules, and the instance's name. A user's edit never changes it.
* **program tier** — everything else (session items, a std generic instantiated with a user type):
  the program's *interface* (every module's name, edition and imports; every item's declaration
  up to its body — a function's signature, a struct's or enum's whole text, a static's or
  extern's whole text; every std module's key or text; every static's compile-time bytes; the
  compiler version), the function's own text and edition, and the instance's name. So editing a
  body relowers that function only; changing a signature, a type, an edition or a static relowers
  every program-tier function (callers included), never std's.

Names inside a text never depend on the program around it: string constants and named struct
types are named by their content (``lower.py``, ``layout.py``). Pure Python (no llvmlite): the
module cache owns one :class:`LoweredCache`.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from .. import ast

if TYPE_CHECKING:
    from ..trapsites import RelativeSite
    from ..check.program import CheckedProgram
    from ..modcache import ModuleCache, ModuleKey


@dataclass(frozen=True)
class LoweredFn:
    """One lowered function instance: its definition ``text``; ``callees``, the ``(key, type
    arguments)`` instances its lowering asked for, in order (replayed so the module's functions
    come out in the same order); the ``globals`` (name, text) and named ``types`` (name, text)
    its text names; ``traps``, its trap sites relative to its declaration (``trapsites.py``)."""

    text: str
    callees: tuple[tuple[str, tuple], ...]
    globals: tuple[tuple[str, str], ...]
    types: tuple[tuple[str, str], ...]
    traps: tuple["RelativeSite", ...] = ()

    @property
    def size(self) -> int:
        return len(self.text) + sum(len(t) for _, t in self.globals) + sum(len(t) for _, t in self.types)


@dataclass
class LoweringStats:
    """Instances answered by the cache and lowered afresh (``lowered``: by LLVM name), so tests
    can prove which functions an edit lowered again."""

    hits: int = 0
    misses: int = 0
    lowered: Counter = field(default_factory=Counter)


class LoweredCache:
    """:class:`LoweredFn` records by key, least recently used dropped first (at most ``limit``
    records and ``max_bytes`` of text). Locked: the kernel compiles from its warm-up thread too."""

    def __init__(self, limit: int = 4096, max_bytes: int = 32 << 20) -> None:
        self.limit = max(0, limit)
        self.max_bytes = max(0, max_bytes)
        self.stats = LoweringStats()
        self._lock = threading.Lock()
        self._data: OrderedDict[str, LoweredFn] = OrderedDict()
        self._bytes = 0

    def get(self, key: str) -> Optional[LoweredFn]:
        with self._lock:
            got = self._data.get(key)
            if got is None:
                self.stats.misses += 1
                return None
            self._data.move_to_end(key)
            self.stats.hits += 1
            return got

    def put(self, key: str, name: str, rec: LoweredFn) -> None:
        with self._lock:
            self.stats.lowered[name] += 1
            if self.limit == 0 or rec.size > self.max_bytes or key in self._data:
                return
            self._data[key] = rec
            self._bytes += rec.size
            while len(self._data) > self.limit or self._bytes > self.max_bytes:
                _, old = self._data.popitem(last=False)
                self._bytes -= old.size

    def note_lowered(self, name: str) -> None:
        """A function lowered with no key (not cacheable)."""
        with self._lock:
            self.stats.lowered[name] += 1

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)


def item_text(decl: ast.Item) -> str:
    """The exact source text of a declaration."""
    sp = decl.span
    return sp.source.text[sp.start:sp.end]


def interface_text(decl: ast.Item) -> str:
    """What other functions' lowering may depend on: a function's text up to its body, any other
    item's whole text."""
    sp = decl.span
    end = sp.end
    if isinstance(decl, ast.FnDecl):
        end = decl.body.span.start
    return sp.source.text[sp.start:end]


def _adt_modules(t: object, out: set[str]) -> None:
    """The modules of every struct or enum a type names (``""`` for the root and the prelude)."""
    from ..check.types import Adt

    if isinstance(t, Adt):
        out.add(t.key.split("::", 1)[0])
        for a in t.args:
            _adt_modules(a, out)
        return
    for name in getattr(t, "__dataclass_fields__", {}):
        value = getattr(t, name)
        if isinstance(value, tuple):
            for v in value:
                _adt_modules(v, out)
        elif hasattr(value, "__dataclass_fields__") and not isinstance(value, (str, int)):
            _adt_modules(value, out)


class FnKeys:
    """The cache keys of one program's function instances (see the module docstring)."""

    def __init__(self, prog: "CheckedProgram", cache: "ModuleCache") -> None:
        from ..check.program import std_candidates, std_module_keys

        self.prog = prog
        self.version = cache.compiler_version()
        self.std_keys: dict[str, "ModuleKey"] = std_module_keys(std_candidates(prog.files), cache)
        self._interface: Optional[str] = None

    def interface(self) -> str:
        """The digest of everything but function bodies (module docstring, program tier)."""
        if self._interface is None:
            from ..check.evaluate import encode
            from ..modcache import text_hash

            h = hashlib.sha256(f"interface\0{self.version}\0".encode())
            for f in self.prog.files:
                mod = f.module_name
                if mod in self.std_keys:
                    h.update(f"std {self.std_keys[mod]!r}\0".encode())
                    continue
                h.update(f"file {mod!r} {f.edition}\0".encode())
                if f.source.path.startswith("<std>/"):
                    h.update(f"std text {text_hash(f.source.text)}\0".encode())
                    continue
                for imp in f.imports:
                    alias = imp.alias.name if imp.alias is not None else ""
                    h.update(f"import {imp.dotted} {alias}\0".encode())
                for item in f.items:
                    text = interface_text(item)
                    h.update(f"item {type(item).__name__} {len(text)}\0{text}\0".encode("utf-8", "surrogatepass"))
            for k in sorted(self.prog.statics):
                data = encode(self.prog.statics[k]) or b""
                h.update(f"static {k} {len(data)}\0".encode() + data)
            self._interface = h.hexdigest()
        return self._interface

    def key(self, fn_key: str, tsub: dict, name: str) -> Optional[str]:
        """The key of the instance named ``name`` of ``fn_key`` with type arguments ``tsub``."""
        fn = self.prog.fns.get(fn_key)
        if fn is None:
            return None
        module = fn_key.split("::", 1)[0]
        mods: set[str] = set()
        for t in tsub.values():
            _adt_modules(t, mods)
        if module in self.std_keys and all(m in self.std_keys for m in mods):
            parts = [repr(self.std_keys[module])] + [repr(self.std_keys[m]) for m in sorted(mods)]
            body = "std\0" + "\0".join(parts)
        else:
            item = fn.item
            text = item_text(item.decl)
            body = f"program\0{self.interface()}\0{getattr(item, 'edition', '')}\0{len(text)}\0{text}"
        h = hashlib.sha256(f"{self.version}\0{fn_key}\0{name}\0".encode())
        h.update(body.encode("utf-8", "surrogatepass"))
        if fn.evaluated is not None:  # calls evaluated at compile time: their values are in the text
            h.update(f"\0evaluated {[v for _, v in fn.evaluated.items()]!r}".encode())
        return h.hexdigest()
