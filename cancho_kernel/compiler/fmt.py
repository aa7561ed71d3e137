"""`cancho fmt`: a file in the canonical layout, with its comments, blank lines and literal
spellings put back (the reference's `docs/formatting.md`).

The tree has no comments, no blank lines and no spellings, so the layout comes from the printer
(``compiler/printer.py``) and the rest from the text: the source's tokens are aligned with the
printed text's, and they may differ only in the known ways: a redundant pair of parentheses the
printer drops, a trailing comma dropped or added, and a literal spelled another way (`'a'`, `0x10`,
`1_000`: the source's spelling is kept). Anything else stops the formatter and the file is left
alone; an `import` after the first declaration is refused with the reference's advice (move it up),
since the canonical form writes every import first. A comment is put back by the token beside it:
one written at the end of a line stays at the end of the output line that token ends, when it
ends one and the line has no comment yet; any other goes on its own line above the next token's
line (so a comment inside an expression moves above its statement), one level in when that line
closes a block. One blank line is kept where the source had one or more, never right after `{`
or right before `}`.

The result is returned only if it passes three checks: it parses to the same tree, it holds the
same comments in the same order, and formatting it again changes nothing.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Optional

from .diagnostics import Diagnostic
from .lexer import EOF, FLOAT, INT, STR, LexError, Token, tokenize
from .parser import parse_file
from .printer import INDENT, print_file
from .source import SourceFile

_COMMENT_RE = re.compile(r"//[^\n]*")
_LITERALS = (INT, FLOAT, STR)


class Failure(enum.Enum):
    """Why a file was not formatted."""

    PARSE = "parse"  # it does not parse: the diagnostic says where
    CANNOT = "cannot"  # it parses, but its layout could not be rebuilt without a loss


class FormatError(Exception):
    """The file is left as it was: `diagnostic` for a parse error, `why` otherwise."""

    def __init__(self, failure: Failure, why: str, diagnostic: Optional[Diagnostic] = None) -> None:
        super().__init__(why)
        self.failure = failure
        self.why = why
        self.diagnostic = diagnostic


@dataclass(frozen=True)
class Comment:
    """One `//` comment of the source and the token it belongs to."""

    text: str
    token: int  # index of the source token it is attached to
    trailing: bool  # it ended a line of code (attached to the token before it)
    blank_before: bool


@dataclass(frozen=True)
class Scanned:
    """A source's tokens, its comments, and which tokens had a blank line before them."""

    tokens: list[Token]
    comments: list[Comment]
    blank_before: frozenset[int]


def format_text(text: str, name: str = "<input>") -> str:
    """`text` in the canonical layout; raises FormatError when it cannot be formatted."""
    from .api import run_deep

    return run_deep(lambda: _format(text, name, verify=True))


def _format(text: str, name: str, verify: bool) -> str:
    source = SourceFile(name, text)
    tree, diags = parse_file(source)
    if tree is None:
        raise FormatError(Failure.PARSE, diags[0].message, diags[0])
    scanned = scan(source)
    printed = print_file(tree)
    ptokens = tokenize(SourceFile("<printed>", printed))
    order = list(range(len(scanned.tokens) - 1))
    mapping, spelled = align(scanned.tokens, ptokens, order)
    out = _assemble(scanned, order, mapping, spelled, printed, ptokens)
    if verify:
        _verify(text, out, tree, scanned, name)
    return out


def _verify(text: str, out: str, tree, scanned: Scanned, name: str) -> None:
    """The three checks; a failure here is a formatter bug, reported rather than written."""
    again, diags = parse_file(SourceFile(name, out))
    if again is None or again != tree:
        why = diags[0].message if diags else "the tree changed"
        raise FormatError(Failure.CANNOT, f"the formatted text does not parse to the same program ({why})")
    kept = [c.text for c in scan(SourceFile(name, out)).comments]
    if kept != [c.text for c in scanned.comments]:
        raise FormatError(Failure.CANNOT, "a comment would be lost or moved out of order")
    if _format(out, name, verify=False) != out:
        raise FormatError(Failure.CANNOT, "formatting the result again would change it")


# ---------------------------------------------------------------- the source's comments


