"""Control-flow shape rules: `missing-return` and `unreachable-statement` (language.md §4.1).

A statement always leaves its block when it is a `return`, an `if` whose every branch leaves, a
`match` whose every arm leaves, or a `borrow`/`region` block that leaves. No loop counts as
leaving (the linearity replay treats no loop as diverging either).
"""

from __future__ import annotations

from typing import Optional

from .. import ast
from ..diagnostics import Diagnostic, Rule


def leaves(stmt: ast.Stmt) -> bool:
    if isinstance(stmt, ast.Return):
        return True
    if isinstance(stmt, ast.If):
        if stmt.else_ is None:
            return False
        other = leaves(stmt.else_) if isinstance(stmt.else_, ast.If) else block_leaves(stmt.else_)
        return block_leaves(stmt.then) and other
    if isinstance(stmt, ast.Match):
        return bool(stmt.arms) and all(block_leaves(a.body) for a in stmt.arms)
    if isinstance(stmt, (ast.Borrow, ast.RegionStmt)):
        return block_leaves(stmt.body)
    return False


def block_leaves(block: ast.Block) -> bool:
    return any(leaves(s) for s in block.stmts)


def _nested_blocks(stmt: ast.Stmt) -> list[ast.Block]:
    if isinstance(stmt, ast.If):
        out = [stmt.then]
        if isinstance(stmt.else_, ast.If):
            out += _nested_blocks(stmt.else_)
        elif stmt.else_ is not None:
            out.append(stmt.else_)
        return out
    if isinstance(stmt, ast.While):
        return [stmt.body]
    if isinstance(stmt, ast.Match):
        return [a.body for a in stmt.arms]
    if isinstance(stmt, (ast.Borrow, ast.RegionStmt)):
        return [stmt.body]
    return []


def unreachable(block: ast.Block) -> Optional[Diagnostic]:
    """The first statement placed after one that always leaves, searching nested blocks too."""
    for i, s in enumerate(block.stmts):
        for b in _nested_blocks(s):
            d = unreachable(b)
            if d is not None:
                return d
        if leaves(s) and i + 1 < len(block.stmts):
            nxt = block.stmts[i + 1]
            return Diagnostic(Rule.UNREACHABLE_STATEMENT,
                              "this statement can never run: the one before it always leaves the block (a `return`)",
                              nxt.span)
    return None


def check_flow(fn) -> Optional[Diagnostic]:
    d = unreachable(fn.body)
    if d is not None:
        return d
    if not block_leaves(fn.body):
        return Diagnostic(Rule.MISSING_RETURN,
                          f"`{fn.name.name}` can reach the end of its body without a `return`; every path must return a value",
                          fn.name.span)
    return None
