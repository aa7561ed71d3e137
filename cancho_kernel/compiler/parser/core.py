"""The token cursor every part of the parser shares: peeking, consuming, `expect`, and errors.

A parse error ends the file (language.md §8), so errors are raised as `ParseError` and caught
once, in `parse_file`. The generic "expected X, found Y" refusal carries the rule tag
`type-mismatch`, as the reference's does.
"""

from __future__ import annotations

from typing import NoReturn, Optional

from ..diagnostics import Diagnostic, Rule
from ..lexer import EOF, IDENT, Token, describe_kind
from ..source import SourceFile, Span
from .. import ast


class ParseError(Exception):
    """The one refusal a file's parse produces."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


class Cursor:
    """Position in a token list, plus the `no_struct_literal` flag of `if`/`while`/`match` heads."""

    def __init__(self, source: SourceFile, tokens: list[Token]):
        self.source = source
        self.tokens = tokens
        self.pos = 0
        # True while parsing an `if`/`while` condition or a `match` scrutinee, where `S {` cannot
        # be told from the block that follows; parentheses and brackets switch it off again.
        self.no_struct_literal = False

    # ---- looking

    @property
    def tok(self) -> Token:
        return self.tokens[self.pos]

    def peek(self, n: int = 0) -> Token:
        """The token n ahead, saturating at EOF."""
        return self.tokens[min(self.pos + n, len(self.tokens) - 1)]

    def at(self, kind: str, n: int = 0) -> bool:
        return self.peek(n).kind == kind

    def at_word(self, word: str, n: int = 0) -> bool:
        """Whether the token n ahead is the identifier `word` (a contextual keyword)."""
        t = self.peek(n)
        return t.kind == IDENT and t.text == word

    # ---- consuming

    def bump(self) -> Token:
        t = self.tokens[self.pos]
        if t.kind != EOF:
            self.pos += 1
        return t

    def eat(self, kind: str) -> Optional[Token]:
        if self.tok.kind == kind:
            return self.bump()
        return None

    def expect(self, kind: str) -> Token:
        if self.tok.kind == kind:
            return self.bump()
        self.fail_expected(describe_kind(kind))

    def ident(self) -> ast.Ident:
        t = self.expect(IDENT)
        return ast.Ident(t.text, span=t.span)

    @property
    def prev_span(self) -> Span:
        """The span of the token consumed last (where a node ends)."""
        return self.tokens[max(self.pos - 1, 0)].span

    def span_from(self, start: Span) -> Span:
        """From the start of `start` to the end of the last consumed token."""
        end = self.prev_span
        return Span(self.source, start.start, max(start.end, end.end))

    # ---- failing

    def fail(self, rule: Rule, message: str, span: Optional[Span] = None) -> NoReturn:
        raise ParseError(Diagnostic(rule, message, span if span is not None else self.tok.span))

    def fail_expected(self, what: str) -> NoReturn:
        """The generic syntax refusal. Its tag is the reference's (`type-mismatch`), but its
        explanation is about syntax: what the grammar needed here and what stood there instead.
        A missing separator or closer (`;`, `)`, `}`, …) is reported where it belongs, at the end
        of the token before it, when what was found starts a later line."""
        found = self.tok.describe()
        span = self.tok.span
        prev = self.tokens[self.pos - 1] if self.pos > 0 else None
        if (what in _SEPARATORS and prev is not None
                and self.source.line_col(prev.span.end)[0] < self.source.line_col(span.start)[0]):
            end = max(prev.span.start, prev.span.end - 1)
            span = Span(self.source, end, prev.span.end)
            after = f" after {prev.describe()}"
        else:
            after = ""
        raise ParseError(Diagnostic(
            Rule.TYPE_MISMATCH, f"expected {what}, found {found}", span,
            explanation=(f"This is a syntax error: the grammar needs {what} here{after}, and "
                         f"{found} cannot stand in its place. Nothing after this point in the "
                         f"file was read (a parse error ends its file; docs/cli.md).")))


# What a missing token is reported after rather than before: separators and closers.
_SEPARATORS = frozenset(f"`{t}`" for t in (";", ",", ")", "]", "}", ">", ":", "=>", "->"))
