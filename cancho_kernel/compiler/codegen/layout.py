"""How cancho values are represented in LLVM (runtime.md §0, §5.3).

Scalars are LLVM scalars; a slice reference is `{ptr, i64}`; structs and tuples are LLVM structs
of their members (members with no run-time representation, such as capabilities, are left out);
an enum is `{i64 tag, [K x i64]}` whose payload area holds the chosen variant's members laid out
as such a struct. Capabilities and aggregates made only of them have no representation at all
(`None`).

A record type is spelled out (a literal struct) only while its spelling is short; a longer one
is a named (identified) struct, so that every instruction mentioning it costs a name rather than
the list of its members — otherwise IR text grows with fields × uses (issue 12 §4: a 4,000-field
struct literal emitted 80 MB). Names belong to the module's own LLVM context.

A record of more than RECORD_CHUNK represented members is a tree of structs of at most that many
(member k sits at the base-16 digits of k). Building a flat struct of n members is a chain of n
`insertvalue`s, each a struct value of n elements, and LLVM's SCCP tracks every element of every
one: O(n²) time and memory at O2 (4,000 members: 11 s and 2.7 GB). Chunks keep each chain short.
The layout is ours alone (records never cross the C boundary), so the nesting's padding is free.
"""

from __future__ import annotations

import hashlib
from typing import Optional

from llvmlite import binding as llvm
from llvmlite import ir

from ..check.typetable import TypeTable
from ..layout import RECORD_CHUNK, RuntimeLayout
from ..check.types import (BOOL, BYTE, CINT, CPTR, F32, FLOAT, INT, Adt, BoxT, Cap, FnT, Handle,
                           Ref, Slice, Tuple, Type)

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
DOUBLE, FLOATT = ir.DoubleType(), ir.FloatType()
SLICE = ir.LiteralStructType([PTR, I64])
LITERAL_SPELLING_LIMIT = 64  # characters; a record type spelled longer than this gets a name


DIGITS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def short_digest(text: str, width: int = 6) -> str:
    """``width`` base-62 digits of the SHA-256 of ``text``."""
    n = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    out = []
    for _ in range(width):
        n, d = divmod(n, 62)
        out.append(DIGITS[d])
    return "".join(out)


