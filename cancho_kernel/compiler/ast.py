"""The abstract syntax tree: plain dataclasses that carry source spans.

The parser builds these and nothing writes them afterwards: the checker records what it learns
(types, what names and calls resolved to, bindings) in a typed side table keyed by node
(`check/typed.py`), so one parsed item can be checked again and again (a notebook session's
items, for every cell) without a copy. Spans are excluded from equality, so two parses of the
same text compare equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from .source import SourceFile, Span


@dataclass(kw_only=True)
class Node:
    span: Span = field(compare=False, repr=False)


@dataclass
class Ident(Node):
    """A name together with where it was written."""

    name: str


# ---------------------------------------------------------------- types (as written)


@dataclass(kw_only=True)
class TypeExpr(Node):
    pass


@dataclass
class RefType(TypeExpr):
    """`&r T` (shared) or `&!r T` (unique)."""

    region: Ident
    unique: bool
    target: TypeExpr


@dataclass
class SliceType(TypeExpr):
    """`[T]`: unsized, only legal behind a reference."""

    elem: TypeExpr


@dataclass
class TupleType(TypeExpr):
    """`(A, B, ...)`; the parser also builds it for `()` and `(A)`, which the checker refuses."""

    parts: list[TypeExpr]


@dataclass
class FnType(TypeExpr):
    """`fn(A, B) -> [row] R`."""

    params: list[TypeExpr]
    row: "Row"
    ret: TypeExpr


@dataclass
class NamedType(TypeExpr):
    """`[q.]Name[args]`: scalars, prelude types, user structs/enums and type parameters."""

    qualifier: Optional[Ident]
    name: Ident
    args: list[TypeExpr]


@dataclass
class CapType(TypeExpr):
    """`[q.]Name("literal")`, a literal-indexed capability type such as `Ffi("libc")`."""

    qualifier: Optional[Ident]
    name: Ident
    literal: str
    literal_span: Span = field(compare=False, repr=False)


# ---------------------------------------------------------------- items


@dataclass
class Label(Node):
    """An effect label: `io_write` or `ffi("libc")`."""

    name: str
    arg: Optional[str] = None


@dataclass
class Row(Node):
    labels: list[Label]


@dataclass
class RegionParam(Node):
    name: str


@dataclass
class TypeParam(Node):
    name: str
    bound: Optional[str] = None  # "val" or, refused by the checker, "res"


@dataclass
class WhereClause(Node):
    """`where inner <= outer`: `outer` outlives `inner`."""

    inner: Ident
    outer: Ident


@dataclass
class Generics(Node):
    """The bracket after a declared name: region and type parameters in written order, then `where`."""

    params: list[Union[RegionParam, TypeParam]]
    where: list[WhereClause]

    @property
    def regions(self) -> list[RegionParam]:
        return [p for p in self.params if isinstance(p, RegionParam)]

    @property
    def types(self) -> list[TypeParam]:
        return [p for p in self.params if isinstance(p, TypeParam)]


@dataclass
class Param(Node):
    name: Ident
    ty: TypeExpr


@dataclass(kw_only=True)
class Item(Node):
    pub: bool = False


@dataclass
class FnDecl(Item):
    name: Ident
    generics: Optional[Generics]
    params: list[Param]
    row: Row
    ret: TypeExpr
    body: "Block"


@dataclass
class ExternFn(Item):
    name: Ident
    generics: Optional[Generics]
    params: list[Param]
    row: Row
    ret: TypeExpr


@dataclass
class FieldDecl(Node):
    name: Ident
    ty: TypeExpr


@dataclass
class StructDecl(Item):
    name: Ident
    mode: Optional[str]  # "res", "val" or None
    generics: Optional[Generics]
    fields: list[FieldDecl]


@dataclass
class VariantDecl(Node):
    name: Ident
    payload: list[TypeExpr]
    has_parens: bool = False


@dataclass
class EnumDecl(Item):
    name: Ident
    mode: Optional[str]
    generics: Optional[Generics]
    variants: list[VariantDecl]


@dataclass
class StaticDecl(Item):
    name: Ident
    ty: TypeExpr  # the referent, e.g. `[int]`
    body: "Block"


@dataclass
class ModuleDecl(Node):
    path: list[Ident]

    @property
    def dotted(self) -> str:
        return ".".join(p.name for p in self.path)


@dataclass
class Import(Node):
    path: list[Ident]
    alias: Optional[Ident] = None

    @property
    def dotted(self) -> str:
        return ".".join(p.name for p in self.path)

    @property
    def qualifier(self) -> Ident:
        """The name this import binds: the alias, else the last path segment."""
        return self.alias if self.alias is not None else self.path[-1]


@dataclass
class File(Node):
    """One parsed source file."""

    source: SourceFile = field(compare=False, repr=False)
    edition: int = 1
    edition_span: Optional[Span] = field(default=None, compare=False, repr=False)
    module: Optional[ModuleDecl] = None
    imports: list[Import] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)

    @property
    def module_name(self) -> str:
        """Dotted module name; the root module is the empty string."""
        return self.module.dotted if self.module is not None else ""


# ---------------------------------------------------------------- expressions


@dataclass(kw_only=True)
class Expr(Node):
    pass


@dataclass
class IntLit(Expr):
    value: int  # character literals are IntLit too


@dataclass
class FloatLit(Expr):
    bits: int  # IEEE binary64 bit pattern (or binary32 when is_f32)
    is_f32: bool = False


@dataclass
class StrLit(Expr):
    value: bytes


@dataclass
class BoolLit(Expr):
    value: bool


@dataclass
class Name(Expr):
    """An unqualified name in expression position: a local, a static, a function (as a value)."""

    name: str


@dataclass
class QualifiedName(Expr):
    """`q.f`, only built as the callee of a call: `q.f(args)` is always a qualified call."""

    qualifier: Ident
    name: Ident


@dataclass
class Call(Expr):
    """`callee(args)`; callee is a Name, a QualifiedName, or any expression (indirect call)."""

    callee: Expr
    args: list[Expr]


@dataclass
class VariantExpr(Expr):
    """`[q.]E::V` or `[q.]E::V(args)`; args is None when no parentheses were written."""

    qualifier: Optional[Ident]
    enum: Ident
    variant: Ident
    args: Optional[list[Expr]]


@dataclass
class FieldInit(Node):
    name: Ident
    value: Expr


@dataclass
class StructLit(Expr):
    qualifier: Optional[Ident]
    name: Ident
    fields: list[FieldInit]


@dataclass
class Alloc(Expr):
    """`alloc[a](value)`."""

    region: Ident
    value: Expr


@dataclass
class AllocSlice(Expr):
    """`alloc_slice[a](count, fill)`."""

    region: Ident
    count: Expr
    fill: Expr


@dataclass
class TupleExpr(Expr):
    parts: list[Expr]


@dataclass
class Unary(Expr):
    op: str  # "-", "!", "~", "*"
    operand: Expr


@dataclass
class Binary(Expr):
    op: str  # "||" "&&" "==" "!=" "<" "<=" ">" ">=" "|" "^" "&" "<<" ">>" "+" "-" "*" "/" "%"
    left: Expr
    right: Expr


@dataclass
class FieldAccess(Expr):
    base: Expr
    name: Ident


@dataclass
class TupleIndex(Expr):
    base: Expr
    index: int


@dataclass
class Index(Expr):
    base: Expr
    index: Expr


@dataclass
class SliceExpr(Expr):
    """`base[lo..hi]`."""

    base: Expr
    lo: Expr
    hi: Expr


# ---------------------------------------------------------------- statements


@dataclass(kw_only=True)
class Stmt(Node):
    pass


@dataclass
class Block(Node):
    stmts: list[Stmt]


@dataclass
class Let(Stmt):
    """`let x [: T] = e;` or, with mutable, `var x [: T] = e;`."""

    name: Ident
    ty: Optional[TypeExpr]
    value: Expr
    mutable: bool = False


@dataclass
class LetStruct(Stmt):
    """`let [q.]S { a, b } = e;`."""

    qualifier: Optional[Ident]
    struct: Ident
    fields: list[Ident]
    value: Expr


@dataclass
class LetTuple(Stmt):
    """`let (a, b) = e;`."""

    names: list[Ident]
    value: Expr


@dataclass
class Assign(Stmt):
    target: Expr
    value: Expr


@dataclass
class ExprStmt(Stmt):
    expr: Expr


@dataclass
class If(Stmt):
    cond: Expr
    then: Block
    else_: Optional[Union[Block, "If"]] = None


@dataclass
class While(Stmt):
    cond: Expr
    body: Block


@dataclass(kw_only=True)
class Pattern(Node):
    pass


@dataclass
class WildcardPattern(Pattern):
    pass


@dataclass
class VariantPattern(Pattern):
    """`[q.]E::V` or `[q.]E::V(a, _, c)`; a `None` binding is `_`; bindings is None without parens."""

    qualifier: Optional[Ident]
    enum: Ident
    variant: Ident
    bindings: Optional[list[Optional[Ident]]]


@dataclass
class Arm(Node):
    pattern: Pattern
    body: Block


@dataclass
class Match(Stmt):
    scrutinee: Expr
    arms: list[Arm]


@dataclass
class Return(Stmt):
    value: Expr


@dataclass
class Defer(Stmt):
    expr: Expr


@dataclass
class Borrow(Stmt):
    """`borrow [mut] x as &[!]r in { ... }`: binds region r and a variable r."""

    target: Ident
    mutable: bool
    region: Ident
    unique: bool
    body: Block


@dataclass
class RegionStmt(Stmt):
    """`region a { ... }`: an arena."""

    name: Ident
    body: Block
