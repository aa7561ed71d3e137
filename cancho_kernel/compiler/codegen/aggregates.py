"""Lowering aggregates: tuples, structs, enums, member access, destructuring and `match`.

Held by `FnLowering` (lower.py), with a typed reference back to it. Enum values go through a stack slot when built or taken
apart, so the payload area can hold any variant's members in their natural layout; O2's SROA
turns those slots back into registers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from llvmlite import ir

from .. import ast
from ..check.typed import Local, Member, MemberMode
from ..check.types import Adt, Tuple, Type
from .layout import I64

ZERO = ir.Constant(ir.IntType(32), 0)


def i32(n: int) -> ir.Constant:
    return ir.Constant(ir.IntType(32), n)


def gep(b: ir.IRBuilder, ptr: ir.Value, indices: list, etype: ir.Type) -> ir.Value:
    """An inbounds GEP that works on both typed (alloca) and opaque (loaded) pointers."""
    if getattr(ptr.type, "is_opaque", False):
        return b.gep(ptr, indices, inbounds=True, source_etype=etype)
    return b.gep(ptr, indices, inbounds=True)


def as_ptr_to(b: ir.IRBuilder, ptr: ir.Value, etype: ir.Type) -> ir.Value:
    """View a typed pointer as pointing to etype (a no-op for opaque pointers)."""
    if getattr(ptr.type, "is_opaque", False):
        return ptr
    return b.bitcast(ptr, etype.as_pointer())


if TYPE_CHECKING:
    from .lower import FnLowering


class AggregateLowering:
    """Aggregates of one function body, lowered for (and through) the `FnLowering` that owns them."""

    def __init__(self, gen: "FnLowering"):
        self.gen = gen
        self.b = gen.b
        self.layout = gen.layout
        self.alloca_builder = gen.alloca_builder
        self.func = gen.func
        self.fn = gen.fn

    def build_record(self, t: Type, values: list[Optional[ir.Value]]) -> Optional[ir.Value]:
        """A struct or tuple value from its members' values (in declaration order)."""
        lt = self.gen.lty(t)
        if lt is None:
            return None
        positions = self.layout.positions(self.layout.members(t))
        return self.build_struct(lt, {p: v for p, v in zip(positions, values) if p is not None})

    def build_struct(self, lt: ir.Type, leaves: dict[tuple, ir.Value], prefix: tuple = ()) -> ir.Value:
        """A struct value from its members' values by index path; an element no path names is a
        chunk of a large record (layout.py), built the same way from the paths below it."""
        agg = ir.Constant(lt, ir.Undefined)
        for i, et in enumerate(lt.elements):
            path = prefix + (i,)
            v = leaves[path] if path in leaves else self.build_struct(et, leaves, path)
            agg = self.b.insert_value(agg, v, i)
        return agg

    def record_member(self, agg: Optional[ir.Value], t: Type, idx: int) -> Optional[ir.Value]:
        path = self.layout.member_index(self.layout.members(t), idx)
        return None if path is None or agg is None else self.b.extract_value(agg, list(path))

    def member_ptr(self, ptr: ir.Value, t: Type, idx: int) -> Optional[ir.Value]:
        path = self.layout.member_index(self.layout.members(t), idx)
        if path is None or ptr is None:
            return None
        return gep(self.b, ptr, [ZERO] + [i32(j) for j in path], self.gen.lty(t))

    # ------------------------------------------------------------ expressions

    def tuple_expr(self, e: ast.TupleExpr) -> Optional[ir.Value]:
        return self.build_record(self.gen.ty(e), [self.gen.expr(p) for p in e.parts])

    def struct_lit(self, e: ast.StructLit) -> Optional[ir.Value]:
        return self.build_record(self.gen.ty(e), [self.gen.expr(f.value) for f in e.fields])

    def variant_expr(self, e: ast.VariantExpr) -> ir.Value:
        t: Adt = self.gen.ty(e)
        values = [self.gen.expr(a) for a in (e.args or [])]
        return self.make_variant(t, ir.Constant(I64, self.layout.variant_index(t, e.variant.name)), values)

    def make_variant(self, t: Adt, tag: ir.Value, values: list) -> ir.Value:
        """An enum value with the given tag and payload values. The payload's shape is that of
        the variant a constant tag names; a run-time tag is only used for same-shaped variants."""
        variants = self.layout.variants(t)
        idx = tag.constant if isinstance(tag, ir.Constant) else 0
        payload = variants[idx][1]
        lt = self.gen.lty(t)
        slot = self.alloca_builder.alloca(lt, name="enum")
        self.b.store(ir.Constant(lt, None), slot)
        self.b.store(tag, gep(self.b, slot, [ZERO, i32(0)], lt))
        st = self.layout.variant_struct(payload)
        if st is not None:
            area = as_ptr_to(self.b, gep(self.b, slot, [ZERO, i32(1)], lt), st)
            leaves = {p: v for p, v in zip(self.layout.positions(payload), values) if p is not None}
            self.b.store(self.build_struct(st, leaves), area)
        return self.b.load(slot, typ=lt)

    def member(self, e: ast.Expr) -> Optional[ir.Value]:
        m: Member = self.gen.res(e)
        idx = m.index
        base = e.base
        if m.mode is MemberMode.OWNED:
            bt = self.gen.ty(base)
            v = self.gen.expr(base) if not isinstance(base, ast.Name) else self.load_local(base)
            return self.record_member(v, bt, idx)
        ref = self.gen.expr(base)
        agg_t = self.gen.ty(base).target
        p = self.member_ptr(ref, agg_t, idx)
        if m.mode is MemberMode.REF_RES:
            return p
        return None if p is None else self.b.load(p, typ=self.gen.lty(self.gen.ty(e)))

    def load_local(self, name: ast.Name) -> Optional[ir.Value]:
        loc: Local = self.gen.res(name)
        slot = self.gen.slot(loc)
        return None if slot is None else self.b.load(slot, typ=self.gen.lty(loc.ty))

    def assign_member(self, target: ast.Expr, v: Optional[ir.Value]) -> None:
        idx = self.gen.res(target).index
        ref = self.gen.expr(target.base)
        p = self.member_ptr(ref, self.gen.ty(target.base).target, idx)
        if p is not None and v is not None:
            self.b.store(v, p)

    # ------------------------------------------------------------ statements

    def let_parts(self, s: ast.Stmt, value_t: Type, v: Optional[ir.Value], locals_) -> None:
        """Bind each destructured member to its local (struct fields by name, tuple by position)."""
        if isinstance(value_t, Tuple):
            indexed = list(enumerate(locals_))
        else:
            indexed = [(self.layout.field_index(value_t, loc.name), loc) for loc in locals_]
        for idx, loc in indexed:
            slot = self.gen.slot(loc)
            if slot is not None:
                self.b.store(self.record_member(v, value_t, idx), slot)

    def match_stmt(self, s: ast.Match) -> None:
        owned = self.fn.typed.bindings[s].owned
        sv = self.gen.expr(s.scrutinee)
        st = self.gen.ty(s.scrutinee)
        et: Adt = st if owned else st.target
        lt = self.gen.lty(et)
        if owned:
            ptr = self.alloca_builder.alloca(lt, name="scrutinee")
            self.b.store(sv, ptr)
        else:
            ptr = sv
        tag = self.b.load(gep(self.b, ptr, [ZERO, i32(0)], lt), typ=I64)
        variants = self.layout.variants(et)
        end = self.func.append_basic_block("match.end")
        default = None
        cases: list[tuple[int, ir.Block, ast.Arm]] = []
        for arm in s.arms:
            bb = self.func.append_basic_block("match.arm")
            if isinstance(arm.pattern, ast.WildcardPattern):
                default = (bb, arm)
            else:
                cases.append((self.layout.variant_index(et, arm.pattern.variant.name), bb, arm))
        if default is None:
            unreachable = self.func.append_basic_block("match.none")
            dflt_bb = unreachable
        else:
            dflt_bb = default[0]
        sw = self.b.switch(tag, dflt_bb)
        for tagv, bb, _ in cases:
            sw.add_case(ir.Constant(I64, tagv), bb)
        if default is None:
            self.b.position_at_end(unreachable)
            self.b.unreachable()
        arms = [(bb, arm, tagv) for tagv, bb, arm in cases]
        if default is not None:
            arms.append((default[0], default[1], None))
        for bb, arm, tagv in arms:
            self.b.position_at_end(bb)
            if tagv is not None:
                payload = variants[tagv][1]
                vst = self.layout.variant_struct(payload)
                area = gep(self.b, ptr, [ZERO, i32(1)], lt)
                area = as_ptr_to(self.b, area, vst) if vst is not None else area
                for i, loc in self.fn.typed.bindings[arm].binds:
                    slot = self.gen.slot(loc)
                    if slot is None:
                        continue
                    path = self.layout.member_index(payload, i)
                    mp = gep(self.b, area, [ZERO] + [i32(j) for j in path], vst)
                    self.b.store(mp if not owned else self.b.load(mp, typ=self.gen.lty(loc.ty)), slot)
            self.gen.block(arm.body)
            if not self.b.block.is_terminated:
                self.b.branch(end)
        self.b.position_at_end(end)