def scan(source: SourceFile) -> Scanned:
    """Tokens, comments with their attachments, and blank lines before tokens."""
    try:
        tokens = tokenize(source)
    except LexError as e:
        raise FormatError(Failure.PARSE, e.diagnostic.message, e.diagnostic) from None
    text = source.text
    comments: list[Comment] = []
    blank: set[int] = set()
    prev_end = 0
    for k, tok in enumerate(tokens):
        cursor = prev_end
        for m in _COMMENT_RE.finditer(text, prev_end, tok.span.start):
            gap = text[cursor:m.start()]
            trailing = k > 0 and cursor == prev_end and "\n" not in gap
            comments.append(Comment(m.group().rstrip(), k - 1 if trailing else k, trailing,
                                    gap.count("\n") >= 2))
            cursor = m.end()
        if text[cursor:tok.span.start].count("\n") >= 2:
            blank.add(k)
        prev_end = tok.span.end
    return Scanned(tokens, comments, frozenset(blank))


# ---------------------------------------------------------------- alignment


def _same(s: Token, p: Token) -> bool:
    if s.kind != p.kind:
        return False
    return s.value == p.value if s.kind in _LITERALS else s.text == p.text


def _key(tok: Token) -> tuple:
    return (tok.kind, tok.value if tok.kind in _LITERALS else tok.text)


class _Skeleton:
    """What a parenthesised stretch holds, parentheses and commas aside: the test that decides
    whether a source pair is the printed pair or a redundant one around it."""

    def __init__(self, tokens: list[Token]) -> None:
        self.keys = [_key(t) for t in tokens if t.kind not in ("(", ")", ",")]
        self.before = [0]
        for t in tokens:
            self.before.append(self.before[-1] + (t.kind not in ("(", ")", ",")))

    def inside(self, open_at: int, close_at: int) -> list[tuple]:
        return self.keys[self.before[open_at + 1]:self.before[close_at]]


def _paren_partners(tokens: list[Token]) -> dict[int, int]:
    partners: dict[int, int] = {}
    stack: list[int] = []
    for k, tok in enumerate(tokens):
        if tok.kind == "(":
            stack.append(k)
        elif tok.kind == ")" and stack:
            partners[stack.pop()] = k
    return partners


def align(tokens: list[Token], ptokens: list[Token], order: list[int]) -> tuple[dict[int, int], dict[int, str]]:
    """Source index → printed index for every kept source token, and the source spelling of each
    printed literal spelled otherwise. Raises FormatError at the first unexplained difference."""
    partners, ppartners = _paren_partners(tokens), _paren_partners(ptokens)
    skeleton, pskeleton = _Skeleton(tokens), _Skeleton(ptokens)
    mapping: dict[int, int] = {}
    spelled: dict[int, str] = {}
    dropped: set[int] = set()
    i = j = 0
    last = len(ptokens) - 1  # the printed EOF
    while i < len(order) or j < last:
        si = order[i] if i < len(order) else None
        if si is not None and si in dropped:
            i += 1
            continue
        s = tokens[si] if si is not None else None
        p = ptokens[j] if j < last else None
        redundant = (s is not None and s.kind == "(" and si in partners and p is not None and p.kind == "("
                     and j in ppartners and skeleton.inside(si, partners[si]) != pskeleton.inside(j, ppartners[j]))
        if not redundant and s is not None and p is not None and _same(s, p):
            mapping[si] = j
            if s.text != p.text:
                spelled[j] = s.text
            i, j = i + 1, j + 1
        elif s is not None and s.kind == "(" and si in partners:
            dropped.add(partners[si])
            i += 1
        elif s is not None and s.kind == ",":
            i += 1
        elif p is not None and p.kind == ",":
            j += 1
        elif p is not None and p.kind == "import":
            late = next((tokens[k] for k in order[i:] if tokens[k].kind == "import"), s)
            line = late.span.line if late is not None else 0
            raise FormatError(Failure.CANNOT, f"line {line}: an `import` after the first declaration; the "
                              "canonical form puts every import before it, so move this one up")
        else:
            raise FormatError(Failure.CANNOT, _mismatch(s, p))
    mapping[len(tokens) - 1] = last
    return mapping, spelled


def _mismatch(s: Optional[Token], p: Optional[Token]) -> str:
    where = f"line {s.span.line}: `{s.text}`" if s is not None else "the end of the file"
    found = f"`{p.text}`" if p is not None else "the end"
    return f"the canonical layout does not line up with the source at {where} (printed: {found})"


# ---------------------------------------------------------------- output


@dataclass(frozen=True)
class _Placed:
    """Where comments go on one printed line: above it, and one at its end."""

    above: tuple[Comment, ...]
    end: Optional[Comment]


def _kept(order: list[int], mapping: dict[int, int], start: int, forward: bool) -> Optional[int]:
    """The printed index of the nearest kept source token from position `start` of `order`."""
    positions = range(start, len(order)) if forward else range(start, -1, -1)
    return next((mapping[order[k]] for k in positions if order[k] in mapping), None)


