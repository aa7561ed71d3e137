"""Struct and enum declarations whose expansion never ends (rule `infinite-type`).

Two shapes, both decided on the declarations alone, in time linear in their size:

* **Non-regular recursion**: `struct S[T] { v: T, next: S[(T, T)] }`. `S[int]` needs
  `S[(int, int)]`, which needs a larger one again, so the set of instantiations is infinite
  (even behind a `Box`, since every one of them needs its own layout). Decided as in C# and Go:
  a graph whose nodes are type parameters, with an edge from each parameter to each argument
  position it occurs in; a cycle through an edge where the parameter sits *inside* the argument
  (rather than being the argument) is refused.
* **Infinite size through a generic**: `struct W[T] { v: T }` with `struct N { w: W[N] }`. The
  by-value members of every declaration are expanded with their type arguments substituted
  (a `Box`, reference, slice or function value ends the path), and a declaration one of whose
  instantiations is on a cycle of that graph is refused.

Both walks use explicit stacks, so a chain of 10,000 structs costs 10,000 steps, not Python
recursion. The instantiated-type graph is bounded by `limits.MAX_TYPE_NODES`/`MAX_INSTANCES`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterator

from ..diagnostics import Refusal, Rule
from .limits import MAX_INSTANCES, MAX_TYPE_NODES, tree_size
from .signatures import TypeDecl
from .types import Adt, Param, Tuple, Type, children, substitute

ParamNode = tuple[str, str]  # (declaration key, type parameter name)


@dataclass(frozen=True)
class ParamEdge:
    """A parameter of one declaration occurring in an argument position of another."""

    target: ParamNode
    expanding: bool  # the parameter sits inside the argument, not as the argument
    occurrence: Adt


def all_types(t: Type) -> Iterator[Type]:
    """t and every type inside it (an explicit stack: no recursion)."""
    stack = [t]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(children(x))


def members(td: TypeDecl) -> list[Type]:
    return [ft for _, ft in td.fields] + [p for _, ps in td.variants for p in ps]


def refuse_infinite(td: TypeDecl, message: str) -> Refusal:
    span = td.decl.name.span if td.decl is not None else None
    return Refusal(Rule.INFINITE_TYPE, message, span)


def non_regular(decls: dict[str, TypeDecl]) -> dict[str, Refusal]:
    """Declarations on an expanding cycle of the parameter graph, each with its refusal."""
    edges: dict[ParamNode, list[ParamEdge]] = defaultdict(list)
    for td in decls.values():
        for m in members(td):
            for x in all_types(m):
                if not (isinstance(x, Adt) and x.args and x.key in decls):
                    continue
                callee = decls[x.key]
                for p, arg in zip(callee.tparams, x.args):
                    for y in all_types(arg):
                        if isinstance(y, Param) and y.owner == td.key:
                            edges[(td.key, y.name)].append(ParamEdge((callee.key, p.name), arg != y, x))
    refused: dict[str, Refusal] = {}
    for source, outs in list(edges.items()):
        key = source[0]
        if key in refused:
            continue
        for edge in outs:
            if edge.expanding and reaches(edges, edge.target, source):
                td = decls[key]
                refused[key] = refuse_infinite(
                    td, f"`{td.name}` mentions `{edge.occurrence}`: every instantiation of `{td.name}` asks "
                        f"for a larger one, so there would be infinitely many (a non-regular type)")
                break
    return refused


def reaches(edges: dict, start: ParamNode, goal: ParamNode) -> bool:
    """Whether ``goal`` can be reached from ``start`` along ``edges`` (each edge has a ``target``);
    shared by the type-declaration and the call-graph cycle checks."""
    seen = {start}
    stack = [start]
    while stack:
        n = stack.pop()
        if n == goal:
            return True
        for e in edges.get(n, ()):
            if e.target not in seen:
                seen.add(e.target)
                stack.append(e.target)
    return False


def by_value_adts(t: Type) -> Iterator[Adt]:
    """The aggregates t holds in place: through tuples, not through Box, references or slices."""
    stack = [t]
    while stack:
        x = stack.pop()
        if isinstance(x, Adt):
            yield x
        elif isinstance(x, Tuple):
            stack.extend(x.parts)


def infinite_size(decls: dict[str, TypeDecl], skip: set[str]) -> dict[str, Refusal]:
    """Declarations one of whose instantiations contains itself by value, or whose expansion
    exceeds the limits; each with its refusal."""
    refused: dict[str, Refusal] = {}
    ids: dict[Adt, int] = {}
    nodes: list[Adt] = []
    succ: list[list[int]] = []
    owner: list[str] = []  # the declaration whose expansion first reached the node

    def generic(td: TypeDecl) -> Adt:
        return Adt(td.key, td.name, tuple(td.tparams))

    def node(t: Adt, root: str) -> int | None:
        got = ids.get(t)
        if got is not None:
            return got
        td = decls[root]
        if tree_size(t) > MAX_TYPE_NODES:
            refused.setdefault(root, refuse_infinite(
                td, f"expanding `{td.name}` builds a type of more than {MAX_TYPE_NODES} parts "
                    f"(the compiler's limit on the size of a type)"))
            return None
        if len(nodes) >= MAX_INSTANCES:
            refused.setdefault(root, refuse_infinite(
                td, f"expanding `{td.name}` needs more than {MAX_INSTANCES} instantiated types "
                    f"(the compiler's limit)"))
            return None
        ids[t] = len(nodes)
        nodes.append(t)
        succ.append([])
        owner.append(root)
        return ids[t]

    todo: list[int] = []
    for td in decls.values():
        if td.key in skip or td.decl is None:
            continue
        n = node(generic(td), td.key)
        if n is not None:
            todo.append(n)
    while todo:
        i = todo.pop()
        t = nodes[i]
        td = decls[t.key]
        s = {("T", p.name): a for p, a in zip(td.tparams, t.args)}
        for m in members(td):
            for inner in by_value_adts(substitute(m, s) if s else m):
                if inner.key not in decls or inner.key in skip or inner.key.startswith("::Split"):
                    continue
                known = inner in ids
                j = node(inner, owner[i])
                if j is None:
                    continue
                succ[i].append(j)
                if not known:
                    todo.append(j)

    cyclic = cyclic_nodes(succ)
    by_key: dict[str, set[int]] = defaultdict(set)
    for i in cyclic:
        by_key[nodes[i].key].add(i)
    for key, mine in by_key.items():
        td = decls[key]
        start = ids.get(generic(td))
        if start is None or key in refused:
            continue
        if start in mine or reaches_any(succ, start, mine):
            refused[key] = refuse_infinite(
                td, f"`{td.name}` contains itself, so it would have no finite size; put a `Box` on the path back to it")
    return refused


def reaches_any(succ: list[list[int]], start: int, goals: set[int]) -> bool:
    seen = {start}
    stack = [start]
    while stack:
        n = stack.pop()
        for m in succ[n]:
            if m in goals:
                return True
            if m not in seen:
                seen.add(m)
                stack.append(m)
    return False


def cyclic_nodes(succ: list[list[int]]) -> set[int]:
    """Nodes on a cycle: members of a strongly connected component of two or more nodes, or
    with an edge to themselves (Tarjan's algorithm with an explicit stack)."""
    n = len(succ)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    out: set[int] = set()
    counter = 0
    for root in range(n):
        if index[root] != -1:
            continue
        work = [(root, 0)]
        while work:
            v, pos = work[-1]
            if pos == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            if pos < len(succ[v]):
                work[-1] = (v, pos + 1)
                w = succ[v][pos]
                if index[w] == -1:
                    work.append((w, 0))
                elif on_stack[w]:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in succ[v]:
                    out.update(comp)
    return out


def check_type_cycles(decls: dict[str, TypeDecl]) -> dict[str, Refusal]:
    """Every declaration refused as non-regular or infinite, by key (at most one refusal each)."""
    refused = non_regular(decls)
    refused.update(infinite_size(decls, set(refused)))
    return refused
