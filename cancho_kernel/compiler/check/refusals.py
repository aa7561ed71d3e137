"""Refusing a checked program: the two helpers every part of the body checker raises through."""

from __future__ import annotations

from typing import NoReturn

from ..diagnostics import Refusal, Rule
from ..source import Span


def fail(rule: Rule, msg: str, span: Span) -> NoReturn:
    """Refuse the declaration being checked, at `span`."""
    raise Refusal(rule, msg, span)


def mismatch(expected: object, found: object, span: Span) -> NoReturn:
    """`type-mismatch`: `expected` is a type or a phrase (`"a value"`)."""
    exp = expected if isinstance(expected, str) else f"`{expected}`"
    fail(Rule.TYPE_MISMATCH, f"expected {exp}, found `{found}`", span)
