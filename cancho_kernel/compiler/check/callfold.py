"""Pure calls on constants, evaluated at compile time (the reference's compile-time.md §3–§5).

A call is evaluated when its callee is **pure** (it performs nothing and no parameter reaches a
unique reference; not generic, not foreign) and every argument is a constant: a literal tree
the checker folded, or a call this pass already evaluated. The callee runs in `evaluate.py`'s
interpreter, limited to what needs no memory (§1.2: a body that builds a struct, matches an
enum, indexes a slice or opens a region is declined), within CALL_FUEL steps per call site.

* a scalar answer replaces the call (codegen emits the constant; the authority report counts it);
* a trap refuses the program, `constant-traps`, at the call, wherever it is written (§4, §4.1);
* running out of fuel, or a body the interpreter declines, leaves an ordinary run-time call
  (§5: never an error, so the budget is a tuning parameter and not a language rule).
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, Optional

from .. import ast
from ..diagnostics import Diagnostic, Refusal, Rule
from ..layout import RuntimeLayout
from .checked import CheckedFn
from .consteval import Trap
from .evaluate import BudgetExceeded, Evaluator
from .typed import CallKind, NodeMap
from .types import BOOL, BYTE, FLOAT, INT, Ref, walk

# Steps per call site (compile-time.md §5.1): one per statement, expression and loop turn, as
# `evaluate.py` counts them; naive `fib(23)` fits, `fib(24)` does not.
CALL_FUEL = 1_000_000

# What the evaluator would need memory for (§1.2): declined, the call stays a run-time call.
DECLINED = (ast.StructLit, ast.VariantExpr, ast.Match, ast.Index, ast.RegionStmt, ast.AllocSlice,
            ast.Alloc, ast.SliceExpr, ast.StrLit, ast.TupleExpr, ast.LetTuple, ast.LetStruct, ast.Borrow,
            ast.FieldAccess, ast.TupleIndex)

SCALARS = (INT, BOOL, BYTE, FLOAT)
# A stop the program asks for (`test.assert(false)` in an arm a test never reaches, as the
# reference's own std tests write it) is its run time's business, not a certain trap.
DELIBERATE = frozenset({"trap"})
# Nested calls the interpreter follows (each is a dozen Python frames); deeper is declined.
MAX_DEPTH = 2000


class Declined(Exception):
    """The body needs something the call evaluator does not run."""


def is_pure(fn: CheckedFn) -> bool:
    """compile-time.md §3: performs nothing (before any discharge) and no parameter reaches a
    unique reference; generic and foreign functions are not evaluated."""
    if fn.performed or fn.sig.tparams or fn.sig.kind != "fn":
        return False
    return not any(isinstance(x, Ref) and x.unique for _, t in fn.sig.params for x in walk(t))


class CallEvaluator(Evaluator):
    """The static evaluator, restricted to memory-free bodies and given one call's fuel."""

    def __init__(self, fns: dict[str, CheckedFn], layout: RuntimeLayout):
        super().__init__(fns, {}, layout)
        self.fuel = CALL_FUEL

    def call_fn(self, fn: CheckedFn, args: list):
        if len(self.frames) >= MAX_DEPTH:
            raise Declined("too deep")
        return super().call_fn(fn, args)

    def stmt(self, s: ast.Stmt, fn: CheckedFn, defers: list) -> None:
        if isinstance(s, DECLINED):
            raise Declined(type(s).__name__)
        super().stmt(s, fn, defers)

    def expr(self, e: ast.Expr, fn: CheckedFn):
        if isinstance(e, DECLINED):
            raise Declined(type(e).__name__)
        if isinstance(e, ast.Call):  # the table names the base class's `call`, not this one
            self.tick(e.span)
            return self.call(e, fn)
        return super().expr(e, fn)

    def call(self, e: ast.Call, fn: CheckedFn):
        target = fn.typed.res(e)
        if target.kind is CallKind.BUILTIN and target.name in DELIBERATE:
            raise Declined(target.name)
        if target.kind is CallKind.FN:
            callee = self.fns.get(target.item.key)
            if callee is None or not is_pure(callee):
                raise Declined(target.name)
        return super().call(e, fn)


def calls_in(node) -> Iterator[ast.Call]:
    """Every call under `node`, arguments before the call that takes them (post-order)."""
    if isinstance(node, list):
        for x in node:
            yield from calls_in(x)
        return
    if not isinstance(node, ast.Node):
        return
    for f in dataclasses.fields(node):
        if f.name != "span":
            yield from calls_in(getattr(node, f.name))
    if isinstance(node, ast.Call):
        yield node


def fold_calls(fn: CheckedFn, fns: dict[str, CheckedFn], layout: RuntimeLayout) -> CheckedFn:
    """`fn` with the values of its evaluable calls (raises Refusal for a call that traps)."""
    values: NodeMap = NodeMap()
    for call in calls_in(fn.body):
        target = fn.typed.resolved.get(call)
        if target is None or target.kind is not CallKind.FN:
            continue
        callee = fns.get(target.item.key)
        if callee is None or not is_pure(callee) or callee.sig.ret not in SCALARS:
            continue
        args = [constant(a, fn, values) for a in call.args]
        if any(a is None for a in args):
            continue
        got = evaluate_call(callee, args, fns, layout, call)
        if got is not None:
            values[call] = got
    if not len(values):
        return fn
    values.freeze()
    return dataclasses.replace(fn, evaluated=values, folded_calls=fn.folded_calls + len(values))


def constant(a: ast.Expr, fn: CheckedFn, values: NodeMap) -> Optional[object]:
    """An argument's value when it is a constant: a folded literal tree or an evaluated call."""
    if a in values:
        return values[a]
    return fn.consts.get(a) if fn.consts is not None else None


def evaluate_call(callee: CheckedFn, args: list, fns: dict[str, CheckedFn], layout: RuntimeLayout,
                  call: ast.Call) -> Optional[object]:
    """The call's value, or None when it stays a run-time call; a trap is `constant-traps`."""
    ev = CallEvaluator(fns, layout)
    try:
        return ev.call_fn(callee, args)
    except Trap as t:
        raise Refusal(Rule.CONSTANT_TRAPS,
                      f"evaluating this call of the pure function `{callee.item.name}` traps: {t.reason}; "
                      "its arguments are constants, so it can only trap when it runs", call.span)
    except (Declined, BudgetExceeded, Refusal, RecursionError, KeyError, TypeError, AttributeError):
        return None


def fold_program(items, prog) -> list[Diagnostic]:
    """Evaluate the pure constant calls of every function `items` checked (in order), replacing
    its `CheckedFn` in `prog.fns`; the first call that traps refuses the program."""
    layout = RuntimeLayout(prog.types)
    for it in items:
        fn = prog.fns.get(it.key)
        if it.kind != "fn" or fn is None:
            continue
        try:
            prog.fns[it.key] = fold_calls(fn, prog.fns, layout)
        except Refusal as r:
            return [r.diagnostic]
    return []
