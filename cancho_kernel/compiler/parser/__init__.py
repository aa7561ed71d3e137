"""The cancho parser: tokens to `ast.File`, refusing at the first error (language.md §2–§4).

`parse_file` is the entry point the checker uses. A lexical or syntax error ends the file: the
result is then `(None, [diagnostic])`, exactly one diagnostic. The parser is split by concern:
`core` (token cursor), `types`, `exprs`, `stmts`, `items`, each a layer of one class.
"""

from __future__ import annotations

from typing import Optional

from .. import ast
from ..diagnostics import Diagnostic, Rule
from ..lexer import EOF, LexError, tokenize
from ..source import SourceFile, Span
from .core import ParseError
from .items import ItemParser

__all__ = ["Parser", "ParseError", "parse_file", "parse_expression_text", "parse_type_text", "parse_stmt_text"]


class Parser(ItemParser):
    """The whole recursive-descent parser over one file's tokens."""


def _parser(source: SourceFile) -> Parser:
    return Parser(source, tokenize(source))


def parse_file(source: SourceFile) -> tuple[Optional[ast.File], list[Diagnostic]]:
    """Parse one file; on a lexical or syntax error return no AST and that one diagnostic."""
    parser: Optional[Parser] = None
    try:
        parser = _parser(source)
        return parser.file(), []
    except LexError as e:
        return None, [e.diagnostic]
    except ParseError as e:
        return None, [e.diagnostic]
    except RecursionError:
        # Nesting beyond what the compiler's stack allows (api.RECURSION_LIMIT, some tens of
        # thousands of levels): refused where the parser stood, rather than crashing.
        at = parser.tok.span if parser is not None else Span(source, 0, 0)
        return None, [Diagnostic(Rule.INTERNAL, "the program nests too deeply for the parser (tens of thousands "
                                 "of levels); split this expression or block", at)]
    except Exception as e:  # a bug of ours: an `internal` refusal, never a crash of the caller
        return None, [Diagnostic(Rule.INTERNAL, f"the parser failed: {type(e).__name__}: {e}", Span(source, 0, 0))]


def _parse_fragment(text: str, method: str):
    """Parse `text` with one parser entry point and insist that all of it was consumed."""
    source = SourceFile("<fragment>", text)
    p = _parser(source)
    node = getattr(p, method)()
    if not p.at(EOF):
        p.fail_expected("end of file")
    return node


def parse_expression_text(text: str) -> ast.Expr:
    """One expression (raises LexError/ParseError); for tests and tools."""
    return _parse_fragment(text, "expr")


def parse_type_text(text: str) -> ast.TypeExpr:
    """One written type (raises LexError/ParseError); for tests and tools."""
    return _parse_fragment(text, "type_expr")


def parse_stmt_text(text: str) -> ast.Stmt:
    """One statement (raises LexError/ParseError); for tests and tools."""
    return _parse_fragment(text, "stmt")
