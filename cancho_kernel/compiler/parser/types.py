"""Written types (language.md §3.1), effect rows and labels, and string-literal text.

The parser does not know which names are types: `int`, `Pair[int, bool]` and `i32` all parse,
and the checker decides. In type position `(` always opens a tuple, so `()` and `(int)` become
`TupleType`s with zero and one parts for the checker to refuse.
"""

from __future__ import annotations

from .. import ast
from ..lexer import IDENT, STR
from .core import Cursor


class TypeParser(Cursor):
    """Types, rows and labels."""

    def type_expr(self) -> ast.TypeExpr:
        start = self.tok.span
        if self.eat("&"):
            unique = self.eat("!") is not None
            region = self.ident()
            target = self.type_expr()
            return ast.RefType(region, unique, target, span=self.span_from(start))
        if self.eat("["):
            elem = self.type_expr()
            self.expect("]")
            return ast.SliceType(elem, span=self.span_from(start))
        if self.eat("("):
            parts = self.type_list(")")
            return ast.TupleType(parts, span=self.span_from(start))
        if self.eat("fn"):
            self.expect("(")
            params = self.type_list(")")
            self.expect("->")
            row = self.row()
            ret = self.type_expr()
            return ast.FnType(params, row, ret, span=self.span_from(start))
        if not self.at(IDENT):
            self.fail_expected("a type")
        first = self.ident()
        qualifier = None
        name = first
        if self.eat("."):
            qualifier, name = first, self.ident()
        if self.at("("):
            self.bump()
            lit_tok = self.expect(STR)
            self.expect(")")
            literal = lit_tok.value.decode("utf-8", errors="surrogateescape")
            return ast.CapType(qualifier, name, literal, lit_tok.span, span=self.span_from(start))
        args: list[ast.TypeExpr] = []
        if self.eat("["):
            args = self.type_list("]")
        return ast.NamedType(qualifier, name, args, span=self.span_from(start))

    def type_list(self, close: str) -> list[ast.TypeExpr]:
        """`T, U, ...` up to and including `close`; a trailing comma is allowed."""
        parts: list[ast.TypeExpr] = []
        while not self.at(close):
            parts.append(self.type_expr())
            if not self.eat(","):
                break
        self.expect(close)
        return parts

    def row(self) -> ast.Row:
        """`[label, label("lit"), ...]`: an effect row, `[]` for pure."""
        start = self.expect("[").span
        labels: list[ast.Label] = []
        while not self.at("]"):
            lstart = self.tok.span
            name = self.expect(IDENT).text
            arg = None
            if self.eat("("):
                arg = self.expect(STR).value.decode("utf-8", errors="surrogateescape")
                self.expect(")")
            labels.append(ast.Label(name, arg, span=self.span_from(lstart)))
            if not self.eat(","):
                break
        self.expect("]")
        return ast.Row(labels, span=self.span_from(start))