class Layout:
    """Maps semantic types to LLVM types for one program, and caches what codegen asks of an
    aggregate on every use (members, member positions, variants, sizes) so that each use costs
    O(1) rather than O(members)."""

    def __init__(self, types: TypeTable, data_layout: str, context: ir.Context):
        self.types = types
        self.td = llvm.create_target_data(data_layout)
        self.context = context
        self._cache: dict[Type, Optional[ir.Type]] = {}
        self._members: dict[Type, list[Type]] = {}
        self._positions: dict[tuple, list[Optional[tuple[int, ...]]]] = {}
        self._variants: dict[Type, list[tuple[str, list[Type]]]] = {}
        self._variant_index: dict[Type, dict[str, int]] = {}
        self._field_index: dict[Type, dict[str, int]] = {}
        self._sizes: dict[str, int] = {}
        self._payload_types: dict[tuple, Optional[ir.Type]] = {}
        self.runtime = RuntimeLayout(types)  # sizes and strides shared with the evaluator

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
            return self._record(list(t.parts), "tuple")
        if isinstance(t, Adt):
            if t.key == "::Thread":
                return I64  # the `pthread_t` (codegen/threads.py)
            if self.types.is_struct(t):
                return self._record(self.members(t), t.name)
            if self.types.is_enum(t):
                return ir.LiteralStructType([I64, ir.ArrayType(I64, self.payload_words(t))])
        raise NotImplementedError(f"values of type `{t}` are not supported yet by cancho-kernel's code generator")

    def _record(self, members: list[Type], label: str) -> Optional[ir.Type]:
        """The struct of a record's represented members: flat up to RECORD_CHUNK of them, and
        beyond that a tree of chunks of RECORD_CHUNK (see `positions` for the paths)."""
        level = [p for p in (self.lty(m) for m in members) if p is not None]
        if not level:
            return None
        while len(level) > RECORD_CHUNK:
            level = [self._struct(level[g:g + RECORD_CHUNK], label + ".part")
                     for g in range(0, len(level), RECORD_CHUNK)]
        return self._struct(level, label)

    def _struct(self, parts: list[ir.Type], label: str) -> ir.Type:
        literal = ir.LiteralStructType(parts)
        spelled = str(literal)
        if len(spelled) <= LITERAL_SPELLING_LIMIT:
            return literal
        # Named by label and content, never by a counter: a function's lowered text then does
        # not depend on the types other functions named first (codegen/fncache.py keeps texts).
        # Six base-62 digits (~36 bits) keep every use short (the IR's size, issue 12); two
        # bodies meeting on one name take a suffix, and a kept text naming the other one is
        # refused by the lowering's assembly (lower.KeptTextsDisagree).
        name = f"{label}.{short_digest(spelled)}"
        named = self.context.get_identified_type(name)
        k = 0
        while not named.is_opaque and tuple(map(str, named.elements)) != tuple(map(str, parts)):
            k += 1
            named = self.context.get_identified_type(f"{name}.{k}")
        if named.is_opaque:
            named.set_body(*parts)
        return named

    def positions(self, members: list[Type]) -> list[Optional[tuple[int, ...]]]:
        """For each member, its index path in the LLVM struct (None: no run-time
        representation): `(k,)` in a flat record, the base-RECORD_CHUNK digits of k in a
        chunked one (k counts represented members only)."""
        key = tuple(members)
        got = self._positions.get(key)
        if got is None:
            count = sum(1 for m in members if self.lty(m) is not None)
            depth, width = 1, RECORD_CHUNK
            while count > width:
                depth, width = depth + 1, width * RECORD_CHUNK
            got, k = [], 0
            for m in members:
                if self.lty(m) is None:
                    got.append(None)
                    continue
                got.append(tuple((k // RECORD_CHUNK ** level) % RECORD_CHUNK
                                 for level in range(depth - 1, -1, -1)))
                k += 1
            self._positions[key] = got
        return got

    def member_index(self, members: list[Type], idx: int) -> Optional[tuple[int, ...]]:
        """Index path of member idx in the LLVM struct (members without representation are
        skipped)."""
        return self.positions(members)[idx]

    def members(self, t: Type) -> list[Type]:
        if isinstance(t, Tuple):
            return list(t.parts)
        got = self._members.get(t)
        if got is None:
            got = [ft for _, ft in self.types.fields(t)]
            self._members[t] = got
            self._field_index[t] = {n: i for i, (n, _) in enumerate(self.types.fields(t))}
        return got

    def field_index(self, t: Adt, name: str) -> int:
        """The declaration index of a struct's field."""
        self.members(t)
        return self._field_index[t][name]

    def variants(self, t: Adt) -> list[tuple[str, list[Type]]]:
        got = self._variants.get(t)
        if got is None:
            got = self.types.variants(t)
            self._variants[t] = got
            self._variant_index[t] = {n: i for i, (n, _) in enumerate(got)}
        return got

    def variant_index(self, t: Adt, name: str) -> int:
        """The tag of a variant: its declaration index."""
        self.variants(t)
        return self._variant_index[t][name]

    def variant_struct(self, payload: list[Type]) -> Optional[ir.Type]:
        """The struct a variant's members take inside an enum's payload area."""
        key = tuple(payload)
        if key not in self._payload_types:
            self._payload_types[key] = self._record(payload, "payload")
        return self._payload_types[key]

    def payload_words(self, t: Adt) -> int:
        """The shared layout's payload words, checked against every variant's LLVM struct."""
        words = self.runtime.payload_words(t)
        for _, payload in self.variants(t):
            st = self.variant_struct(payload)
            if st is not None and self.size(st) > 8 * words:
                raise NotImplementedError(f"the layout of `{t}` disagrees with LLVM's (a bug in cancho-kernel)")
        return words

    def size(self, t: ir.Type) -> int:
        """ABI size in bytes (named structs measured through their literal spelling)."""
        key = str(t)
        got = self._sizes.get(key)
        if got is None:
            got = _spelled_out(t).get_abi_size(self.td)
            self._sizes[key] = got
        return got

    def elem_storage(self, t: Type) -> tuple[ir.Type, int]:
        """How one slice element is stored: (LLVM type in memory, stride in bytes). Bytes are
        packed; booleans take a full 8-byte slot; aggregates use their natural layout (the
        stride is the shared layout's, compiler/layout.py, so the evaluator agrees)."""
        if t == BYTE:
            return I8, 1
        if t == BOOL:
            return I64, 8
        lt = self.lty(t)
        stride = self.runtime.stride(t)
        if lt is None or self.size(lt) > stride:
            raise NotImplementedError(f"the layout of `{t}` disagrees with LLVM's (a bug in cancho-kernel)")
        return lt, stride


def _spelled_out(t: ir.Type) -> ir.Type:
    """The same type with every named struct replaced by its literal body (same layout)."""
    if isinstance(t, ir.IdentifiedStructType) or isinstance(t, ir.LiteralStructType):
        return ir.LiteralStructType([_spelled_out(e) for e in t.elements])
    if isinstance(t, ir.ArrayType):
        return ir.ArrayType(_spelled_out(t.element), t.count)
    return t
