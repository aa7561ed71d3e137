"""The canonical encoding under `cancho ids` (``compiler/ids.py``): the reference's bytes
(its `docs/canonical-ast.md` §4 and §6): one-byte node tags, fixed-width little-endian integers,
length-prefixed strings and sequences, nested hashes as 32 raw bytes, a domain tag first, BLAKE3
over the whole; and the signature, type-declaration and `static` identities built from them.
"""


from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Optional, Union

import blake3

from . import ast

DOMAIN_SIG = b"cancho.sig.v1"
DOMAIN_BODY = b"cancho.body.v1"
DOMAIN_TYPE = b"cancho.type.v1"

# Node tags (the reference's numbering: appended, never reused).
INT, BOOL, LOCAL, FREE, STRUCT_LIT, FIELD, VARIANT, UNARY, BINARY, CALL = range(1, 11)
LET, ASSIGN, EXPR_STMT, IF, WHILE, MATCH, RETURN, DESTRUCTURE = range(0x20, 0x28)
TYPE_NAME, PATTERN_WILDCARD, PATTERN_VARIANT, TYPE_REF, BORROW = range(0x40, 0x45)
(STRUCT_DECL, ENUM_DECL, MODE_VAL, MODE_RES, EFFECTS, EXTERN_DECL, STR, REGION, ALLOC, ALLOC_SLICE,
 INDEX, TYPE_SLICE, TYPE_TUPLE, TUPLE, TUPLE_FIELD, DESTRUCTURE_TUPLE, SUBSLICE, DEFER, FLOAT, TYPE_FN,
 F32, STATIC_DECL) = range(0x60, 0x76)
NONE, SOME = 0x00, 0x01
UNARY_TAGS = {"-": 1, "!": 2, "*": 3, "~": 4}
BINARY_TAGS = {op: k + 1 for k, op in enumerate(
    ["+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||", "&", "|", "^", "<<", ">>"])}


class Encoder:
    """A canonical byte string under construction (the reference's encoding rules)."""

    def __init__(self) -> None:
        self.out = bytearray()

    def tag(self, t: int) -> "Encoder":
        self.out.append(t)
        return self

    def u32(self, n: int) -> "Encoder":
        self.out += struct.pack("<I", n & 0xFFFFFFFF)
        return self

    def i64(self, n: int) -> "Encoder":
        self.out += struct.pack("<q", n)
        return self

    def bool(self, b: bool) -> "Encoder":
        return self.tag(1 if b else 0)

    def str(self, s: Union[str, bytes]) -> "Encoder":
        data = s if isinstance(s, bytes) else s.encode("utf-8", "surrogateescape")
        self.u32(len(data))
        self.out += data
        return self

    def hash(self, h: bytes) -> "Encoder":
        self.out += h
        return self

    def finish(self, domain: bytes) -> bytes:
        return blake3.blake3(domain + bytes(self.out)).digest()


@dataclass(frozen=True)
class FunctionId:
    """A function's (or extern's, or static's) two identities."""

    name: str
    module: str
    sig: bytes
    body: bytes


@dataclass(frozen=True)
class TypeDeclId:
    """A struct's or enum's identity."""

    name: str
    module: str
    id: bytes


@dataclass(frozen=True)
class Identities:
    """Every unit's identity, types and functions each in declaration order."""

    types: tuple[TypeDeclId, ...]
    functions: tuple[FunctionId, ...]

    def function(self, name: str) -> Optional[FunctionId]:
        return next((f for f in self.functions if f.name == name), None)

    def type_decl(self, name: str) -> Optional[TypeDeclId]:
        return next((t for t in self.types if t.name == name), None)


Names = dict[tuple[str, str], bytes]  # (module, declared name) -> hash


@dataclass(frozen=True)
class Context:
    """Where a unit is: its file (for imports), its module, and what is declared so far."""

    file: ast.File
    type_ids: Names
    sig_ids: Names = field(default_factory=dict)

    def module_of(self, qualifier: Optional[ast.Ident]) -> Optional[str]:
        if qualifier is None:
            return self.file.module_name
        for imp in self.file.imports:
            if imp.qualifier.name == qualifier.name:
                return imp.dotted
        return None

    def declared(self, table: Names, qualifier: Optional[ast.Ident], name: str) -> Optional[bytes]:
        module = self.module_of(qualifier)
        return None if module is None else table.get((module, name))


def _split_generics(g: Optional[ast.Generics]) -> tuple[list[ast.TypeParam], list[str], list[ast.WhereClause]]:
    if g is None:
        return [], [], []
    return g.types, [r.name for r in g.regions], g.where


def encode_effects(enc: Encoder, row: ast.Row) -> None:
    """The row sorted by (name, argument) and deduplicated: two spellings of one set are one."""
    enc.tag(EFFECTS)
    labels = sorted({(lab.name, lab.arg) for lab in row.labels},
                    key=lambda la: (la[0].encode("utf-8"), la[1] is not None, (la[1] or "").encode("utf-8", "surrogateescape")))
    enc.u32(len(labels))
    for name, arg in labels:
        enc.str(name)
        if arg is None:
            enc.tag(NONE)
        else:
            enc.tag(SOME).str(arg)


