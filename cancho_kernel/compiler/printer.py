"""The canonical layout of a parsed file: `ast.File` back to text, one way only.

This is the AST-to-text half that `cancho fmt` builds on (``compiler/fmt.py``): it knows nothing of
comments, blank lines or how a literal was spelled, because none of those reach the tree. What it
fixes is the layout the reference's formatter writes (its `docs/formatting.md` §3 and
`docs/canonical-ast.md` §2a): four-space indentation, one statement per line, a block's `{` on its
head's line, `} else {` and `} else if`, one member per line with a trailing comma in struct and
enum declarations, spaces around binary operators, no redundant parentheses, and a blank line
between items; an empty block, declaration or literal is written as the reference's printer
writes it (`{` and `}` on two lines, `S { }`). Two places are decided by the grammar rather than by the tree: a struct literal in
an `if`/`while`/`match` head keeps parentheses, and `q.f` used as a callee keeps them (written
bare it would be a qualified call). Parsing the output gives back an equal tree.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Optional, Union

from . import ast
from .lexer import exact_decimal, f32_bits_of
from .parser.exprs import BINARY_PRECEDENCE

INDENT = "    "
PREFIX_PREC = 11  # binds tighter than every binary operator
POSTFIX_PREC = 12
_STRING_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"}


@dataclass
class Lines:
    """Output under construction: each entry one line (indentation included), None a blank line."""

    lines: list[Optional[str]] = field(default_factory=list)
    depth: int = 0

    def put(self, text: str) -> None:
        self.lines.append(INDENT * self.depth + text)

    def blank(self) -> None:
        if self.lines and self.lines[-1] is not None:
            self.lines.append(None)

    def text(self) -> str:
        return "".join("\n" if line is None else line + "\n" for line in self.lines)


def print_file(file: ast.File) -> str:
    """The canonical text of one parsed file."""
    out = Lines()
    if file.edition_span is not None:
        out.put(f"edition {file.edition};")
    if file.module is not None:
        out.put(f"module {file.module.dotted};")
    for imp in file.imports:
        alias = f" as {imp.alias.name}" if imp.alias is not None else ""
        out.put(f"import {imp.dotted}{alias};")
    for item in file.items:
        out.blank()
        _item(out, item)
    return out.text()


# ---------------------------------------------------------------- literals


def string_literal(value: bytes) -> str:
    """A string literal whose bytes are `value` (the lexer reads UTF-8 and six escapes)."""
    text = value.decode("utf-8", errors="surrogateescape")
    return '"' + "".join(_STRING_ESCAPES.get(ch, ch) for ch in text) + '"'


def float_literal(bits: int, is_f32: bool) -> str:
    """A decimal spelling that lexes back to exactly `bits` (shortest for binary64)."""
    if not is_f32:
        text = repr(struct.unpack("<d", struct.pack("<Q", bits))[0])
    else:
        value = struct.unpack("<f", struct.pack("<I", bits))[0]
        text = next(t for t in (f"{value:.{p}g}" for p in range(1, 18))
                    if f32_bits_of(exact_decimal(t)) == bits or (bits == 0 and float(t) == 0.0))
    if "e" in text and "." not in text.partition("e")[0]:
        mantissa, _, exponent = text.partition("e")
        text = f"{mantissa}.0e{exponent}"
    elif "e" not in text and "." not in text:
        text += ".0"
    return text + ("f32" if is_f32 else "")


# ---------------------------------------------------------------- types and rows


def type_text(t: ast.TypeExpr) -> str:
    """A written type."""
    if isinstance(t, ast.RefType):
        return f"&{'!' if t.unique else ''}{t.region.name} {type_text(t.target)}"
    if isinstance(t, ast.SliceType):
        return f"[{type_text(t.elem)}]"
    if isinstance(t, ast.TupleType):
        return "(" + ", ".join(type_text(p) for p in t.parts) + ")"
    if isinstance(t, ast.FnType):
        params = ", ".join(type_text(p) for p in t.params)
        return f"fn({params}) -> {row_text(t.row)} {type_text(t.ret)}"
    if isinstance(t, ast.CapType):
        return f"{_qualified(t.qualifier, t.name.name)}({string_literal(t.literal.encode('utf-8', 'surrogateescape'))})"
    assert isinstance(t, ast.NamedType), t
    args = "[" + ", ".join(type_text(a) for a in t.args) + "]" if t.args else ""
    return _qualified(t.qualifier, t.name.name) + args


def row_text(row: ast.Row) -> str:
    """An effect row: `[]`, `[io_write, ffi("libc")]`."""
    def label(lab: ast.Label) -> str:
        if lab.arg is None:
            return lab.name
        return f"{lab.name}({string_literal(lab.arg.encode('utf-8', 'surrogateescape'))})"

    return "[" + ", ".join(label(lab) for lab in row.labels) + "]"


def _qualified(qualifier: Optional[ast.Ident], name: str) -> str:
    return f"{qualifier.name}.{name}" if qualifier is not None else name


def _generics(g: Optional[ast.Generics]) -> str:
    if g is None:
        return ""
    parts = []
    for p in g.params:
        if isinstance(p, ast.RegionParam):
            parts.append(f"&{p.name}")
        else:
            parts.append(p.name if p.bound is None else f"{p.name}: {p.bound}")
    inner = ", ".join(parts)
    if g.where:
        clauses = ", ".join(f"{w.inner.name} <= {w.outer.name}" for w in g.where)
        inner = f"{inner} where {clauses}" if inner else f"where {clauses}"
    return f"[{inner}]"


# ---------------------------------------------------------------- items


def _item(out: Lines, item: ast.Item) -> None:
    pub = "pub " if item.pub else ""
    if isinstance(item, ast.FnDecl):
        _block(out, pub + "fn " + _signature(item), item.body)
    elif isinstance(item, ast.ExternFn):
        out.put(f"{pub}extern fn {_signature(item)};")
    elif isinstance(item, ast.StaticDecl):
        _block(out, f"{pub}static {item.name.name}: {type_text(item.ty)}", item.body)
    elif isinstance(item, ast.StructDecl):
        members = [f"{f.name.name}: {type_text(f.ty)}" for f in item.fields]
        _members(out, f"{pub}{_mode(item.mode)}struct {item.name.name}{_generics(item.generics)}", members)
    else:
        assert isinstance(item, ast.EnumDecl), item
        members = [_variant(v) for v in item.variants]
        _members(out, f"{pub}{_mode(item.mode)}enum {item.name.name}{_generics(item.generics)}", members)


def _mode(mode: Optional[str]) -> str:
    return f"{mode} " if mode is not None else ""


def _variant(v: ast.VariantDecl) -> str:
    if not v.has_parens:
        return v.name.name
    return v.name.name + "(" + ", ".join(type_text(p) for p in v.payload) + ")"


def _members(out: Lines, head: str, members: list[str]) -> None:
    out.put(head + " {")
    out.depth += 1
    for m in members:
        out.put(m + ",")
    out.depth -= 1
    out.put("}")


def _signature(fn: Union[ast.FnDecl, ast.ExternFn]) -> str:
    params = ", ".join(f"{p.name.name}: {type_text(p.ty)}" for p in fn.params)
    return f"{fn.name.name}{_generics(fn.generics)}({params}) -> {row_text(fn.row)} {type_text(fn.ret)}"


# ---------------------------------------------------------------- statements


def _block(out: Lines, head: str, block: ast.Block) -> None:
    """`head {`, the statements one level in, `}` (an empty block too: two lines)."""
    out.put(head + " {")
    out.depth += 1
    for stmt in block.stmts:
        _stmt(out, stmt)
    out.depth -= 1
    out.put("}")


def _stmt(out: Lines, s: ast.Stmt) -> None:
    if isinstance(s, ast.If):
        _if(out, s)
    elif isinstance(s, ast.While):
        _block(out, f"while {expr_text(s.cond, head=True)}", s.body)
    elif isinstance(s, ast.Match):
        out.put(f"match {expr_text(s.scrutinee, head=True)} {{")
        out.depth += 1
        for arm in s.arms:
            _block(out, f"{_pattern(arm.pattern)} =>", arm.body)
        out.depth -= 1
        out.put("}")
    elif isinstance(s, ast.Borrow):
        mut = "mut " if s.mutable else ""
        bang = "!" if s.unique else ""
        _block(out, f"borrow {mut}{s.target.name} as &{bang}{s.region.name} in", s.body)
    elif isinstance(s, ast.RegionStmt):
        _block(out, f"region {s.name.name}", s.body)
    else:
        out.put(simple_stmt_text(s))


def simple_stmt_text(s: ast.Stmt) -> str:
    """A statement without a block, on one line."""
    if isinstance(s, ast.Let):
        ty = f": {type_text(s.ty)}" if s.ty is not None else ""
        return f"{'var' if s.mutable else 'let'} {s.name.name}{ty} = {expr_text(s.value)};"
    if isinstance(s, ast.LetStruct):
        names = ", ".join(f.name for f in s.fields)  # none: `{  }`, as the reference prints it
        return f"let {_qualified(s.qualifier, s.struct.name)} {{ {names} }} = {expr_text(s.value)};"
    if isinstance(s, ast.LetTuple):
        return f"let ({', '.join(n.name for n in s.names)}) = {expr_text(s.value)};"
    if isinstance(s, ast.Assign):
        return f"{expr_text(s.target)} = {expr_text(s.value)};"
    if isinstance(s, ast.Return):
        return f"return {expr_text(s.value)};"
    if isinstance(s, ast.Defer):
        return f"defer {expr_text(s.expr)};"
    assert isinstance(s, ast.ExprStmt), s
    return f"{expr_text(s.expr)};"


def _if(out: Lines, s: ast.If) -> None:
    """An `else if` chain, iteratively (chains of thousands of links are ordinary code)."""
    head = f"if {expr_text(s.cond, head=True)}"
    while True:
        if s.else_ is None:
            _block(out, head, s.then)
            return
        _block_open(out, head, s.then)
        if isinstance(s.else_, ast.If):
            s = s.else_
            head = f"}} else if {expr_text(s.cond, head=True)}"
            continue
        _block_open(out, "} else", s.else_)
        out.put("}")
        return


def _block_open(out: Lines, head: str, block: ast.Block) -> None:
    """`head {` and the statements, leaving the closing brace to the caller."""
    out.put(head + " {")
    out.depth += 1
    for stmt in block.stmts:
        _stmt(out, stmt)
    out.depth -= 1


def _pattern(p: ast.Pattern) -> str:
    if isinstance(p, ast.WildcardPattern):
        return "_"
    assert isinstance(p, ast.VariantPattern), p
    text = f"{_qualified(p.qualifier, p.enum.name)}::{p.variant.name}"
    if p.bindings is None:
        return text
    return text + "(" + ", ".join("_" if b is None else b.name for b in p.bindings) + ")"


# ---------------------------------------------------------------- expressions


def expr_text(e: ast.Expr, prec: int = 0, head: bool = False) -> str:
    """`e` in a context that binds at `prec`; `head` is an `if`/`while`/`match` head, where a
    struct literal outside brackets would be read as the block."""
    if isinstance(e, ast.Binary):
        p = BINARY_PRECEDENCE[e.op]
        inner = head and p >= prec  # inside parentheses a struct literal is a literal again
        text = f"{expr_text(e.left, p, inner)} {e.op} {expr_text(e.right, p + 1, inner)}"
        return f"({text})" if p < prec else text
    if isinstance(e, ast.Unary):
        wrap = prec > PREFIX_PREC
        text = e.op + expr_text(e.operand, PREFIX_PREC, head and not wrap)
        return f"({text})" if wrap else text
    if isinstance(e, ast.IntLit):
        return f"({e.value})" if e.value < 0 and prec > PREFIX_PREC else str(e.value)
    if isinstance(e, ast.StructLit):
        text = _struct_lit(e)
        return f"({text})" if head else text
    postfix = _postfix(e, head)
    if postfix is not None:
        return postfix
    return _primary(e)


def _postfix(e: ast.Expr, head: bool) -> Optional[str]:
    if isinstance(e, ast.Call):
        callee = e.callee
        if isinstance(callee, ast.QualifiedName):
            text = f"{callee.qualifier.name}.{callee.name.name}"
        elif isinstance(callee, ast.FieldAccess) and isinstance(callee.base, ast.Name):
            text = f"({expr_text(callee)})"  # bare, `q.f(` is a qualified call
        else:
            text = expr_text(callee, POSTFIX_PREC, head)
        return text + _args(e.args)
    if isinstance(e, ast.FieldAccess):
        return f"{_dotted(e.base, head)}.{e.name.name}"
    if isinstance(e, ast.TupleIndex):
        return f"{_dotted(e.base, head)}.{e.index}"
    if isinstance(e, ast.Index):
        return f"{expr_text(e.base, POSTFIX_PREC, head)}[{expr_text(e.index)}]"
    if isinstance(e, ast.SliceExpr):
        return f"{expr_text(e.base, POSTFIX_PREC, head)}[{expr_text(e.lo)}..{expr_text(e.hi)}]"
    return None


def _dotted(base: ast.Expr, head: bool) -> str:
    """The base of a `.`: a numeric literal is parenthesised, since `1.2` lexes as one float."""
    text = expr_text(base, POSTFIX_PREC, head)
    return f"({text})" if isinstance(base, (ast.IntLit, ast.FloatLit)) and not text.startswith("(") else text


def _primary(e: ast.Expr) -> str:
    if isinstance(e, ast.Name):
        return e.name
    if isinstance(e, ast.BoolLit):
        return "true" if e.value else "false"
    if isinstance(e, ast.FloatLit):
        return float_literal(e.bits, e.is_f32)
    if isinstance(e, ast.StrLit):
        return string_literal(e.value)
    if isinstance(e, ast.TupleExpr):
        return "(" + ", ".join(expr_text(p) for p in e.parts) + ")"
    if isinstance(e, ast.VariantExpr):
        text = f"{_qualified(e.qualifier, e.enum.name)}::{e.variant.name}"
        return text if e.args is None else text + _args(e.args)
    if isinstance(e, ast.Alloc):
        return f"alloc[{e.region.name}]({expr_text(e.value)})"
    if isinstance(e, ast.AllocSlice):
        return f"alloc_slice[{e.region.name}]({expr_text(e.count)}, {expr_text(e.fill)})"
    if isinstance(e, ast.QualifiedName):
        return f"{e.qualifier.name}.{e.name.name}"
    raise TypeError(f"no printed form for {type(e).__name__}")


def _args(args: list[ast.Expr]) -> str:
    return "(" + ", ".join(expr_text(a) for a in args) + ")"


def _struct_lit(e: ast.StructLit) -> str:
    name = _qualified(e.qualifier, e.name.name)
    if not e.fields:
        return name + " { }"
    return name + " { " + ", ".join(f"{f.name.name}: {expr_text(f.value)}" for f in e.fields) + " }"
