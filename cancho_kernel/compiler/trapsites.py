"""Trap sites: which check a trap is and where it is in the source, kept beside the program.

Why a side table (issue 25 item 3): a trap must stay exactly what it was (SIGILL, nothing
printed, nothing flushed), so the program carries no message. Each trap site instead gets its
own trap instruction whose encoding holds a 32-bit site number (x86-64: `ud1` with a 32-bit
displacement; AArch64: `udf` with a 16-bit immediate), so no two sites can be merged by the
optimiser and the number can be read back from the faulting address. The compiler keeps a
:class:`TrapTable` from numbers to :class:`TrapSite` records (the check's :class:`TrapKind`,
its operator or builtin, the file, line and column, the source line); the supervisor of a run
reads the number (``backends/trapreport.py``) and the CLI and the kernel show the site.

A site's number is a hash of the LLVM function's name and the site's place among that
function's traps, so a function's lowered text does not depend on the program around it (it
is kept by ``codegen/fncache.py`` and put back unchanged); a site's position is kept relative
to its function's declaration for the same reason (:class:`RelativeSite`).
"""

from __future__ import annotations

import hashlib
import json
import platform
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache
from typing import Iterable, Mapping, Optional

from .source import SourceFile, Span

# One site number never repeats in a program: a collision makes both sites unknown.
X86_UD1 = bytes((0x0F, 0xB9, 0x80))  # ud1 eax, [rax + disp32]: SIGILL, the disp32 is the number


class TrapKind(StrEnum):
    """Which check fired; the value is the tag shown in JSON and tests."""

    OVERFLOW = "overflow"
    NEGATION = "negation"
    DIVISION = "division"
    REMAINDER = "remainder"
    SHIFT = "shift"
    INDEX = "index"
    SLICE = "slice"
    BYTE_OF = "byte_of"
    CONVERSION = "conversion"
    ARENA = "arena"
    ALLOCATION = "allocation"
    EXPLICIT = "trap"
    CHECK = "check"


def describe(kind: TrapKind, detail: str) -> str:
    """The check in words: `integer overflow in `+``, `index out of bounds`, …"""
    d = f"`{detail}`" if detail else ""
    words = {
        TrapKind.OVERFLOW: f"integer overflow in {d}",
        TrapKind.NEGATION: "integer overflow in unary `-`",
        TrapKind.DIVISION: f"division by zero or overflow in {d}" if detail else "division by zero",
        TrapKind.REMAINDER: f"remainder by zero in {d}",
        TrapKind.SHIFT: f"shift amount outside 0..63 in {d}",
        TrapKind.INDEX: "index out of bounds",
        TrapKind.SLICE: "slice bounds out of range",
        TrapKind.BYTE_OF: "`byte_of` of a value outside 0..255",
        TrapKind.CONVERSION: f"{d} of NaN, an infinity or a magnitude of 2^63 or more",
        TrapKind.ARENA: "arena exhausted",
        TrapKind.ALLOCATION: f"allocation failed in {d}" if detail else "allocation failed",
        TrapKind.EXPLICIT: "`trap()` called",
        TrapKind.CHECK: f"a check of {d} failed",
    }
    return words[kind]


@dataclass(frozen=True)
class RelativeSite:
    """A site as its function's lowering records it: kind, detail and the character range
    relative to the start of the function's declaration (so a kept text stays true wherever
    the function moves)."""

    number: int
    kind: TrapKind
    detail: str
    start: int
    end: int


@dataclass(frozen=True)
class TrapSite:
    """One trap site of a program: what it checks and where (1-based line and column)."""

    kind: TrapKind
    detail: str
    path: str
    line: int
    column: int
    width: int
    text: str  # the source line

    @property
    def headline(self) -> str:
        return f"trap: {describe(self.kind, self.detail)} at {self.path}:{self.line}:{self.column}"

    def render(self) -> str:
        """The headline, then the source line and a caret, as a refusal shows its own."""
        gutter = " " * len(str(self.line))
        return (f"{self.headline}\n{gutter} |\n{self.line} | {self.text}\n"
                f"{gutter} | {' ' * (self.column - 1)}{'^' * max(1, self.width)}")

    def to_json(self) -> dict:
        return {"kind": self.kind.value, "detail": self.detail, "path": self.path, "line": self.line,
                "column": self.column, "width": self.width, "text": self.text}

    @classmethod
    def from_json(cls, d: Mapping) -> "TrapSite":
        return cls(TrapKind(d["kind"]), str(d["detail"]), str(d["path"]), int(d["line"]),
                   int(d["column"]), int(d["width"]), str(d["text"]))


