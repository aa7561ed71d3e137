"""A function's or `static`'s `body` identity (``compiler/ids.py``; the reference's
`docs/canonical-ast.md` §5): the statements and expressions encoded up to alpha-equivalence.

Binders (parameters, `let`/`var`, pattern bindings, destructured fields, a `borrow`'s reference)
are a stack, and a name that is bound encodes its position on it, the last binding winning; regions
(the declaration's, then each `borrow` and `region` block's) are a second stack. A name not bound
here encodes the callee's `sig` (a function) or the declaration's identity (a type), else its text
(a builtin). A struct pattern's fields are sorted by name, binders with them.
"""

from __future__ import annotations

import struct
from typing import Optional, Union

from . import ast
from .ids_encode import (ALLOC, ALLOC_SLICE, ASSIGN, BINARY, BINARY_TAGS, BOOL, BORROW, CALL, DEFER, DESTRUCTURE,
                  DESTRUCTURE_TUPLE, DOMAIN_BODY, EXPR_STMT, F32, FIELD, FLOAT, FREE, IF, INDEX, INT, LET, LOCAL,
                  MATCH, NONE, PATTERN_VARIANT, PATTERN_WILDCARD, REGION, RETURN, SOME, STR, STRUCT_LIT, SUBSLICE,
                  TUPLE, TUPLE_FIELD, UNARY, UNARY_TAGS, VARIANT, WHILE, Context, Encoder, _positional,
                  _split_generics, encode_type)


def hash_body(decl: Union[ast.FnDecl, ast.StaticDecl], ctx: Context) -> bytes:
    if isinstance(decl, ast.StaticDecl):
        hasher = BodyHasher(ctx, [], [], [])
    else:
        tparams, regions, _ = _split_generics(decl.generics)
        hasher = BodyHasher(ctx, [p.name for p in tparams], list(regions), [p.name.name for p in decl.params])
    hasher.block(decl.body.stmts)
    return hasher.enc.finish(DOMAIN_BODY)


