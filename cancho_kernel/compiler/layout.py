"""The run-time layout of cancho values, in bytes: the one description that codegen and the
compile-time evaluator both follow, so a `static` computes exactly what the same body computes
when the program runs (same values, traps in the same cases; runtime.md §0, §5.3, §5.4).

It fixes the arena capacity, each type's size and alignment, a slice element's stride and an
enum's payload words. Sizes follow the natural (C, LP64) layout of the LLVM types codegen emits
for these types (codegen/layout.py): a record is a struct of its represented members, nested in
chunks of RECORD_CHUNK; an enum is an 8-byte tag and a payload area of whole words; `bool` is one
byte in a record. What a value takes *in an arena* (a slice element's stride, an `alloc`) is a
word per scalar leaf instead, bytes in a byte slice packed, as the reference has it, so the same
program exhausts an arena at the same element; codegen checks that no stride is below LLVM's
own ABI size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .check.typetable import TypeTable
from .check.types import (BOOL, BYTE, CINT, CPTR, F32, FLOAT, INT, Adt, BoxT, Cap, FnT, Handle,
                          Ref, Slice, Tuple, Type)

ARENA_BYTES = 65536  # one `region` block's arena (runtime.md §5.3)
WORD = 8
RECORD_CHUNK = 16  # members per struct level; a larger record nests chunks of this many


@dataclass(frozen=True)
class Shape:
    """Size and alignment in bytes of a value with a run-time representation."""

    size: int
    align: int


SCALAR = {INT: Shape(8, 8), CINT: Shape(8, 8), BOOL: Shape(1, 1), BYTE: Shape(1, 1),
          FLOAT: Shape(8, 8), F32: Shape(4, 4), CPTR: Shape(8, 8)}
POINTER = Shape(8, 8)
SLICE_REF = Shape(16, 8)  # (pointer, length)


def _round_up(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def struct_shape(parts: list[Shape]) -> Shape:
    """A non-packed struct: each member at its alignment, the whole rounded to the largest."""
    offset, align = 0, 1
    for p in parts:
        offset = _round_up(offset, p.align) + p.size
        align = max(align, p.align)
    return Shape(_round_up(offset, align), align)


class RuntimeLayout:
    """Sizes and strides of one program's types (caches per type; one per compilation)."""

    def __init__(self, types: TypeTable) -> None:
        self.types = types
        self._shapes: dict[Type, Optional[Shape]] = {}
        self._leaves: dict[Type, int] = {}

    def shape(self, t: Type) -> Optional[Shape]:
        """Size and alignment of a value of type t; None when it has no run-time representation
        (capabilities, and aggregates made only of them)."""
        if t not in self._shapes:
            self._shapes[t] = self._shape(t)
        return self._shapes[t]

    def _shape(self, t: Type) -> Optional[Shape]:
        if t in SCALAR:
            return SCALAR[t]
        if isinstance(t, BoxT):
            return SLICE_REF if isinstance(t.inner, Slice) else POINTER
        if isinstance(t, (FnT, Handle)):
            return POINTER
        if isinstance(t, Cap):
            return None
        if isinstance(t, Ref):
            if isinstance(t.target, Slice):
                return SLICE_REF
            return POINTER if self.shape(t.target) is not None else None
        if isinstance(t, Tuple):
            return self.record(list(t.parts))
        if isinstance(t, Adt) and self.types.is_struct(t):
            return self.record([ft for _, ft in self.types.fields(t)])
        if isinstance(t, Adt) and self.types.is_enum(t):
            return Shape(WORD * (1 + self.payload_words(t)), WORD)
        raise NotImplementedError(f"values of type `{t}` have no run-time layout in cancho-kernel")

    def record(self, members: list[Type]) -> Optional[Shape]:
        """A record's represented members, flat up to RECORD_CHUNK and chunked beyond."""
        level = [s for s in (self.shape(m) for m in members) if s is not None]
        if not level:
            return None
        while len(level) > RECORD_CHUNK:
            level = [struct_shape(level[g:g + RECORD_CHUNK]) for g in range(0, len(level), RECORD_CHUNK)]
        return struct_shape(level)

    def payload_words(self, t: Adt) -> int:
        """Words of an enum's payload area: its largest variant's record, rounded up."""
        words = 0
        for _, payload in self.types.variants(t):
            s = self.record(payload)
            if s is not None:
                words = max(words, _round_up(s.size, WORD) // WORD)
        return words

    def leaves(self, t: Type) -> int:
        """How many scalar leaves a value is made of (the reference's defined-behaviour.md §5,
        layout.md §1): a scalar, pointer, handle or function is one, a slice reference or boxed
        slice two (pointer, length), an aggregate the sum of its members', an enum its tag and its
        largest variant's; a capability none."""
        if t in self._leaves:
            return self._leaves[t]
        if isinstance(t, Cap):
            n = 0
        elif isinstance(t, (Ref, BoxT)):
            n = 2 if isinstance(t.target if isinstance(t, Ref) else t.inner, Slice) else \
                (1 if self.shape(t) is not None else 0)
        elif isinstance(t, Tuple):
            n = sum(self.leaves(p) for p in t.parts)
        elif isinstance(t, Adt) and self.types.is_struct(t):
            n = sum(self.leaves(ft) for _, ft in self.types.fields(t))
        elif isinstance(t, Adt) and self.types.is_enum(t):
            n = 1 + max((sum(self.leaves(p) for p in ps) for _, ps in self.types.variants(t)), default=0)
        else:
            n = 1 if self.shape(t) is not None else 0
        self._leaves[t] = n
        return n

    def stride(self, elem: Type) -> int:
        """Bytes one slice element takes, which is what an arena's capacity is counted in (a trap
        past it is observable): bytes are packed, and anything else takes a word per leaf, as the
        reference lays it out (layout.md §1: an `Rgb` of three bytes is 24, so an arena holds
        2,730). Never less than the natural size codegen stores (codegen/layout.py checks)."""
        if elem == BYTE:
            return 1
        if self.shape(elem) is None:
            raise NotImplementedError(f"slices of `{elem}` have no run-time layout in cancho-kernel")
        return WORD * max(1, self.leaves(elem))

    def alloc_size(self, t: Type) -> int:
        """Bytes `alloc[r](v)` takes from its arena: a word per leaf, as a slice element."""
        return WORD * max(1, self.leaves(t))
