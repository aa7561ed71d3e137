"""`cancho layout`: what each declared type costs in memory, in the reference's report form
(its `docs/layout.md` §4): leaves, size, packed, stride.

* **leaves**: the scalars a value is made of (a slice reference or boxed slice is two, a pointer
  and a length; an enum is its tag and its widest variant's leaves; a capability is none).
* **size** and **stride**: this compiler's own layout (``compiler/layout.py``, the one codegen and
  the static evaluator follow): a value's size, and the distance between two elements of a `[T]`.
* **packed**: what it would take with every leaf at its natural width (`byte`/`bool` and an enum's
  tag 1, `f32` 4, everything else 8), widest first, rounded to the widest.

Prelude types are not the program's and are left out; a generic declaration has no one layout,
so it is skipped, as the reference does. The closing line sums what packing would save and
links the reference's section on packing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .check.typetable import PRELUDE_DECLS, TypeTable
from .check.types import (BOOL, BYTE, CINT, CPTR, F32, FLOAT, INT, Adt, BoxT, Cap, FnT, Handle, Ref,
                          Slice, Tuple, Type)
from .layout import RuntimeLayout

NATURAL = {INT: 8, CINT: 8, BOOL: 1, BYTE: 1, FLOAT: 8, F32: 4, CPTR: 8}
TAG_WIDTH = 1
# The reference's closing line cites its own document; here it is a link to it.
PACKING_DOC = "https://github.com/alpibrusl/cancho/blob/main/docs/layout.md#2-packing-real-and-nothing-here-can-spend-it"


@dataclass(frozen=True)
class TypeLayout:
    """One row of the report."""

    name: str
    leaves: int
    size: int
    packed: int
    stride: int


def leaf_widths(t: Type, types: TypeTable) -> list[int]:
    """The natural width of each scalar leaf of a value of type `t`."""
    if t in NATURAL:
        return [NATURAL[t]]
    if isinstance(t, Cap):
        return []
    if isinstance(t, (BoxT, Ref)):
        inner = t.inner if isinstance(t, BoxT) else t.target
        if isinstance(inner, Slice):
            return [8, 8]
        return [8] if isinstance(t, BoxT) or leaf_widths(inner, types) else []
    if isinstance(t, (FnT, Handle)):
        return [8]
    if isinstance(t, Tuple):
        return [w for p in t.parts for w in leaf_widths(p, types)]
    if isinstance(t, Adt) and types.is_struct(t):
        return [w for _, ft in types.fields(t) for w in leaf_widths(ft, types)]
    if isinstance(t, Adt) and types.is_enum(t):
        payloads = [[w for p in ps for w in leaf_widths(p, types)] for _, ps in types.variants(t)]
        widest = max(payloads, key=_packed_size, default=[])
        return [TAG_WIDTH] + widest
    return [8]


def _packed_size(widths: list[int]) -> int:
    if not widths:
        return 0
    total = sum(sorted(widths, reverse=True))
    align = max(widths)
    return (total + align - 1) // align * align


def layout_rows(types: TypeTable) -> list[TypeLayout]:
    """A row per declared, non-generic struct or enum, in declaration order."""
    runtime = RuntimeLayout(types)
    rows: list[TypeLayout] = []
    for key, td in types.decls.items():
        if key in PRELUDE_DECLS or td.tparams:
            continue
        t = Adt(key, td.name)
        widths = leaf_widths(t, types)
        shape = runtime.shape(t)
        stride: Optional[int] = runtime.stride(t) if shape is not None else 0
        rows.append(TypeLayout(td.name, len(widths), shape.size if shape is not None else 0,
                               _packed_size(widths), stride or 0))
    return rows


def render_layout(rows: list[TypeLayout]) -> str:
    """The reference's table, and its closing line when packing would save anything."""
    lines = [f"{'type':<24} {'leaves':>6} {'size':>7} {'packed':>8} {'stride':>8}"]
    lines += [f"{r.name:<24} {r.leaves:>6} {r.size:>7} {r.packed:>8} {r.stride:>8}" for r in rows]
    savings = sum(max(0, r.size - r.packed) for r in rows)
    if savings:
        lines += ["", f"packing would save {savings} bytes per copy across these types "
                      f"({PACKING_DOC})"]
    return "".join(line + "\n" for line in lines)