class BodyHasher:
    """The encoder and the two scopes while one body is walked."""

    def __init__(self, ctx: Context, generics: list[str], regions: list[str], binders: list[str]) -> None:
        self.ctx, self.generics, self.regions, self.binders = ctx, generics, regions, binders
        self.enc = Encoder()

    def block(self, stmts: list[ast.Stmt]) -> None:
        depth = len(self.binders)
        self.enc.u32(len(stmts))
        for s in stmts:
            self.stmt(s)
        del self.binders[depth:]

    def type(self, t: ast.TypeExpr) -> None:
        encode_type(self.enc, t, self.ctx, self.generics, self.regions)

    def stmt(self, s: ast.Stmt) -> None:
        enc = self.enc
        if isinstance(s, ast.Let):
            enc.tag(LET).bool(s.mutable)
            if s.ty is None:
                enc.tag(NONE)
            else:
                enc.tag(SOME)
                self.type(s.ty)
            self.expr(s.value)
            self.binders.append(s.name.name)
        elif isinstance(s, ast.Assign):
            enc.tag(ASSIGN)
            self.expr(s.target)
            self.expr(s.value)
        elif isinstance(s, ast.ExprStmt):
            enc.tag(EXPR_STMT)
            self.expr(s.expr)
        elif isinstance(s, ast.If):
            self.if_stmt(s)
        elif isinstance(s, ast.While):
            enc.tag(WHILE)
            self.expr(s.cond)
            self.block(s.body.stmts)
        elif isinstance(s, ast.Match):
            self.match(s)
        elif isinstance(s, (ast.Return, ast.Defer)):
            enc.tag(RETURN if isinstance(s, ast.Return) else DEFER)
            self.expr(s.value if isinstance(s, ast.Return) else s.expr)
        else:
            self.scoped_stmt(s)

    def scoped_stmt(self, s: ast.Stmt) -> None:
        """The statements that bind: borrows, regions and destructuring."""
        enc = self.enc
        if isinstance(s, ast.Borrow):
            enc.tag(BORROW).bool(s.unique)
            self.name(None, s.target.name)
            self.regions.append(s.region.name)
            self.binders.append(s.region.name)
            self.block(s.body.stmts)
            self.binders.pop()
            self.regions.pop()
        elif isinstance(s, ast.RegionStmt):
            enc.tag(REGION)
            self.regions.append(s.name.name)
            self.block(s.body.stmts)
            self.regions.pop()
        elif isinstance(s, ast.LetStruct):
            enc.tag(DESTRUCTURE)
            self.type_reference(s.qualifier, s.struct.name)
            names = sorted((f.name for f in s.fields), key=lambda n: n.encode("utf-8"))
            enc.u32(len(names))
            for n in names:
                enc.str(n)
            self.expr(s.value)
            self.binders.extend(names)
        else:
            assert isinstance(s, ast.LetTuple), s
            enc.tag(DESTRUCTURE_TUPLE).u32(len(s.names))
            self.expr(s.value)
            self.binders.extend(n.name for n in s.names)

    def if_stmt(self, s: ast.If) -> None:
        """`else if` is encoded as the reference's tree has it: an `else` block of one `if`."""
        enc = self.enc
        enc.tag(IF)
        self.expr(s.cond)
        self.block(s.then.stmts)
        if s.else_ is None:
            enc.tag(NONE)
        else:
            enc.tag(SOME)
            self.block([s.else_] if isinstance(s.else_, ast.If) else s.else_.stmts)

    def match(self, s: ast.Match) -> None:
        enc = self.enc
        enc.tag(MATCH)
        self.expr(s.scrutinee)
        enc.u32(len(s.arms))
        for arm in s.arms:
            depth = len(self.binders)
            p = arm.pattern
            if isinstance(p, ast.WildcardPattern):
                enc.tag(PATTERN_WILDCARD)
            else:
                assert isinstance(p, ast.VariantPattern), p
                enc.tag(PATTERN_VARIANT)
                self.type_reference(p.qualifier, p.enum.name)
                enc.str(p.variant.name)
                bindings = p.bindings or []
                enc.u32(len(bindings))
                for b in bindings:
                    if b is None:
                        enc.tag(NONE)
                    else:
                        enc.tag(SOME)
                        self.binders.append(b.name)
            self.block(arm.body.stmts)
            del self.binders[depth:]

    def name(self, qualifier: Optional[ast.Ident], name: str) -> None:
        """A bound name's binder position; else the declared function's `sig`; else its text."""
        if qualifier is None and name in self.binders:
            _positional(self.enc, self.binders, name)
            return
        sig = self.ctx.declared(self.ctx.sig_ids, qualifier, name)
        if sig is not None:
            self.enc.tag(FREE).hash(sig)
        else:
            self.enc.tag(NONE).str(name)

    def type_reference(self, qualifier: Optional[ast.Ident], name: str) -> None:
        declared = self.ctx.declared(self.ctx.type_ids, qualifier, name)
        if declared is not None:
            self.enc.tag(FREE).hash(declared)
        else:
            self.enc.tag(NONE).str(name)

    def expr(self, e: ast.Expr) -> None:
        if self.literal(e):
            return
        enc = self.enc
        if isinstance(e, ast.Name):
            enc.tag(LOCAL)
            self.name(None, e.name)
        elif isinstance(e, ast.Unary):
            enc.tag(UNARY).tag(UNARY_TAGS[e.op])
            self.expr(e.operand)
        elif isinstance(e, ast.Binary):
            enc.tag(BINARY).tag(BINARY_TAGS[e.op])
            self.expr(e.left)
            self.expr(e.right)
        elif isinstance(e, ast.Call):
            enc.tag(CALL)
            if isinstance(e.callee, ast.Name):
                self.name(None, e.callee.name)
            elif isinstance(e.callee, ast.QualifiedName):
                self.name(e.callee.qualifier, e.callee.name.name)
            else:
                self.expr(e.callee)
            enc.u32(len(e.args))
            for a in e.args:
                self.expr(a)
        else:
            self.compound(e)

    def literal(self, e: ast.Expr) -> bool:
        """Literals, a negated numeric literal being one (the reference reads `-5` as one)."""
        enc = self.enc
        negated = isinstance(e, ast.Unary) and e.op == "-" and isinstance(e.operand, (ast.IntLit, ast.FloatLit))
        lit = e.operand if negated else e
        if isinstance(lit, ast.IntLit):
            value = -lit.value if negated else lit.value
            enc.tag(INT).i64(((value + 2**63) % 2**64) - 2**63)
        elif isinstance(lit, ast.FloatLit):
            sign = (1 << 31 if lit.is_f32 else 1 << 63) if negated else 0
            bits = lit.bits ^ sign
            enc.tag(F32 if lit.is_f32 else FLOAT).i64(bits if lit.is_f32 else struct.unpack("<q", struct.pack("<Q", bits))[0])
        elif isinstance(e, ast.BoolLit):
            enc.tag(BOOL).bool(e.value)
        elif isinstance(e, ast.StrLit):
            enc.tag(STR).str(e.value)
        else:
            return False
        return True

    def compound(self, e: ast.Expr) -> None:
        enc = self.enc
        if isinstance(e, ast.Index):
            enc.tag(INDEX)
            self.exprs(e.base, e.index)
        elif isinstance(e, ast.SliceExpr):
            enc.tag(SUBSLICE)
            self.exprs(e.base, e.lo, e.hi)
        elif isinstance(e, ast.TupleExpr):
            enc.tag(TUPLE).u32(len(e.parts))
            self.exprs(*e.parts)
        elif isinstance(e, ast.TupleIndex):
            enc.tag(TUPLE_FIELD).u32(e.index)
            self.expr(e.base)
        elif isinstance(e, ast.AllocSlice):
            enc.tag(ALLOC_SLICE)
            _positional(enc, self.regions, e.region.name)
            self.exprs(e.count, e.fill)
        elif isinstance(e, ast.Alloc):
            enc.tag(ALLOC)
            _positional(enc, self.regions, e.region.name)
            self.expr(e.value)
        elif isinstance(e, ast.StructLit):
            enc.tag(STRUCT_LIT)
            self.type_reference(e.qualifier, e.name.name)
            enc.u32(len(e.fields))
            for f in e.fields:
                enc.str(f.name.name)
                self.expr(f.value)
        elif isinstance(e, ast.FieldAccess):
            enc.tag(FIELD)
            self.expr(e.base)
            enc.str(e.name.name)
        elif isinstance(e, ast.VariantExpr):
            enc.tag(VARIANT)
            self.type_reference(e.qualifier, e.enum.name)
            enc.str(e.variant.name)
            args = e.args or []
            enc.u32(len(args))
            self.exprs(*args)
        else:
            assert isinstance(e, ast.QualifiedName), e
            self.name(e.qualifier, e.name.name)

    def exprs(self, *es: ast.Expr) -> None:
        for e in es:
            self.expr(e)