def site_at(kind: TrapKind, detail: str, span: Span) -> TrapSite:
    """The site of a check at ``span`` (its caret under the span's first line)."""
    src = span.source
    line, col = src.line_col(span.start)
    end_line, end_col = src.line_col(max(span.start, span.end - 1))
    text = src.line_text(line)
    width = end_col - col + 1 if end_line == line and span.end > span.start else 1
    return TrapSite(kind, detail, src.path, line, col, max(1, min(width, max(1, len(text) - col + 1))), text)


class TrapTable:
    """A program's trap sites by number; a number two sites share is no site (never a guess)."""

    def __init__(self, sites: Mapping[int, TrapSite] | None = None, ambiguous: Iterable[int] = ()) -> None:
        self._sites: dict[int, TrapSite] = dict(sites or {})
        self._ambiguous: set[int] = set(ambiguous)

    def add(self, number: int, site: TrapSite) -> None:
        old = self._sites.get(number)
        if number in self._ambiguous or (old is not None and old != site):
            self._sites.pop(number, None)
            self._ambiguous.add(number)
            return
        self._sites[number] = site

    def get(self, number: Optional[int]) -> Optional[TrapSite]:
        return None if number is None else self._sites.get(number)

    def __len__(self) -> int:
        return len(self._sites)

    def sites(self) -> dict[int, TrapSite]:
        return dict(self._sites)

    def renamed(self, paths: Mapping[str, str]) -> "TrapTable":
        """The same sites with their files renamed (``paths``: old name -> new name)."""
        moves = {old: new for old, new in paths.items() if old != new}
        if not moves:
            return self
        sites = {n: replace(s, path=moves.get(s.path, s.path)) for n, s in self._sites.items()}
        return TrapTable(sites, self._ambiguous)

    def to_json(self) -> str:
        return json.dumps({"sites": {str(n): s.to_json() for n, s in sorted(self._sites.items())},
                           "ambiguous": sorted(self._ambiguous)}, ensure_ascii=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "TrapTable":
        d = json.loads(text)
        return cls({int(n): TrapSite.from_json(s) for n, s in d["sites"].items()}, d.get("ambiguous", ()))


def number_bits(machine: str | None = None) -> int:
    """How many bits of a site number the trap instruction holds on this machine."""
    return 16 if _machine(machine) in ("aarch64", "arm64") else 32


def _machine(machine: str | None) -> str:
    return (machine or _host_machine()).lower()


@lru_cache(maxsize=1)
def _host_machine() -> str:
    return platform.machine()


def site_number(function: str, ordinal: int, machine: str | None = None) -> int:
    """The number of the ``ordinal``-th trap of the LLVM function ``function``."""
    digest = hashlib.sha256(f"{function}#{ordinal}".encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:4], "little") & ((1 << number_bits(machine)) - 1)


def trap_asm(number: int, machine: str | None = None) -> str:
    """The inline assembly of one site's trap: an undefined instruction holding ``number``."""
    m = _machine(machine)
    if m in ("x86_64", "amd64"):
        # The mnemonic, so a listing reads as an instruction; `{disp32}` keeps the 4-byte
        # displacement the reporter reads (X86_UD1, then the number) for small numbers too.
        signed = number - (1 << 32) if number >= 1 << 31 else number
        return f"{{disp32}} ud1l {signed}(%rax), %eax"
    if m in ("aarch64", "arm64"):
        return f"udf #{number & 0xFFFF}"
    raise NotImplementedError(f"traps are not measured on {m}; refusing to guess the instruction")


def absolute(rel: RelativeSite, decl: Span) -> TrapSite:
    """A recorded site placed in the function declared at ``decl``."""
    src: SourceFile = decl.source
    start = min(len(src.text), decl.start + rel.start)
    return site_at(rel.kind, rel.detail, Span(src, start, min(len(src.text), max(start, decl.start + rel.end))))


TRAILER = "\n; cancho trap sites: "


def with_trap_trailer(ir_text: str, table: TrapTable) -> str:
    """IR text with its trap table as a final LLVM comment line (how the CLI's build cache keeps
    both in one entry; LLVM ignores the comment)."""
    return f"{ir_text}{TRAILER}{table.to_json()}\n"


def split_trap_trailer(text: str) -> tuple[str, TrapTable]:
    """The IR text and the trap table of :func:`with_trap_trailer` (an empty table for IR kept
    without one, or a trailer that does not parse)."""
    at = text.rfind(TRAILER)
    if at < 0:
        return text, TrapTable()
    try:
        return text[:at], TrapTable.from_json(text[at + len(TRAILER):].strip())
    except (ValueError, KeyError, TypeError):
        return text[:at], TrapTable()
