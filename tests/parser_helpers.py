"""Shared builders and parse helpers for the parser tests (test_parser*.py)."""

from __future__ import annotations

from cancho_kernel.compiler import ast
from cancho_kernel.compiler.parser import parse_expression_text, parse_file, parse_stmt_text, parse_type_text
from cancho_kernel.compiler.source import SourceFile

I = lambda name: ast.Ident(name, span=None)  # noqa: E731  (spans are excluded from equality)
N = lambda name: ast.Name(name, span=None)  # noqa: E731
L = lambda value: ast.IntLit(value, span=None)  # noqa: E731


def B(op, left, right):
    return ast.Binary(op, left, right, span=None)


def U(op, operand):
    return ast.Unary(op, operand, span=None)


def T(name, *args, q=None):
    return ast.NamedType(I(q) if q else None, I(name), list(args), span=None)


def call(name, *args):
    return ast.Call(N(name), list(args), span=None)


def e(text: str) -> ast.Expr:
    return parse_expression_text(text)


def ty(text: str) -> ast.TypeExpr:
    return parse_type_text(text)


def s(text: str) -> ast.Stmt:
    return parse_stmt_text(text)


def parse(text: str) -> ast.File:
    f, diags = parse_file(SourceFile("t.cho", text))
    assert diags == [], [d.render() for d in diags]
    assert f is not None
    return f


def refuse(text: str):
    f, diags = parse_file(SourceFile("t.cho", text))
    assert f is None
    assert len(diags) == 1
    return diags[0]


M = "fn main(world: World) -> [] int { release(world); return 0; }"
P1 = "let Split { io, ffi, fs, heap, args } = split(world);"


def in_fn(body: str) -> str:
    return "fn f() -> [] int {\n" + body + "\n}\n"


def body_of(text: str) -> list[ast.Stmt]:
    return parse(in_fn(text)).items[0].body.stmts
