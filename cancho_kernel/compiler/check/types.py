"""Semantic types: what the checker computes from written types and expressions.

Types are immutable values. Regions are objects with identity (a block region opened twice is two
regions); `STATIC` outlives everything. Inference variables (`Var`) are resolved through a
substitution owned by one body check, never globally.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Optional

_ids = itertools.count(1)


def fresh_id() -> int:
    """A process-unique id for regions and inference variables (identity only, never shown)."""
    return next(_ids)


@dataclass(frozen=True, eq=False)
class Region:
    """A region: a function's parameter region, a borrow block, an arena, or `static`.

    `ancestors` are the block/arena regions lexically enclosing this one (innermost first);
    `outer` is, for a parameter region, the set of parameter names a `where` clause says outlive it.
    """

    name: str
    kind: str  # "param" | "borrow" | "arena" | "static"
    ancestors: tuple["Region", ...] = ()
    uid: int = field(default_factory=fresh_id)

    def __repr__(self) -> str:
        return self.name


STATIC = Region("static", "static")


class Type:
    """Base of every semantic type."""

    def __str__(self) -> str:  # pragma: no cover - overridden
        return type(self).__name__


@dataclass(frozen=True)
class Prim(Type):
    name: str

    def __str__(self) -> str:
        return self.name if self.name != "unit" else "()"


INT = Prim("int")
BOOL = Prim("bool")
BYTE = Prim("byte")
FLOAT = Prim("float")
F32 = Prim("f32")
CPTR = Prim("c_ptr")
CINT = Prim("c_int")
UNIT = Prim("unit")

SCALARS = {"int": INT, "bool": BOOL, "byte": BYTE, "float": FLOAT, "f32": F32, "c_ptr": CPTR, "c_int": CINT}


@dataclass(frozen=True)
class Ref(Type):
    region: Region
    unique: bool
    target: Type

    def __str__(self) -> str:
        return f"&{'!' if self.unique else ''}{self.region.name} {self.target}"


@dataclass(frozen=True)
class Slice(Type):
    elem: Type

    def __str__(self) -> str:
        return f"[{self.elem}]"


@dataclass(frozen=True)
class Tuple(Type):
    parts: tuple[Type, ...]

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.parts)) + ")"


@dataclass(frozen=True)
class LabelT:
    """An effect label in a row: name and optional string argument."""

    name: str
    arg: Optional[str] = None

    def __str__(self) -> str:
        return self.name if self.arg is None else f'{self.name}("{self.arg}")'


def row_str(row) -> str:
    return "[" + ", ".join(str(l) for l in sorted(row, key=lambda l: (l.name, l.arg or ""))) + "]"


@dataclass(frozen=True)
class FnT(Type):
    params: tuple[Type, ...]
    row: frozenset
    ret: Type

    def __str__(self) -> str:
        return f"fn({', '.join(map(str, self.params))}) -> {row_str(self.row)} {self.ret}"


@dataclass(frozen=True)
class Adt(Type):
    """A struct or enum (user, std or prelude), by its declaration key and type arguments."""

    key: str  # "module::Name"; prelude types use "::Name"
    name: str
    args: tuple[Type, ...] = ()

    def __str__(self) -> str:
        base = self.name
        return base + ("[" + ", ".join(map(str, self.args)) + "]" if self.args else "")


@dataclass(frozen=True)
class Cap(Type):
    """A capability: World, Io, Heap, Args, Clock (literal None) or Ffi/Fs/Net/Exec/Signals(literal)."""

    kind: str
    literal: Optional[str] = None

    def __str__(self) -> str:
        return self.kind if self.literal is None else f'{self.kind}("{self.literal}")'


@dataclass(frozen=True)
class BoxT(Type):
    inner: Type

    def __str__(self) -> str:
        return f"Box[{self.inner}]"


@dataclass(frozen=True)
class Handle(Type):
    """A prelude resource handle with no payload in the type system: File, Dir, Conn, ..."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Param(Type):
    """A declared type parameter of a generic function or type."""

    name: str
    owner: str
    bound_val: bool = False

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, eq=False)
class Var(Type):
    """An inference variable; resolved through a body's substitution."""

    uid: int = field(default_factory=fresh_id)

    def __str__(self) -> str:
        return "?"

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return hash(("var", self.uid))


def children(t: Type) -> tuple[Type, ...]:
    """The types directly inside t (a reference's referent, a tuple's parts, ...)."""
    if isinstance(t, Ref):
        return (t.target,)
    if isinstance(t, Slice):
        return (t.elem,)
    if isinstance(t, Tuple):
        return t.parts
    if isinstance(t, FnT):
        return (*t.params, t.ret)
    if isinstance(t, Adt):
        return t.args
    if isinstance(t, BoxT):
        return (t.inner,)
    return ()


def walk(t: Type):
    """t and every type inside it, outermost first."""
    yield t
    for c in children(t):
        yield from walk(c)


def regions_in(t: Type) -> list[Region]:
    """Every region a type mentions, outermost first."""
    return [x.region for x in walk(t) if isinstance(x, Ref)]


def map_type(t: Type, leaf, region=lambda r: r) -> Type:
    """Rebuild t bottom-up: `leaf` may replace any type (return None to descend instead) and
    `region` any reference's region. The one traversal behind substitution and zonking."""
    got = leaf(t)
    if got is not None:
        return got
    def go(x: Type) -> Type:
        return map_type(x, leaf, region)
    if isinstance(t, Ref):
        return Ref(region(t.region), t.unique, go(t.target))
    if isinstance(t, Slice):
        return Slice(go(t.elem))
    if isinstance(t, Tuple):
        return Tuple(tuple(go(p) for p in t.parts))
    if isinstance(t, FnT):
        return FnT(tuple(go(p) for p in t.params), t.row, go(t.ret))
    if isinstance(t, Adt):
        return Adt(t.key, t.name, tuple(go(a) for a in t.args)) if t.args else t
    if isinstance(t, BoxT):
        return BoxT(go(t.inner))
    return t


def substitute(t: Type, subst: dict) -> Type:
    """Replace type parameters (by name) and regions (by identity) according to subst."""
    return map_type(t, lambda x: subst.get(("T", x.name), x) if isinstance(x, Param) else None,
                    lambda r: subst.get(("R", r.uid), r))