def encode_type(enc: Encoder, t: ast.TypeExpr, ctx: Context, generics: list[str], regions: list[str]) -> None:
    """A written type, structurally; a declared type contributes its identity."""
    if isinstance(t, ast.RefType):
        enc.tag(TYPE_REF).bool(t.unique)
        _positional(enc, regions, t.region.name)
        encode_type(enc, t.target, ctx, generics, regions)
    elif isinstance(t, ast.SliceType):
        enc.tag(TYPE_SLICE)
        encode_type(enc, t.elem, ctx, generics, regions)
    elif isinstance(t, ast.TupleType):
        enc.tag(TYPE_TUPLE).u32(len(t.parts))
        for part in t.parts:
            encode_type(enc, part, ctx, generics, regions)
    elif isinstance(t, ast.FnType):
        enc.tag(TYPE_FN).u32(len(t.params))
        for part in t.params:
            encode_type(enc, part, ctx, generics, regions)
        encode_effects(enc, t.row)
        encode_type(enc, t.ret, ctx, generics, regions)
    else:
        assert isinstance(t, (ast.NamedType, ast.CapType)), t
        enc.tag(TYPE_NAME)
        declared = ctx.declared(ctx.type_ids, t.qualifier, t.name.name)
        if t.name.name in generics:
            enc.tag(LOCAL).u32(generics.index(t.name.name))
        elif declared is not None:
            enc.tag(FREE).hash(declared)
        else:
            enc.tag(NONE).str(t.name.name)
        if isinstance(t, ast.CapType):
            enc.u32(1).tag(STR).str(t.literal)
        else:
            enc.u32(len(t.args))
            for arg in t.args:
                encode_type(enc, arg, ctx, generics, regions)


def _positional(enc: Encoder, names: list[str], name: str) -> None:
    """A region (or binder) by its position, the last of that name winning; else its text."""
    for k in range(len(names) - 1, -1, -1):
        if names[k] == name:
            enc.tag(LOCAL).u32(k)
            return
    enc.tag(NONE).str(name)


def _bounds(enc: Encoder, params: list[ast.TypeParam]) -> None:
    for p in params:
        enc.tag(MODE_VAL if p.bound == "val" else NONE)


def hash_signature(fn: ast.FnDecl, ctx: Context) -> bytes:
    tparams, regions, where = _split_generics(fn.generics)
    generics = [p.name for p in tparams]
    enc = Encoder().str(fn.name.name).u32(len(tparams))
    _bounds(enc, tparams)
    enc.u32(len(regions)).u32(len(where))
    for w in where:
        enc.u32(regions.index(w.inner.name) if w.inner.name in regions else 0xFFFFFFFF)
        enc.u32(regions.index(w.outer.name) if w.outer.name in regions else 0xFFFFFFFF)
    enc.tag(EFFECTS)
    encode_effects(enc, fn.row)
    enc.u32(len(fn.params))
    for p in fn.params:
        encode_type(enc, p.ty, ctx, generics, regions)
    encode_type(enc, fn.ret, ctx, generics, regions)
    return enc.finish(DOMAIN_SIG)


def hash_extern(fn: ast.ExternFn, ctx: Context) -> bytes:
    _, regions, _ = _split_generics(fn.generics)
    enc = Encoder().tag(EXTERN_DECL).str(fn.name.name).str(fn.name.name).u32(len(regions))
    encode_effects(enc, fn.row)
    enc.u32(len(fn.params))
    for p in fn.params:
        encode_type(enc, p.ty, ctx, [], regions)
    encode_type(enc, fn.ret, ctx, [], regions)
    return enc.finish(DOMAIN_SIG)


def hash_type_decl(decl: Union[ast.StructDecl, ast.EnumDecl], ctx: Context) -> bytes:
    tparams, _, _ = _split_generics(decl.generics)
    generics = [p.name for p in tparams]
    is_struct = isinstance(decl, ast.StructDecl)
    enc = Encoder().tag(STRUCT_DECL if is_struct else ENUM_DECL).tag(MODE_RES if decl.mode == "res" else MODE_VAL)
    enc.str(decl.name.name).u32(len(tparams))
    _bounds(enc, tparams)
    if is_struct:
        enc.u32(len(decl.fields))
        for f in decl.fields:
            enc.str(f.name.name)
            encode_type(enc, f.ty, ctx, generics, [])
    else:
        enc.u32(len(decl.variants))
        for v in decl.variants:
            enc.str(v.name.name).u32(len(v.payload))
            for t in v.payload:
                encode_type(enc, t, ctx, generics, [])
    return enc.finish(DOMAIN_TYPE)


def hash_static_type(decl: ast.StaticDecl, ctx: Context) -> bytes:
    enc = Encoder().tag(STATIC_DECL).str(decl.name.name)
    encode_type(enc, decl.ty, ctx, [], [])
    return enc.finish(DOMAIN_SIG)
