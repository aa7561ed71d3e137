"""Bounding monomorphisation before codegen sees a program (rule `infinite-type`).

Codegen lowers one LLVM function per distinct list of type arguments a generic function is
called with. Two kinds of program would make that work unbounded, and both are refused here, at
the call that asks for the instantiation:

* **Polymorphic recursion**: `fn f[T: val](x: T, n: int)` calling `f((x, x), n - 1)`. Each
  instantiation asks for a larger one, forever. Decided statically as Go does: a graph whose
  nodes are the type parameters of generic functions, with an edge from a caller's parameter to
  each callee parameter whose argument mentions it; a cycle through an edge where the parameter
  sits *inside* the argument (`(T, T)` rather than `T`) is refused.
* **Finite but explosive instantiation**: 24 generic functions each calling the next at
  `(T, T)` need a type of 2^24 parts. Every instantiation reachable from a non-generic function
  is computed (types only, no code) under `limits.MAX_TYPE_NODES` per type argument and
  `limits.MAX_INSTANCES` instantiations in all.

Every walk uses an explicit work list and every type is measured with a capped count before it
is built or hashed, so the checker's own work is bounded by the limits.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Optional

from .. import ast
from ..diagnostics import Diagnostic, Rule
from .checked import CallTarget, CheckedFn
from .limits import MAX_INSTANCES, MAX_TYPE_NODES, tree_size
from .typecycles import all_types, reaches
from .types import Param, Type, children, substitute

ParamNode = tuple[str, str]  # (function key, type parameter name)


@dataclass(frozen=True)
class CallEdge:
    """A caller's type parameter occurring in the type argument a call gives a callee."""

    target: ParamNode
    expanding: bool  # the parameter sits inside the argument, not as the argument
    call: ast.Call
    argument: Type
    callee_name: str


@dataclass(frozen=True)
class Instance:
    """One instantiation codegen would lower: a function and its type arguments."""

    key: str
    args: tuple[Type, ...]


def check_instantiation(fns: dict[str, CheckedFn]) -> Optional[Diagnostic]:
    """The first call that would make monomorphisation endless or exceed the limits, if any."""
    return polymorphic_recursion(fns) or instantiation_limits(fns)


def type_arguments(target: CallTarget) -> list[tuple[str, Type]]:
    return [(name, target.subst[("T", name)]) for name in target.sig.tparams]


def too_large(call: ast.Call, callee: str, name: str) -> Diagnostic:
    return Diagnostic(
        Rule.INFINITE_TYPE,
        f"this call instantiates `{callee}` with `{name}` a type of more than {MAX_TYPE_NODES} parts "
        f"(the compiler's limit on the size of a type argument)", call.span)


def polymorphic_recursion(fns: dict[str, CheckedFn]) -> Optional[Diagnostic]:
    edges: dict[ParamNode, list[CallEdge]] = defaultdict(list)
    for key, fn in fns.items():
        for call in fn.generic_calls:
            target: CallTarget = fn.typed.res(call)
            callee = target.item.key
            for name, arg in type_arguments(target):
                if tree_size(arg) > MAX_TYPE_NODES:
                    return too_large(call, target.name, name)
                for y in all_types(arg):
                    if isinstance(y, Param) and y.owner == key:
                        edges[(key, y.name)].append(CallEdge((callee, name), arg != y, call, arg, target.name))
    for source, outs in edges.items():
        for edge in outs:
            if edge.expanding and reaches(edges, edge.target, source):
                fname = edge.callee_name
                return Diagnostic(
                    Rule.INFINITE_TYPE,
                    f"this call gives `{fname}` the type argument `{edge.argument}`, built from "
                    f"`{source[1]}`, and leads back to it: every instantiation asks for a larger one, so "
                    f"there would be infinitely many (polymorphic recursion)", edge.call.span)
    return None


def size_under(t: Type, sizes: dict[str, int]) -> int:
    """tree_size of `substitute(t, ...)` without building it: a parameter counts as the size of
    its argument (`sizes`, by name); capped like tree_size."""
    count = 0
    stack = [t]
    while stack:
        x = stack.pop()
        if isinstance(x, Param) and x.name in sizes:
            count += sizes[x.name]
        else:
            count += 1
            stack.extend(children(x))
        if count > MAX_TYPE_NODES:
            return MAX_TYPE_NODES + 1
    return count


def instantiation_limits(fns: dict[str, CheckedFn]) -> Optional[Diagnostic]:
    """Walk every instantiation reachable from the non-generic functions, as codegen would."""
    seen: set[Instance] = set()
    todo: list[Instance] = []
    for key, fn in fns.items():
        if not fn.sig.tparams:
            inst = Instance(key, ())
            seen.add(inst)
            todo.append(inst)
    while todo:
        inst = todo.pop()
        fn = fns[inst.key]
        names = list(fn.sig.tparams)
        tsub = {("T", n): a for n, a in zip(names, inst.args)}
        sizes = {n: tree_size(a) for n, a in zip(names, inst.args)}
        for call in fn.generic_calls:
            target = fn.typed.res(call)
            callee = target.item.key
            if callee not in fns:
                continue
            args: list[Type] = []
            for name, arg in type_arguments(target):
                if size_under(arg, sizes) > MAX_TYPE_NODES:
                    return too_large(call, target.name, name)
                args.append(substitute(arg, tsub) if tsub else arg)
            new = Instance(callee, tuple(args))
            if new in seen:
                continue
            if len(seen) >= MAX_INSTANCES:
                return Diagnostic(
                    Rule.INFINITE_TYPE,
                    f"this call needs one instantiation more than the {MAX_INSTANCES} the compiler makes "
                    f"of generic functions in one program", call.span)
            seen.add(new)
            todo.append(new)
    return None
