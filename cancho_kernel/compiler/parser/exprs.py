"""Expressions (language.md §4.2): precedence climbing over Rust's operator order.

All binary operators are left-associative. Prefix `- ! ~ *` bind tighter than every binary
operator and looser than the postfix forms (call, `.field`, `.N`, `[i]`, `[a..b]`), so `*p.x`
is `*(p.x)` and `-a[0]` is `-(a[0])`. `IDENT . IDENT (` is always a qualified call: there is no
method syntax. Integer literals are range-checked here, because only here is it known whether a
unary minus applies directly to `9223372036854775808`.
"""

from __future__ import annotations

from typing import Callable, Optional, TypeVar

from .. import ast
from ..lexer import FLOAT, IDENT, INT, STR
from ..diagnostics import Rule
from .types import TypeParser

INT_MAX = 2**63 - 1

# Binding power of each binary operator, loosest first (language.md §4.2's table).
BINARY_PRECEDENCE: dict[str, int] = {
    "||": 1,
    "&&": 2,
    "==": 3, "!=": 3,
    "<": 4, "<=": 4, ">": 4, ">=": 4,
    "|": 5,
    "^": 6,
    "&": 7,
    "<<": 8, ">>": 8,
    "+": 9, "-": 9,
    "*": 10, "/": 10, "%": 10,
}
PREFIX_OPS = ("-", "!", "~", "*")

T = TypeVar("T")


