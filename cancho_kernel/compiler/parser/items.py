"""Files and items (language.md §2): `edition`, `module`, `import`, and the five declarations.

`edition` and `static` are contextual words, recognised by their identifier text only where an
edition marker or an item may start. `module` must come before every import and item and at most
once (`program-shape`). Declaration parameters record what was written, including a `[T: res]`
bound, region parameters on types and type parameters on externs: refusing those is the
checker's job, which can say why.
"""

from __future__ import annotations

from typing import Optional, Union

from .. import ast
from ..lexer import EOF, IDENT, INT
from ..source import Span
from ..diagnostics import Rule
from .stmts import StmtParser

KNOWN_EDITIONS = range(1, 9)


class ItemParser(StmtParser):
    """The top level of a file."""

    def file(self) -> ast.File:
        result = ast.File(span=Span(self.source, 0, len(self.source.text)), source=self.source)
        if self.at_word("edition"):
            keyword = self.bump()
            number = self.tok
            if number.kind != INT:
                self.fail(Rule.UNKNOWN_EDITION, f"expected an edition number, found {number.describe()}")
            self.bump()
            if number.value not in KNOWN_EDITIONS:
                self.fail(
                    Rule.UNKNOWN_EDITION,
                    f"unknown edition {number.text}; the only editions today are 1, 2, 3, 4, 5, 6, 7 and 8",
                    keyword.span.to(number.span),
                )
            self.expect(";")
            result.edition = number.value
            result.edition_span = self.span_from(keyword.span)
        seen_item = False
        while not self.at(EOF):
            if self.at("module"):
                keyword = self.bump()
                if result.module is not None:
                    self.fail(Rule.PROGRAM_SHAPE, "a file declares at most one module", keyword.span)
                if seen_item:
                    self.fail(Rule.PROGRAM_SHAPE, "a `module` declaration is the first item in its file", keyword.span)
                path = self.path()
                self.expect(";")
                result.module = ast.ModuleDecl(path, span=self.span_from(keyword.span))
                continue
            seen_item = True
            if self.at("import"):
                keyword = self.bump()
                path = self.path()
                alias = self.ident() if self.eat("as") else None
                self.expect(";")
                result.imports.append(ast.Import(path, alias, span=self.span_from(keyword.span)))
                continue
            result.items.append(self.item())
        return result

    def path(self) -> list[ast.Ident]:
        """`a.b.c`: a module path."""
        parts = [self.ident()]
        while self.eat("."):
            parts.append(self.ident())
        return parts

    def item(self) -> ast.Item:
        start = self.tok.span
        pub = self.eat("pub") is not None
        if self.at_word("static"):
            self.bump()
            name = self.ident()
            self.expect(":")
            ty = self.type_expr()
            body = self.block()
            return ast.StaticDecl(name, ty, body, pub=pub, span=self.span_from(start))
        kind = self.tok.kind
        if kind == "fn":
            return self.fn_decl(start, pub)
        if kind == "extern":
            self.bump()
            self.expect("fn")
            name = self.ident()
            generics = self.decl_params()
            if generics is not None and generics.types:
                self.fail(Rule.FOREIGN_DECLARATION, "a foreign function takes no type parameters; C has none to instantiate")
            params = self.params()
            self.expect("->")
            row = self.row()
            ret = self.type_expr()
            self.expect(";")
            return ast.ExternFn(name, generics, params, row, ret, pub=pub, span=self.span_from(start))
        mode: Optional[str] = None
        if kind in ("res", "val"):
            keyword = self.bump()
            mode = kind
            if not (self.at("struct") or self.at("enum")):
                self.fail_expected(f"`struct` or `enum` after `{keyword.text}`")
            kind = self.tok.kind
        if kind == "struct":
            self.bump()
            name = self.ident()
            generics = self.type_decl_params(mode)
            self.expect("{")
            fields: list[ast.FieldDecl] = []
            while not self.at("}"):
                fname = self.ident()
                self.expect(":")
                fty = self.type_expr()
                fields.append(ast.FieldDecl(fname, fty, span=fname.span.to(fty.span)))
                if not self.eat(","):
                    break
            self.expect("}")
            return ast.StructDecl(name, mode, generics, fields, pub=pub, span=self.span_from(start))
        if kind == "enum":
            self.bump()
            name = self.ident()
            generics = self.type_decl_params(mode)
            self.expect("{")
            variants: list[ast.VariantDecl] = []
            while not self.at("}"):
                vname = self.ident()
                payload: list[ast.TypeExpr] = []
                has_parens = False
                if self.eat("("):
                    has_parens = True
                    payload = self.type_list(")")
                variants.append(ast.VariantDecl(vname, payload, has_parens, span=self.span_from(vname.span)))
                if not self.eat(","):
                    break
            self.expect("}")
            return ast.EnumDecl(name, mode, generics, variants, pub=pub, span=self.span_from(start))
        self.fail_expected("`fn`, `extern`, `struct`, `enum` or `static`")

    def fn_decl(self, start: Span, pub: bool) -> ast.FnDecl:
        self.expect("fn")
        name = self.ident()
        generics = self.decl_params()
        params = self.params()
        self.expect("->")
        row = self.row()
        ret = self.type_expr()
        body = self.block()
        return ast.FnDecl(name, generics, params, row, ret, body, pub=pub, span=self.span_from(start))

    def type_decl_params(self, mode: Optional[str]) -> Optional[ast.Generics]:
        """A struct's or enum's parameters: no regions, and no bounds on a `val` declaration."""
        generics = self.decl_params()
        if generics is None:
            return None
        if generics.regions:
            self.fail(Rule.REGION_MISMATCH, "a type declaration has no region parameters; only a function can take one")
        if mode == "val" and any(t.bound is not None for t in generics.types):
            self.fail(
                Rule.MODE_BOUND_VIOLATED,
                "a `val` declaration already bounds its parameters: `val struct X[T]` means `T` is `val`, so the "
                "bound says nothing new; a `res` or undeclared one is where writing it means something",
            )
        return generics

    def params(self) -> list[ast.Param]:
        """`( [name: type {, name: type} [,]] )`."""
        self.expect("(")
        params: list[ast.Param] = []
        while not self.at(")"):
            name = self.ident()
            self.expect(":")
            ty = self.type_expr()
            params.append(ast.Param(name, ty, span=name.span.to(ty.span)))
            if not self.eat(","):
                break
        self.expect(")")
        return params

    def decl_params(self) -> Optional[ast.Generics]:
        """`[&r, T, U: val where a <= b, ...]` after a declared name, or None when absent."""
        if not self.at("["):
            return None
        start = self.bump().span
        params: list[Union[ast.RegionParam, ast.TypeParam]] = []
        while not (self.at("]") or self.at("where")):
            pstart = self.tok.span
            if self.eat("&"):
                name = self.expect(IDENT).text
                params.append(ast.RegionParam(name, span=self.span_from(pstart)))
            else:
                name = self.expect(IDENT).text
                bound: Optional[str] = None
                if self.eat(":"):
                    if self.at("val") or self.at("res"):
                        bound = self.bump().kind
                    else:
                        self.fail_expected("`val` after `:`")
                params.append(ast.TypeParam(name, bound, span=self.span_from(pstart)))
            if not self.eat(","):
                break
        where: list[ast.WhereClause] = []
        if self.eat("where"):
            while True:
                inner = self.ident()
                self.expect("<=")
                outer = self.ident()
                where.append(ast.WhereClause(inner, outer, span=inner.span.to(outer.span)))
                if not self.eat(","):
                    break
        self.expect("]")
        return ast.Generics(params, where, span=self.span_from(start))
