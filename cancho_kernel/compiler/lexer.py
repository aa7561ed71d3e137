"""Tokeniser for cancho source text (language.md §1).

The lexer turns a `SourceFile` into a flat list of tokens ending in an `EOF` token. Whitespace
and `//` comments are dropped here so that no later pass can see formatting. The first lexical
error ends the file: it is raised as `LexError`, which carries the one `Diagnostic`.

Token kinds are plain strings: `IDENT`, `INT`, `FLOAT`, `STR`, `EOF`, a keyword's own text
(`fn`, `let`, ..., `_`), or an operator's own text (`->`, `(`, ...). Integer tokens keep their
exact value, however large; whether it fits `int` is the parser's question, because only the
parser knows whether a unary minus applies to it.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional, Union

from .diagnostics import Diagnostic, Rule
from .source import SourceFile, Span, not_utf8

BOM = "\ufeff"
_SURROGATE_RE = re.compile("[\ud800-\udfff]")

IDENT = "IDENT"
INT = "INT"
FLOAT = "FLOAT"
STR = "STR"
EOF = "EOF"

# The 26 reserved words of §1.3 (`_` included). `static`, `edition`, `alloc`, `alloc_slice` and
# the type names are deliberately absent: they are contextual and lex as identifiers.
KEYWORDS: frozenset[str] = frozenset(
    "fn let var if else while return defer true false struct enum match "
    "res val extern module import pub borrow region as in mut where _".split()
)
assert len(KEYWORDS) == 26

TWO_CHAR_OPS: frozenset[str] = frozenset(["->", "&&", "||", "==", "=>", "::", "..", "!=", "<=", ">=", "<<", ">>"])
ONE_CHAR_OPS: frozenset[str] = frozenset("(){}[],.;:=<>+-*/%!|^~&")

WHITESPACE = " \t\n\x0c\r"
# Whitespace and line comments, skipped in one regex step; and an identifier or keyword.
_SKIP_RE = re.compile(r"(?:[ \t\n\x0c\r]+|//[^\n]*)+")
_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DIGITS = "0123456789"
_HEX = "0123456789abcdefABCDEF"

STRING_ESCAPES = {"n": 0x0A, "r": 0x0D, "t": 0x09, "\\": 0x5C, '"': 0x22, "0": 0x00}
CHAR_ESCAPES = {"n": 0x0A, "r": 0x0D, "t": 0x09, "\\": 0x5C, "'": 0x27, "0": 0x00}


@dataclass
class Token:
    """One token: its kind, its source text, its value (int, float bits, bytes) and its span.

    `value` is the exact integer for `INT` (character literals included), `(bits, is_f32)` for
    `FLOAT`, the resolved bytes for `STR`, and None otherwise.
    """

    kind: str
    text: str
    value: Union[int, bytes, tuple[int, bool], None]
    span: Span

    def describe(self) -> str:
        """How the token is named in a diagnostic ("found ...")."""
        return describe_token(self.kind, self.text)


def describe_kind(kind: str) -> str:
    """How a token kind is named when it is what the parser expected."""
    return {
        IDENT: "an identifier",
        INT: "an integer literal",
        FLOAT: "a floating-point literal",
        STR: "a string literal",
        EOF: "end of file",
    }.get(kind, f"`{kind}`")


def describe_token(kind: str, text: str) -> str:
    """How a token that was found is named: its kind, plus its spelling in backticks."""
    if kind == EOF:
        return "end of file"
    if kind in (IDENT, INT, FLOAT, STR):
        shown = text if len(text) <= 40 else text[:37] + "..."
        return f"{describe_kind(kind)} `{shown}`"
    return f"`{kind}`"


class LexError(Exception):
    """The first lexical error of a file."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


def _is_ident_start(ch: str) -> bool:
    return ch == "_" or ("a" <= ch <= "z") or ("A" <= ch <= "Z")


def _is_ident_continue(ch: str) -> bool:
    return _is_ident_start(ch) or ("0" <= ch <= "9")


