"""A Pygments lexer for cancho (language.md §1), registered as the ``pygments.lexers`` entry point
``cancho`` so nbconvert's HTML (which picks the lexer from a notebook's
``language_info.pygments_lexer``) highlights cancho cells.

Words are classed by the shared catalogue (``highlight_words``), the same one the JupyterLab
extension is generated from. A cell's header — the leading blank, ``# NBVAL`` and ``%``/``%%``
directive lines the kernel strips before compiling (``kernel/directives.py``) — is shown one
preprocessor token per directive line, and a header naming ``%%c`` makes the body C, lexed by
Pygments' own ``CLexer``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from pygments.lexer import Lexer, RegexLexer, bygroups, include
from pygments.lexers.c_cpp import CLexer
from pygments.token import (Comment, Keyword, Name, Number, Operator, Punctuation, String, Text,
                            Whitespace, _TokenType)

from .highlight_words import WordClass, catalogue

__all__ = ["CanchoLexer", "CanchoBodyLexer", "WORD_TOKEN", "DIRECTIVE", "split_header"]

# The Pygments token of each word class; the JupyterLab side maps the same classes to tags.
WORD_TOKEN: dict[WordClass, _TokenType] = {
    WordClass.KEYWORD: Keyword,
    WordClass.CONSTANT: Keyword.Constant,
    WordClass.MODE: Keyword.Declaration,
    WordClass.CONTEXTUAL: Keyword.Declaration,
    WordClass.TYPE: Keyword.Type,
    WordClass.CAPABILITY: Name.Builtin.Pseudo,
    WordClass.BUILTIN: Name.Builtin,
}
DIRECTIVE = Comment.Preproc
REGION = Name.Label
EFFECT_LABEL = Name.Attribute

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def _word_callback():
    """A RegexLexer callback classing an identifier by the catalogue (built once per class)."""
    cat = catalogue()
    table = {w: WORD_TOKEN[cls] for cls, ws in cat.classes.items() if cls is not WordClass.CONTEXTUAL
             for w in ws}

    def callback(lexer: RegexLexer, match: re.Match) -> Iterator[tuple[int, _TokenType, str]]:
        word = match.group(0)
        token = table.get(word)
        if token is None:
            token = Name.Class if word[0].isupper() else Name
        yield match.start(), token, word

    return callback


class CanchoBodyLexer(RegexLexer):
    """cancho source without a cell header (a ``.cho`` file's text, or a cell's body)."""

    name = "cancho (source)"
    aliases: list[str] = []
    filenames: list[str] = []

    tokens = {
        "root": [
            (r"[ \t\r\n\f]+", Whitespace),
            (r"//.*?$", Comment.Single),
            # Contextual words, keywords only where an item starts (parser/items.py).
            (r"^(edition)(\s+)([0-9]+)", bygroups(WORD_TOKEN[WordClass.CONTEXTUAL], Whitespace, Number.Integer)),
            (r"^(?:(pub)(\s+))?(static)(\s+)(" + _IDENT + r")(?=\s*:)",
             bygroups(Keyword, Whitespace, WORD_TOKEN[WordClass.CONTEXTUAL], Whitespace, Name.Constant)),
            include("literals"),
            (r"(->)(\s*)(\[)", bygroups(Operator, Whitespace, Punctuation), "row"),
            (r"(fn)(\s+)(" + _IDENT + ")", bygroups(Keyword, Whitespace, Name.Function)),
            (r"(struct|enum)(\s+)(" + _IDENT + ")", bygroups(Keyword, Whitespace, Name.Class)),
            (r"(region)(\s+)(" + _IDENT + ")", bygroups(Keyword, Whitespace, REGION)),
            (r"(alloc|alloc_slice)(\s*)(\[)(\s*)(" + _IDENT + r")(\s*)(\])",
             bygroups(Name.Builtin, Whitespace, Punctuation, Whitespace, REGION, Whitespace, Punctuation)),
            (r"&!?" + _IDENT, REGION),
            (_IDENT, _word_callback()),
            (r"=>|::|\.\.|&&|\|\||==|!=|<=|>=|<<|>>|[+\-*/%!|^~&<>=]", Operator),
            (r"[()\[\]{},.;:]", Punctuation),
            (r".", Text),
        ],
        "literals": [
            (r'"', String, "string"),
            (r"'(\\.|[^'\\\n])'", String.Char),
            # A tuple field right after `.` (`t.0.1`) is an integer, never a float.
            (r"(?<=\.)[0-9][0-9_]*", Number.Integer),
            (r"0x[0-9a-fA-F][0-9a-fA-F_]*", Number.Hex),
            (r"[0-9][0-9_]*\.[0-9][0-9_]*([eE][+-]?[0-9][0-9_]*)?(f32)?", Number.Float),
            (r"[0-9][0-9_]*[eE][+-]?[0-9][0-9_]*(f32)?", Number.Float),
            (r"[0-9][0-9_]*", Number.Integer),
        ],
        "row": [
            (r"[ \t\r\n\f]+", Whitespace),
            (r"\]", Punctuation, "#pop"),
            (r'"', String, "string"),
            (_IDENT, EFFECT_LABEL),
            (r"[(),]", Punctuation),
            (r".", Text, "#pop"),
        ],
        "string": [
            (r'\\.', String.Escape),
            (r'"', String, "#pop"),
            (r'[^"\\\n]+', String),
            (r"\n", String, "#pop"),
        ],
    }


@dataclass(frozen=True)
class HeaderLine:
    """One line of a cell's header: where it starts, its text, and how it is shown."""

    start: int
    text: str
    token: _TokenType


