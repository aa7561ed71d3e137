"""The typed form: what checking a body learned, held beside the syntax tree and never in it.

The parser's tree is never written after parsing. The checker records, per expression node,
its type and what it resolved to (a `Local`, a `CallTarget`, a function value, a static, a
member position), and per statement the bindings and regions it introduced, in a `TypedBody`.
Codegen, the compile-time evaluator and the instantiation check read only this table; none of
them re-resolves a name. Every record here is frozen, and a `TypedBody` refuses writes once the
checker hands it over, so a checked function can be shared (by the kernel's cells today, by a
cache of checked modules later) without a copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import TYPE_CHECKING, Callable, Generic, Iterator, Mapping, Optional, TypeVar, Union

from ..source import Span
from .types import Region, Type, fresh_id

if TYPE_CHECKING:
    from ..resolve import ItemRef
    from .signatures import FnSig


class LocalKind(Enum):
    """How a binding was introduced."""

    PARAM = "param"
    LET = "let"
    VAR = "var"
    BORROW = "borrow"  # the reference a `borrow ... as &r` binds to `r`
    FIELD = "field"  # a name bound by destructuring or by a `match` pattern


class CallKind(Enum):
    """What a call resolved to; codegen and the evaluator dispatch on it."""

    FN = "fn"
    EXTERN = "extern"
    BUILTIN = "builtin"
    INDIRECT = "indirect"  # through a local of function type


class MemberMode(Enum):
    """How `e.f` / `e.N` reaches its member."""

    OWNED = "owned"  # copied out of an owned aggregate
    REF_RES = "ref-res"  # a `res` member through a reference: a reference to it
    REF_VAL = "ref-val"  # a `val` member through a reference: read (or written) in place


@dataclass(frozen=True, eq=False)
class Local:
    """One binding: a parameter, `let`/`var`, a destructured name, or a borrow's reference.
    Identity is the binding: `uid` names its slot in codegen and its value in the evaluator."""

    name: str
    ty: Type
    mutable: bool
    span: Span
    kind: LocalKind
    open_regions: tuple = ()
    uid: int = field(default_factory=fresh_id)


@dataclass(frozen=True, eq=False)
class CallTarget:
    """What a call resolved to. `subst` gives a generic callee's type arguments (`("T", name)`)
    and region arguments (`("R", uid)`); `prefix` is a filesystem verb's capability prefix."""

    kind: CallKind
    name: str
    item: Optional["ItemRef"] = None
    sig: Optional["FnSig"] = None
    subst: Mapping = field(default_factory=lambda: MappingProxyType({}))
    prefix: str = ""


@dataclass(frozen=True, eq=False)
class FnValue:
    """A non-generic function named as a value."""

    item: "ItemRef"


@dataclass(frozen=True, eq=False)
class StaticRef:
    """A `static` item named as a value (`&static [T]`)."""

    item: "ItemRef"


@dataclass(frozen=True)
class Member:
    """A member read or written: its position in the aggregate and how it is reached."""

    mode: MemberMode
    index: int


Resolution = Union[Local, CallTarget, FnValue, StaticRef, Member]


@dataclass(frozen=True, eq=False)
class BorrowBinding:
    """`borrow x as &r`: the borrowed binding and the reference bound to `r`."""

    target: Local
    ref: Local


@dataclass(frozen=True)
class ArmBinding:
    """A `match` arm's bindings: (payload position, local) for each named payload member."""

    binds: tuple[tuple[int, Local], ...] = ()


@dataclass(frozen=True)
class MatchShape:
    """Whether a `match` scrutinee is owned (taken apart) or a reference (read through)."""

    owned: bool


# Let -> Local; LetStruct/LetTuple -> tuple of Locals; Borrow -> BorrowBinding; Arm -> ArmBinding;
# Match -> MatchShape.
Binding = Union[Local, tuple, BorrowBinding, ArmBinding, MatchShape]

N = TypeVar("N")
V = TypeVar("V")


class NodeMap(Generic[N, V]):
    """A table keyed by a syntax node's identity. Nodes compare by value (two parses of one
    text are equal), so they cannot be dict keys themselves; the table keeps every key node
    alive, so an identity is never reused while the table lives. Read-only once frozen."""

    __slots__ = ("_entries", "_frozen")

    def __init__(self) -> None:
        self._entries: dict[int, tuple[N, V]] = {}
        self._frozen = False

    def __setitem__(self, node: N, value: V) -> None:
        if self._frozen:
            raise TypeError("a checked body's typed form is read-only")
        self._entries[id(node)] = (node, value)

    def __getitem__(self, node: N) -> V:
        return self._entries[id(node)][1]

    def get(self, node: N, default: Optional[V] = None) -> Optional[V]:
        entry = self._entries.get(id(node))
        return default if entry is None else entry[1]

    def __contains__(self, node: object) -> bool:
        return id(node) in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def items(self) -> Iterator[tuple[N, V]]:
        """(node, value) pairs in the order the nodes were first recorded."""
        return iter(list(self._entries.values()))

    def mapped(self, f: "Callable[[N, V], object]") -> "NodeMap":
        """A new table of the same nodes, in the same order, with values `f(node, value)`."""
        out: NodeMap = NodeMap()
        out._entries = {k: (n, f(n, v)) for k, (n, v) in self._entries.items()}
        return out

    def freeze(self) -> None:
        self._frozen = True


@dataclass(eq=False)
class TypedBody:
    """The typed side table of one checked body."""

    types: NodeMap = field(default_factory=NodeMap)  # ast.Expr -> Type
    resolved: NodeMap = field(default_factory=NodeMap)  # ast.Expr -> Resolution
    bindings: NodeMap = field(default_factory=NodeMap)  # ast.Stmt | ast.Arm -> Binding
    regions: NodeMap = field(default_factory=NodeMap)  # ast.Borrow | ast.RegionStmt -> Region

    def ty(self, e) -> Type:
        """The type of a checked expression."""
        return self.types[e]

    def res(self, e) -> Resolution:
        """What a name, call or member expression resolved to."""
        return self.resolved[e]

    def region(self, s) -> Region:
        return self.regions[s]

    def freeze(self) -> None:
        for table in (self.types, self.resolved, self.bindings, self.regions):
            table.freeze()