class ExprParser(TypeParser):
    """Expressions, from `||` down to primaries."""

    def with_struct_literals(self, parse: Callable[[], T]) -> T:
        """Run `parse` with struct literals allowed again (inside parentheses, brackets, args)."""
        saved = self.no_struct_literal
        self.no_struct_literal = False
        try:
            return parse()
        finally:
            self.no_struct_literal = saved

    def without_struct_literals(self, parse: Callable[[], T]) -> T:
        """Run `parse` as an `if`/`while` condition or `match` scrutinee: `S {` is not a literal."""
        saved = self.no_struct_literal
        self.no_struct_literal = True
        try:
            return parse()
        finally:
            self.no_struct_literal = saved

    def expr(self) -> ast.Expr:
        return self.binary(1)

    def binary(self, min_prec: int) -> ast.Expr:
        left = self.unary()
        while True:
            op = self.tok.kind
            prec = BINARY_PRECEDENCE.get(op)
            if prec is None or prec < min_prec:
                return left
            self.bump()
            right = self.binary(prec + 1)
            left = ast.Binary(op, left, right, span=left.span.to(right.span))

    def unary(self) -> ast.Expr:
        op = self.tok.kind
        if op not in PREFIX_OPS:
            return self.postfix(self.primary())
        start = self.bump().span
        # `-9223372036854775808` is the one literal that only fits negated: fold it, provided
        # no postfix operator claims the literal first (`-x.f` is `-(x.f)`).
        if op == "-" and self.at(INT) and self.tok.value == INT_MAX + 1 and self.peek(1).kind not in ("(", ".", "["):
            self.bump()
            return ast.IntLit(-(INT_MAX + 1), span=self.span_from(start))
        operand = self.unary()
        return ast.Unary(op, operand, span=start.to(operand.span))

    def postfix(self, base: ast.Expr) -> ast.Expr:
        while True:
            start = base.span
            if self.at("("):
                args = self.call_args()
                base = ast.Call(base, args, span=self.span_from(start))
            elif self.at("."):
                self.bump()
                if self.at(IDENT):
                    name = self.ident()
                    base = ast.FieldAccess(base, name, span=self.span_from(start))
                elif self.at(INT):
                    tok = self.bump()
                    if tok.value >= 2**32:
                        self.fail(
                            Rule.LITERAL_FORM, "a tuple component is named by its position, counting from 0", tok.span
                        )
                    base = ast.TupleIndex(base, tok.value, span=self.span_from(start))
                else:
                    self.fail_expected("a field name or a tuple index")
            elif self.at("["):
                self.bump()

                def inside() -> ast.Expr:
                    first = self.expr()
                    if self.eat(".."):
                        hi = self.expr()
                        self.expect("]")
                        return ast.SliceExpr(base, first, hi, span=self.span_from(start))
                    self.expect("]")
                    return ast.Index(base, first, span=self.span_from(start))

                base = self.with_struct_literals(inside)
            else:
                return base

    def call_args(self) -> list[ast.Expr]:
        """`( [expr {, expr} [,]] )`."""
        self.expect("(")

        def inside() -> list[ast.Expr]:
            args: list[ast.Expr] = []
            while not self.at(")"):
                args.append(self.expr())
                if not self.eat(","):
                    break
            self.expect(")")
            return args

        return self.with_struct_literals(inside)

    def int_literal(self) -> ast.IntLit:
        t = self.bump()
        if t.value > INT_MAX:
            self.fail(Rule.LITERAL_OUT_OF_RANGE, "integer literal does not fit in `int` (64-bit signed)", t.span)
        return ast.IntLit(t.value, span=t.span)

    def primary(self) -> ast.Expr:
        t = self.tok
        kind = t.kind
        if kind == INT:
            return self.int_literal()
        if kind == FLOAT:
            self.bump()
            bits, is_f32 = t.value
            return ast.FloatLit(bits, is_f32, span=t.span)
        if kind == STR:
            self.bump()
            return ast.StrLit(t.value, span=t.span)
        if kind in ("true", "false"):
            self.bump()
            return ast.BoolLit(kind == "true", span=t.span)
        if kind == "(":
            return self.paren_expr()
        if kind == IDENT:
            return self.name_expr()
        self.fail_expected("an expression")

    def paren_expr(self) -> ast.Expr:
        """`(e)` (grouping, no node) or `(a, b, ...)` (a tuple of two or more)."""
        start = self.expect("(").span

        def inside() -> ast.Expr:
            first = self.expr()
            if not self.at(","):
                self.expect(")")
                return first
            parts = [first]
            while self.eat(","):
                if self.at(")"):
                    break
                parts.append(self.expr())
            if len(parts) == 1:
                self.fail(
                    Rule.PATTERN_SHAPE,
                    "a tuple has two components or more; `(e,)` is not a tuple, write `e`",
                    self.span_from(start),
                )
            self.expect(")")
            return ast.TupleExpr(parts, span=self.span_from(start))

        return self.with_struct_literals(inside)

    def name_expr(self) -> ast.Expr:
        """Everything that starts with an identifier: names, qualified calls, variants, literals."""
        start = self.tok.span
        word = self.tok.text
        nxt = self.peek(1).kind
        if word in ("alloc", "alloc_slice") and nxt == "[":
            return self.alloc_expr()
        if nxt == "." and self.peek(2).kind == IDENT:
            after = self.peek(3).kind
            if after == "(":
                qualifier = self.ident()
                self.bump()
                name = self.ident()
                callee = ast.QualifiedName(qualifier, name, span=self.span_from(start))
                args = self.call_args()
                return ast.Call(callee, args, span=self.span_from(start))
            if after == "::" or (after == "{" and not self.no_struct_literal):
                qualifier = self.ident()
                self.bump()
                return self.after_type_name(qualifier, self.ident(), start)
        if nxt == "::" or (nxt == "{" and not self.no_struct_literal):
            return self.after_type_name(None, self.ident(), start)
        self.bump()
        return ast.Name(word, span=start)

    def after_type_name(self, qualifier: Optional[ast.Ident], name: ast.Ident, start) -> ast.Expr:
        """`E::V[(args)]` or `S { f: e, ... }` once `[q.]Name` has been read."""
        if self.eat("::"):
            variant = self.ident()
            args = self.call_args() if self.at("(") else None
            return ast.VariantExpr(qualifier, name, variant, args, span=self.span_from(start))
        self.expect("{")

        def inside() -> list[ast.FieldInit]:
            fields: list[ast.FieldInit] = []
            while not self.at("}"):
                fname = self.ident()
                self.expect(":")
                value = self.expr()
                fields.append(ast.FieldInit(fname, value, span=fname.span.to(value.span)))
                if not self.eat(","):
                    break
            self.expect("}")
            return fields

        fields = self.with_struct_literals(inside)
        return ast.StructLit(qualifier, name, fields, span=self.span_from(start))

    def alloc_expr(self) -> ast.Expr:
        """`alloc[a](v)` or `alloc_slice[a](n, fill)`."""
        start = self.tok.span
        which = self.bump().text
        self.expect("[")
        region = self.ident()
        self.expect("]")
        self.expect("(")

        def inside() -> list[ast.Expr]:
            first = self.expr()
            if which == "alloc":
                self.eat(",")
                self.expect(")")
                return [first]
            self.expect(",")
            second = self.expr()
            self.eat(",")
            self.expect(")")
            return [first, second]

        args = self.with_struct_literals(inside)
        if which == "alloc":
            return ast.Alloc(region, args[0], span=self.span_from(start))
        return ast.AllocSlice(region, args[0], args[1], span=self.span_from(start))