def f32_bits_of(value: Fraction) -> Optional[int]:
    """The binary32 bit pattern nearest a non-negative rational (ties to even); None if it overflows.

    Done exactly from the decimal value, because rounding to binary64 first and then to binary32
    can round twice and land on the wrong neighbour.
    """
    if value == 0:
        return 0
    num, den = value.numerator, value.denominator
    # Find e with 2**23 <= value / 2**e < 2**24.
    e = num.bit_length() - den.bit_length() - 23
    while True:
        scaled = Fraction(num, den) / (Fraction(2) ** e)
        if scaled < 2**23:
            e -= 1
        elif scaled >= 2**24:
            e += 1
        else:
            break
    if e < -149:  # subnormal range: the quantum is fixed at 2**-149
        e = -149
    scaled = Fraction(num, den) / (Fraction(2) ** e)
    mant = math.floor(scaled)
    rem = scaled - mant
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and mant % 2 == 1):
        mant += 1
    if mant == 2**24:
        mant //= 2
        e += 1
    if mant < 2**23:  # subnormal (or rounded to zero)
        return mant
    biased = e + 23 + 127
    if biased >= 255:
        return None
    return (biased << 23) | (mant - 2**23)


def float_literal_bits(digits: str, is_f32: bool) -> Optional[int]:
    """The IEEE bit pattern of a (sign-less, underscore-free) float literal; None when not finite."""
    approx = float(digits)
    if math.isinf(approx):
        return None
    if not is_f32:
        return struct.unpack("<Q", struct.pack("<d", approx))[0]
    if approx == 0.0:
        return 0
    if approx > 3.5e38:
        return None
    return f32_bits_of(exact_decimal(digits))


def big_int(digits: str, base: int = 10) -> int:
    """`int(digits, base)` without Python's 4300-digit limit on decimal conversion."""
    if base != 10 or len(digits) <= 4000:
        return int(digits, base)
    value = 0
    for k in range(0, len(digits), 4000):
        chunk = digits[k : k + 4000]
        value = value * 10 ** len(chunk) + int(chunk)
    return value


def exact_decimal(digits: str) -> Fraction:
    """The exact rational value of an underscore-free float literal such as `12.5e-3`."""
    mantissa, _, exponent = digits.lower().partition("e")
    whole, _, frac = mantissa.partition(".")
    value = Fraction(big_int(whole + frac), 10 ** len(frac))
    exp = big_int(exponent) if exponent and exponent not in "+-" else 0
    return value * Fraction(10) ** exp