def _placements(scanned: Scanned, order, mapping, line_of: list[int]) -> tuple[dict[int, _Placed], list[Comment]]:
    """Where each comment goes (the reference's rule): one written at the end of a line stays at
    the end of the output line its token ended up on, if that token ends that line and the line
    has no comment yet; every other goes on its own line above the next token's line."""
    eof = len(line_of) - 1
    above: dict[int, list[Comment]] = {}
    end: dict[int, Comment] = {}
    at_eof: list[Comment] = []
    for c in scanned.comments:
        if c.trailing:
            j = _kept(order, mapping, c.token, forward=False)
            if j is not None and (j + 1 >= eof or line_of[j + 1] != line_of[j]) and line_of[j] not in end:
                end[line_of[j]] = c
                continue
        nxt = _kept(order, mapping, c.token + 1 if c.trailing else c.token, forward=True)
        if nxt is None or nxt >= eof:
            at_eof.append(c)
        else:
            above.setdefault(line_of[nxt], []).append(c)
    lines = set(above) | set(end)
    return {n: _Placed(tuple(above.get(n, ())), end.get(n)) for n in lines}, at_eof


def _assemble(scanned: Scanned, order, mapping, spelled, printed: str, ptokens: list[Token]) -> str:
    lines = printed.split("\n")[:-1]
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    line_of = [t.span.line - 1 for t in ptokens]
    placed, at_end = _placements(scanned, order, mapping, line_of)
    source_of = {j: k for k, j in mapping.items()}
    first_on: dict[int, int] = {}
    for j in range(len(ptokens) - 1):
        first_on.setdefault(line_of[j], j)
    blank = _blank_tokens(scanned, order, mapping)
    out = _Output()
    for n, line in enumerate(lines):
        if not line:
            out.blank()
            continue
        indent = line[: len(line) - len(line.lstrip())]
        if line.lstrip().startswith("}"):  # a comment before a block's end is inside the block
            indent += INDENT
        spot = placed.get(n, _Placed((), None))
        for c in spot.above:
            out.comment(indent + c.text, c.blank_before)
        j0 = first_on.get(n)
        text = _respelled(line, starts[n], ptokens, spelled, j0, line_of)
        wants_blank = j0 is not None and source_of.get(j0) in blank
        out.code(text + (" " + spot.end.text if spot.end is not None else ""), wants_blank, text.endswith("{"))
    for c in at_end:
        out.comment(c.text, c.blank_before)
    return out.text()


def _blank_tokens(scanned: Scanned, order: list[int], mapping: dict[int, int]) -> set[int]:
    """Kept source tokens with a blank line before them; a dropped token passes its blank on."""
    blank: set[int] = set()
    carry = False
    for k in order + [len(scanned.tokens) - 1]:
        here = carry or k in scanned.blank_before
        if k in mapping:
            if here:
                blank.add(k)
            carry = False
        else:
            carry = here
    return blank


def _respelled(line: str, start: int, ptokens: list[Token], spelled: dict[int, str], j0, line_of) -> str:
    if j0 is None:
        return line.rstrip()
    n = line_of[j0]
    j = j0
    pieces: list[tuple[int, int, str]] = []
    while j < len(ptokens) - 1 and line_of[j] == n:
        if j in spelled:
            tok = ptokens[j]
            pieces.append((tok.span.start - start, tok.span.end - start, spelled[j]))
        j += 1
    for a, b, new in reversed(pieces):
        line = line[:a] + new + line[b:]
    return line.rstrip()


class _Output:
    """Lines written so far, with the blank-line rules: at most one in a row, none at the start,
    none right after a line ending in `{` or right before one starting with `}`."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.opened = False  # the last line's code ends with `{` (a comment may follow it)

    def blank(self) -> None:
        if self.lines and self.lines[-1] != "" and not self.opened:
            self.lines.append("")

    def comment(self, text: str, blank_before: bool) -> None:
        if blank_before:
            self.blank()
        self.lines.append(text.rstrip())
        self.opened = False

    def code(self, text: str, blank_before: bool, opens: bool) -> None:
        if text.lstrip().startswith("}"):
            while self.lines and self.lines[-1] == "":
                self.lines.pop()
        elif blank_before:
            self.blank()
        self.lines.append(text)
        self.opened = opens

    def text(self) -> str:
        while self.lines and self.lines[-1] == "":
            self.lines.pop()
        return "".join(line + "\n" for line in self.lines)
