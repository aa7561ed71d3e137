"""How cancho values are represented in LLVM (runtime.md §0, §5.3).

Scalars are LLVM scalars; a slice reference is `{ptr, i64}`; structs and tuples are literal
structs of their members (members with no run-time representation, such as capabilities, are
left out); an enum is `{i64 tag, [K x i64]}` whose payload area holds the chosen variant's members
laid out as a literal struct. Capabilities and aggregates made only of them have no
representation at all (`None`).
"""

from __future__ import annotations

from typing import Optional

from llvmlite import binding as llvm
from llvmlite import ir

from ..check.typetable import TypeTable
from ..check.types import (BOOL, BYTE, CINT, CPTR, F32, FLOAT, INT, Adt, BoxT, Cap, FnT, Handle,
                           Ref, Slice, Tuple, Type)

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
DOUBLE, FLOATT = ir.DoubleType(), ir.FloatType()
SLICE = ir.LiteralStructType([PTR, I64])


class Layout:
    """Maps semantic types to LLVM types for one program."""

    def __init__(self, types: TypeTable, data_layout: str):
        self.types = types
        self.td = llvm.create_target_data(data_layout)
        self._cache: dict[Type, Optional[ir.Type]] = {}

    def lty(self, t: Type) -> Optional[ir.Type]:
        """The LLVM type of a value of type t; None when it has no run-time representation."""
        if t in self._cache:
            return self._cache[t]
        r = self._lty(t)
        self._cache[t] = r
        return r

    def _lty(self, t: Type) -> Optional[ir.Type]:
        if t == INT or t == CINT:
            return I64
        if t == BOOL:
            return I1
        if t == BYTE:
            return I8
        if t == FLOAT:
            return DOUBLE
        if t == F32:
            return FLOATT
        if isinstance(t, BoxT) and isinstance(t.inner, Slice):
            return SLICE
        if t == CPTR or isinstance(t, (BoxT, FnT)):
            return PTR
        if isinstance(t, Handle):
            return I64
        if isinstance(t, Cap):
            return None
        if isinstance(t, Ref):
            if isinstance(t.target, Slice):
                return SLICE
            return PTR if self.lty(t.target) is not None else None
        if isinstance(t, Tuple):
            return self._record([p for p in t.parts])
        if isinstance(t, Adt):
            if self.types.is_struct(t):
                return self._record([ft for _, ft in self.types.fields(t)])
            if self.types.is_enum(t):
                return ir.LiteralStructType([I64, ir.ArrayType(I64, self.payload_words(t))])
        raise NotImplementedError(f"values of type `{t}` are not supported yet by cancho-kernel's code generator")

    def _record(self, members: list[Type]) -> Optional[ir.Type]:
        parts = [self.lty(m) for m in members]
        kept = [p for p in parts if p is not None]
        return ir.LiteralStructType(kept) if kept else None

    def member_index(self, members: list[Type], idx: int) -> Optional[int]:
        """Position of member idx in the literal struct (members without representation are skipped)."""
        if self.lty(members[idx]) is None:
            return None
        return sum(1 for m in members[:idx] if self.lty(m) is not None)

    def members(self, t: Type) -> list[Type]:
        if isinstance(t, Tuple):
            return list(t.parts)
        return [ft for _, ft in self.types.fields(t)]

    def variant_struct(self, payload: list[Type]) -> Optional[ir.Type]:
        return self._record(payload)

    def payload_words(self, t: Adt) -> int:
        words = 0
        for _, payload in self.types.variants(t):
            st = self.variant_struct(payload)
            if st is not None:
                words = max(words, (st.get_abi_size(self.td) + 7) // 8)
        return words

    def size(self, t: ir.Type) -> int:
        return t.get_abi_size(self.td)

    def elem_storage(self, t: Type) -> tuple[ir.Type, int]:
        """How one slice element is stored: (LLVM type in memory, stride in bytes). Bytes are
        packed; booleans take a full 8-byte slot; aggregates use their natural layout."""
        if t == BYTE:
            return I8, 1
        if t == BOOL:
            return I64, 8
        lt = self.lty(t)
        if lt is None:
            raise NotImplementedError(f"slices of `{t}` are not supported")
        return lt, max(8, ((self.size(lt) + 7) // 8) * 8)