class _Lexer:
    """One pass over a file's characters."""

    def __init__(self, source: SourceFile):
        self.source = source
        self.text = source.text
        self.n = len(self.text)
        self.tokens: list[Token] = []

    def span(self, start: int, end: int) -> Span:
        return Span(self.source, start, end)

    def fail(self, rule: Rule, message: str, start: int, end: int) -> LexError:
        return LexError(Diagnostic(rule, message, self.span(start, max(end, start))))

    def push(self, kind: str, start: int, end: int, value=None) -> None:
        self.tokens.append(Token(kind, self.text[start:end], value, self.span(start, end)))

    def run(self) -> list[Token]:
        text, n = self.text, self.n
        skip = _SKIP_RE.match
        word_at = _WORD_RE.match
        i = 0
        while i < n:
            ch = text[i]
            if ch in WHITESPACE or (ch == "/" and text.startswith("//", i)):
                i = skip(text, i).end()
            elif ch == '"':
                i = self.string(i)
            elif ch == "'":
                i = self.char(i)
            elif "0" <= ch <= "9":
                i = self.number(i)
            elif _is_ident_start(ch):
                j = word_at(text, i).end()
                word = text[i:j]
                self.push(word if word in KEYWORDS else IDENT, i, j)
                i = j
            elif text[i : i + 2] in TWO_CHAR_OPS:
                self.push(text[i : i + 2], i, i + 2)
                i += 2
            elif ch in ONE_CHAR_OPS:
                self.push(ch, i, i + 1)
                i += 1
            elif ch == BOM and i == 0:
                raise self.fail(Rule.UNEXPECTED_CHARACTER, "the file starts with a byte order mark (U+FEFF), which "
                                "is not part of the language; save the file as UTF-8 without one", i, i + 1)
            elif _SURROGATE_RE.match(ch):
                raise self.fail(Rule.UNEXPECTED_CHARACTER, describe_bad_char(ch), i, i + 1)
            else:
                raise self.fail(Rule.UNEXPECTED_CHARACTER, f"unexpected character `{_show_char(ch)}`", i, i + 1)
        # An undecodable byte the loop skipped over (inside a comment): a file is UTF-8 text.
        bad = _SURROGATE_RE.search(text)
        if bad is not None:
            at = bad.start()
            raise self.fail(Rule.UNEXPECTED_CHARACTER, f"{describe_bad_char(text[at])}; a source file is UTF-8 text",
                            at, at + 1)
        self.push(EOF, n, n)
        return self.tokens

    def utf8(self, start: int, end: int) -> bytes:
        """The UTF-8 bytes of text[start:end] inside a string literal; a byte of the file that
        is not UTF-8 (or a lone surrogate) is refused where it stands, never replaced."""
        run = self.text[start:end]
        bad = _SURROGATE_RE.search(run)
        if bad is not None:
            at = start + bad.start()
            raise self.fail(Rule.LITERAL_FORM, f"{describe_bad_char(run[bad.start()])}; a string literal holds UTF-8 "
                            "text (put other bytes in a slice with `byte_of`)", at, at + 1)
        return run.encode("utf-8")

    def string(self, start: int) -> int:
        """A double-quoted literal: six escapes, no raw newline, bytes as the value."""
        text, n = self.text, self.n
        out = bytearray()
        i = start + 1
        run_start = i
        while True:
            if i >= n:
                raise self.fail(Rule.LITERAL_FORM, "unterminated string literal", start, n)
            ch = text[i]
            if ch == '"':
                out += self.utf8(run_start, i)
                i += 1
                self.push(STR, start, i, bytes(out))
                return i
            if ch == "\n":
                raise self.fail(Rule.LITERAL_FORM, "a string literal may not span lines", start, i)
            if ch == "\\":
                out += self.utf8(run_start, i)
                if i + 1 >= n:
                    raise self.fail(Rule.LITERAL_FORM, "unterminated string literal", start, n)
                esc = text[i + 1]
                if esc not in STRING_ESCAPES:
                    raise self.fail(
                        Rule.UNKNOWN_ESCAPE,
                        f"`\\{_show_char(esc)}` is not an escape; a string literal takes "
                        "`\\n`, `\\r`, `\\t`, `\\\\`, `\\\"` and `\\0`",
                        i,
                        i + 2,
                    )
                out.append(STRING_ESCAPES[esc])
                i += 2
                run_start = i
                continue
            i += 1

    def char(self, start: int) -> int:
        """A character literal: one ASCII character or escape, lexed as an `INT` token."""
        text, n = self.text, self.n
        j = start + 1
        if j >= n:
            raise self.fail(Rule.LITERAL_FORM, "unterminated character literal", start, n)
        ch = text[j]
        if ch == "'":
            raise self.fail(
                Rule.LITERAL_FORM, "a character literal holds exactly one character; `''` holds none", start, j + 1
            )
        if ch == "\n":
            raise self.fail(Rule.LITERAL_FORM, "a character literal may not span lines", start, j)
        if ch == "\\":
            if j + 1 >= n:
                raise self.fail(Rule.LITERAL_FORM, "unterminated character literal", start, n)
            esc = text[j + 1]
            if esc not in CHAR_ESCAPES:
                raise self.fail(
                    Rule.UNKNOWN_ESCAPE,
                    f"`\\{_show_char(esc)}` is not an escape; a character literal takes "
                    "`\\n`, `\\r`, `\\t`, `\\\\`, `\\'` and `\\0`",
                    j,
                    j + 2,
                )
            value = CHAR_ESCAPES[esc]
            j += 2
        elif ord(ch) < 128:
            value = ord(ch)
            j += 1
        else:
            raise self.fail(
                Rule.LITERAL_FORM,
                f"`{_show_char(ch)}` is not ASCII, and a character literal is one byte; "
                "write the code point, or the bytes of its encoding",
                start,
                j + 1,
            )
        if j < n and text[j] == "'":
            self.push(INT, start, j + 1, value)
            return j + 1
        scan = j
        while scan < n and text[scan] not in "\n'":
            scan += 1
        if scan < n and text[scan] == "'":
            raise self.fail(
                Rule.LITERAL_FORM,
                "a character literal holds exactly one character; a longer run of text is a string, "
                'written with `"`',
                start,
                scan + 1,
            )
        raise self.fail(Rule.LITERAL_FORM, "unterminated character literal", start, scan)

    def number(self, start: int) -> int:
        """A decimal or hex integer, or a float (never right after a `.` token: `t.0.1`)."""
        text, n = self.text, self.n
        i = start
        hexa = text[i] == "0" and i + 1 < n and text[i + 1] == "x"
        if hexa:
            i += 2
            if i >= n or text[i] not in _HEX:
                raise self.fail(Rule.LITERAL_FORM, "`0x` needs at least one hexadecimal digit", start, i)
            while i < n and (text[i] in _HEX or text[i] == "_"):
                i += 1
        else:
            while i < n and (text[i] in _DIGITS or text[i] == "_"):
                i += 1
        after_dot = bool(self.tokens) and self.tokens[-1].kind == "."
        is_float = False
        is_f32 = False
        if not hexa and not after_dot:
            if i + 1 < n and text[i] == "." and text[i + 1] in _DIGITS:
                is_float = True
                i += 1
                while i < n and (text[i] in _DIGITS or text[i] == "_"):
                    i += 1
            if i < n and text[i] in "eE":
                k = i + 1
                if k < n and text[k] in "+-":
                    k += 1
                if k < n and text[k] in _DIGITS:
                    is_float = True
                    i = k
                    while i < n and (text[i] in _DIGITS or text[i] == "_"):
                        i += 1
            if is_float and text.startswith("f32", i) and not (i + 3 < n and _is_ident_continue(text[i + 3])):
                is_f32 = True
                i += 3
        if i < n and _is_ident_continue(text[i]):
            message = (
                "unexpected character in a floating-point literal; the only suffix is `f32`"
                if is_float
                else "unexpected character in an integer literal"
            )
            raise self.fail(Rule.UNEXPECTED_CHARACTER, message, i, i + 1)
        spelled = text[start:i]
        if is_float:
            digits = (spelled[:-3] if is_f32 else spelled).replace("_", "")
            bits = float_literal_bits(digits, is_f32)
            if bits is None:
                kind = "`f32` (IEEE-754 binary32)" if is_f32 else "`float` (IEEE-754 binary64)"
                raise self.fail(Rule.LITERAL_OUT_OF_RANGE, f"floating-point literal does not fit in {kind}", start, i)
            self.push(FLOAT, start, i, (bits, is_f32))
        else:
            clean = spelled.replace("_", "")
            value = big_int(clean[2:], 16) if hexa else big_int(clean)
            self.push(INT, start, i, value)
        return i


def describe_bad_char(ch: str) -> str:
    """How a character that is not text is named: the file's byte, or the lone surrogate."""
    byte = not_utf8(ch)
    if byte is not None:
        return f"byte 0x{byte:02x} is not UTF-8"
    return f"U+{ord(ch):04X} is a lone surrogate, not a character"


def _show_char(ch: str) -> str:
    """A character as it may be shown inside backticks (control characters escaped)."""
    if ch.isprintable() and ch != "`":
        return ch
    return ch.encode("unicode_escape").decode("ascii") if ch != "`" else "`"


def tokenize(source: SourceFile) -> list[Token]:
    """All tokens of a file, ending with `EOF`; raises `LexError` at the first lexical error."""
    return _Lexer(source).run()
