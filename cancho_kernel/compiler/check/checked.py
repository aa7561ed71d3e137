"""What checking a body produces: bindings, call targets and the checked function record that
codegen, the static evaluator and the authority report read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..resolve import ItemRef
from ..source import Span
from .signatures import FnSig
from .types import Type, fresh_id


class Poisoned(Exception):
    """The body uses a declaration whose own signature was refused: report nothing more here."""


@dataclass(eq=False)
class Local:
    """One binding: a parameter, `let`/`var`, a destructured name, or a borrow's reference."""

    name: str
    ty: Type
    mutable: bool
    span: Span
    kind: str  # "param" | "let" | "var" | "borrow" | "field"
    open_regions: tuple = ()
    uid: int = field(default_factory=fresh_id)


@dataclass
class CallTarget:
    """What a call resolved to; codegen dispatches on `kind`."""

    kind: str  # "fn" | "extern" | "builtin" | "indirect"
    name: str
    item: Optional[ItemRef] = None
    sig: Optional[FnSig] = None
    subst: dict = field(default_factory=dict)


@dataclass(eq=False)
class CheckedFn:
    """A checked function body and everything codegen and the authority report need."""

    item: ItemRef
    sig: FnSig
    params: list[Local]
    bindings: dict = field(default_factory=dict)  # id(stmt) -> Local or list[Local]
    regions: dict = field(default_factory=dict)  # id(Borrow/RegionStmt) -> Region
    events: list = field(default_factory=list)
    performed: set = field(default_factory=set)
    callees: list = field(default_factory=list)  # ItemRefs of called fns/externs
    # Calls of generic functions (ast.Call, `info` a CallTarget whose subst gives the type
    # arguments): what `instantiation.py` walks to bound monomorphisation.
    generic_calls: list = field(default_factory=list)
    folded_operators: int = 0
    folded_calls: int = 0
