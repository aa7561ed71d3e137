"""Blocks and statements (language.md §4.1).

Blocks are statement lists with no tail expression; `if`, `while`, `match`, `borrow` and
`region` are statements. Conditions of `if`/`while` and `match` scrutinees are parsed without
struct literals, so the `{` that follows is the block's.
"""

from __future__ import annotations

from typing import Optional

from .. import ast
from ..lexer import EOF, IDENT
from ..source import Span
from ..diagnostics import Rule
from .exprs import ExprParser


class StmtParser(ExprParser):
    """Statements, blocks, match arms and patterns."""

    def block(self) -> ast.Block:
        start = self.expect("{").span
        stmts: list[ast.Stmt] = []
        while not self.at("}"):
            if self.at(EOF):
                self.fail_expected("`}`")
            stmts.append(self.stmt())
        self.expect("}")
        return ast.Block(stmts, span=self.span_from(start))

    def stmt(self) -> ast.Stmt:
        kind = self.tok.kind
        if kind == "let":
            return self.let_stmt()
        if kind == "var":
            return self.var_stmt()
        if kind == "if":
            return self.if_stmt()
        if kind == "while":
            start = self.bump().span
            cond = self.without_struct_literals(self.expr)
            body = self.block()
            return ast.While(cond, body, span=self.span_from(start))
        if kind == "match":
            return self.match_stmt()
        if kind == "return":
            start = self.bump().span
            value = self.expr()
            self.expect(";")
            return ast.Return(value, span=self.span_from(start))
        if kind == "defer":
            start = self.bump().span
            value = self.expr()
            self.expect(";")
            return ast.Defer(value, span=self.span_from(start))
        if kind == "borrow":
            return self.borrow_stmt()
        if kind == "region":
            start = self.bump().span
            name = self.ident()
            body = self.block()
            return ast.RegionStmt(name, body, span=self.span_from(start))
        start = self.tok.span
        target = self.expr()
        if self.eat("="):
            value = self.expr()
            self.expect(";")
            return ast.Assign(target, value, span=self.span_from(start))
        self.expect(";")
        return ast.ExprStmt(target, span=self.span_from(start))

    def let_stmt(self) -> ast.Stmt:
        start = self.expect("let").span
        if self.eat("("):
            names: list[ast.Ident] = []
            while not self.at(")"):
                if self.at("("):
                    self.fail(
                        Rule.PATTERN_SHAPE,
                        "a pattern does not nest; bind the inner tuple to a name here and take it apart "
                        "in the next statement",
                    )
                names.append(self.ident())
                if not self.eat(","):
                    break
            self.expect(")")
            self.expect("=")
            value = self.expr()
            self.expect(";")
            return ast.LetTuple(names, value, span=self.span_from(start))
        qualified = self.at(IDENT) and self.at(".", 1) and self.at(IDENT, 2) and self.at("{", 3)
        if qualified or (self.at(IDENT) and self.at("{", 1)):
            qualifier: Optional[ast.Ident] = None
            if qualified:
                qualifier = self.ident()
                self.bump()
            struct = self.ident()
            self.expect("{")
            fields: list[ast.Ident] = []
            while not self.at("}"):
                fields.append(self.ident())
                if not self.eat(","):
                    break
            self.expect("}")
            self.expect("=")
            value = self.expr()
            self.expect(";")
            return ast.LetStruct(qualifier, struct, fields, value, span=self.span_from(start))
        return self.binding_rest(start, mutable=False)

    def var_stmt(self) -> ast.Stmt:
        start = self.expect("var").span
        # `var` cannot destructure; the reference refuses it with `pattern-shape`.
        if self.at("(") or (self.at(IDENT) and (self.at("{", 1) or (self.at(".", 1) and self.at(IDENT, 2) and self.at("{", 3)))):
            at = self.tok if self.at("(") else (self.peek(1) if self.at("{", 1) else self.peek(3))
            self.fail(
                Rule.PATTERN_SHAPE, "a destructuring binding takes a value apart once; write `let`, not `var`", at.span
            )
        return self.binding_rest(start, mutable=True)

    def binding_rest(self, start, mutable: bool) -> ast.Let:
        """`IDENT [: type] = expr ;` after `let` or `var`."""
        name = self.ident()
        ty = self.type_expr() if self.eat(":") else None
        self.expect("=")
        value = self.expr()
        self.expect(";")
        return ast.Let(name, ty, value, mutable, span=self.span_from(start))

    def if_stmt(self) -> ast.If:
        """`if c { } else if c { } ... [else { }]`: the chain is read in a loop (an `else if`
        chain of 10,000 branches is ordinary dispatch code), then nested from the last branch."""
        heads: list[tuple[Span, ast.Expr, ast.Block]] = []
        else_: Optional[ast.Block | ast.If] = None
        while True:
            start = self.expect("if").span
            cond = self.without_struct_literals(self.expr)
            heads.append((start, cond, self.block()))
            if not self.eat("else"):
                break
            if not self.at("if"):
                else_ = self.block()
                break
        for start, cond, then in reversed(heads):
            else_ = ast.If(cond, then, else_, span=self.span_from(start))
        assert isinstance(else_, ast.If)
        return else_

    def match_stmt(self) -> ast.Match:
        start = self.expect("match").span
        scrutinee = self.without_struct_literals(self.expr)
        self.expect("{")
        arms: list[ast.Arm] = []
        while not self.at("}"):
            if self.at(EOF):
                self.fail_expected("`}`")
            astart = self.tok.span
            pattern = self.pattern()
            self.expect("=>")
            body = self.block()
            arms.append(ast.Arm(pattern, body, span=self.span_from(astart)))
            self.eat(",")  # tolerated after an arm's block (unconfirmed in the reference)
        self.expect("}")
        return ast.Match(scrutinee, arms, span=self.span_from(start))

    def pattern(self) -> ast.Pattern:
        start = self.tok.span
        if self.eat("_"):
            return ast.WildcardPattern(span=start)
        if not self.at(IDENT):
            self.fail_expected("a pattern")
        qualifier: Optional[ast.Ident] = None
        enum = self.ident()
        if self.eat("."):
            qualifier, enum = enum, self.ident()
        self.expect("::")
        variant = self.ident()
        bindings: Optional[list[Optional[ast.Ident]]] = None
        if self.eat("("):
            bindings = []
            while not self.at(")"):
                if self.eat("_"):
                    bindings.append(None)
                else:
                    bindings.append(self.ident())
                if not self.eat(","):
                    break
            self.expect(")")
        return ast.VariantPattern(qualifier, enum, variant, bindings, span=self.span_from(start))

    def borrow_stmt(self) -> ast.Borrow:
        """`borrow [mut] x as &[!]r in { ... }`."""
        start = self.expect("borrow").span
        mutable = self.eat("mut") is not None
        target = self.ident()
        self.expect("as")
        self.expect("&")
        bang = self.eat("!")
        unique = bang is not None
        if unique != mutable:
            self.fail(
                Rule.PATTERN_SHAPE,
                "`borrow mut` binds a unique reference; write `as &!r`"
                if mutable
                else "`as &!r` binds a unique reference; write `borrow mut`",
            )
        region = self.ident()
        self.expect("in")
        body = self.block()
        return ast.Borrow(target, mutable, region, unique, body, span=self.span_from(start))