@dataclass(frozen=True)
class Header:
    """A cell's header lines, where its body starts, and whether the body is C (``%%c``)."""

    lines: tuple[HeaderLine, ...]
    body_start: int
    is_c: bool


def split_header(text: str) -> Header:
    """The header as the kernel reads it: blank, ``# NBVAL`` and ``%`` lines before the body."""
    lines: list[HeaderLine] = []
    is_c = False
    pos = 0
    while pos < len(text):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        line = text[pos:end]
        stripped = line.strip()
        if stripped.startswith("%"):
            lines.append(HeaderLine(pos, line, DIRECTIVE))
            is_c = is_c or stripped.split()[0] == "%%c"
        elif stripped.startswith(("# NBVAL", "#NBVAL")):
            lines.append(HeaderLine(pos, line, Comment.Special))
        elif stripped:
            break
        else:
            lines.append(HeaderLine(pos, line, Whitespace))
        pos = end + 1
    return Header(tuple(lines), min(pos, len(text)), is_c)


class CanchoLexer(Lexer):
    """cancho source (``.cho``) and cancho notebook cells, directive header included."""

    name = "cancho"
    aliases = ["cancho", "cho"]
    filenames = ["*.cho"]
    mimetypes = ["text/x-cancho"]
    url = "https://github.com/alpibrusl/cancho"

    def get_tokens_unprocessed(self, text: str) -> Iterator[tuple[int, _TokenType, str]]:
        header = split_header(text)
        for line in header.lines:
            body = line.text.lstrip()
            indent = len(line.text) - len(body)
            if line.token is Whitespace or not body:
                if line.text:
                    yield line.start, Whitespace, line.text
            else:
                if indent:
                    yield line.start, Whitespace, line.text[:indent]
                yield line.start + indent, line.token, body
            newline = line.start + len(line.text)
            if newline < len(text):
                yield newline, Whitespace, "\n"
        sub: Lexer = CLexer(**self.options) if header.is_c else CanchoBodyLexer(**self.options)
        for index, token, value in sub.get_tokens_unprocessed(text[header.body_start:]):
            yield index + header.body_start, token, value
