"""What checking a body produces: the checked function record that codegen, the static
evaluator, the instantiation check and the authority report read. Its typed side table and
resolution records live in `typed.py`; both are immutable once the checker returns them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .. import ast
from ..resolve import ItemRef
from .signatures import FnSig
from .typed import (ArmBinding, BorrowBinding, CallKind, CallTarget, FnValue, Local, LocalKind,  # noqa: F401
                    MatchShape, Member, MemberMode, NodeMap, StaticRef, TypedBody)
from .types import LabelT


class Poisoned(Exception):
    """The body uses a declaration whose own signature was refused: report nothing more here."""


@dataclass(frozen=True, eq=False)
class CheckedFn:
    """A checked function body and everything codegen and the authority report need."""

    item: ItemRef
    sig: FnSig
    params: tuple[Local, ...]
    typed: TypedBody
    events: tuple  # the linearity event tree (linearity.py), replayed once
    performed: frozenset[LabelT]
    callees: tuple[ItemRef, ...]  # called fns/externs and functions named as values
    # Calls of generic functions (their CallTarget's subst gives the type arguments): what
    # `instantiation.py` walks to bound monomorphisation.
    generic_calls: tuple[ast.Call, ...]
    folded_operators: int = 0
    folded_calls: int = 0
    # The checker's values of literal trees (expression -> value), frozen: what `callfold.py`
    # takes as constant arguments.
    consts: Optional[NodeMap] = None
    # Pure calls on constants evaluated at compile time (call -> scalar value; `callfold.py`):
    # codegen emits the value in the call's place.
    evaluated: Optional[NodeMap] = None

    @property
    def body(self) -> ast.Block:
        return self.item.decl.body
