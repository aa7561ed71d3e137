"""Lexer tests: every token form and every lexical refusal of language.md §1."""

from __future__ import annotations

import struct

import pytest

from cancho_kernel.compiler.lexer import (
    EOF,
    FLOAT,
    IDENT,
    INT,
    KEYWORDS,
    STR,
    LexError,
    Token,
    tokenize,
)
from cancho_kernel.compiler.source import SourceFile


def lex(text: str) -> list[Token]:
    return tokenize(SourceFile("t.cho", text))


def kinds(text: str) -> list[str]:
    return [t.kind for t in lex(text)][:-1]


def only(text: str) -> Token:
    toks = lex(text)
    assert len(toks) == 2, toks
    assert toks[1].kind == EOF
    return toks[0]


def refuse(text: str):
    with pytest.raises(LexError) as info:
        lex(text)
    return info.value.diagnostic


def f64_bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


# ---------------------------------------------------------------- whitespace and comments


def test_empty_file_is_just_eof():
    toks = lex("")
    assert [t.kind for t in toks] == [EOF]
    assert (toks[0].span.start, toks[0].span.end) == (0, 0)


@pytest.mark.parametrize("ws", [" ", "\t", "\n", "\x0c", "\r", " \r\n\t\x0c "])
def test_whitespace_is_skipped(ws):
    assert kinds(f"a{ws}b") == [IDENT, IDENT]


def test_vertical_tab_is_not_whitespace():
    d = refuse("a\x0bb")
    assert d.rule == "unexpected-character"
    assert (d.span.line, d.span.column) == (1, 2)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("1 // two\n2", [INT, INT]),
        ("// only a comment", []),
        ("//~ STDOUT Hello, world!\nfn", ["fn"]),
        ("/// doc comment is a comment\nx", [IDENT]),
        ("a // é π 😀 non-ASCII in a comment is fine\nb", [IDENT, IDENT]),
        ("/* not a block */", ["/", "*", IDENT, IDENT, IDENT, "*", "/"]),
        ("a / b", [IDENT, "/", IDENT]),
    ],
)
def test_comments(text, expected):
    assert kinds(text) == expected


# ---------------------------------------------------------------- identifiers and keywords


@pytest.mark.parametrize("word", sorted(KEYWORDS))
def test_every_keyword_is_its_own_token(word):
    assert only(word).kind == word


def test_there_are_26_keywords():
    assert len(KEYWORDS) == 26


@pytest.mark.parametrize(
    "word",
    ["static", "edition", "alloc", "alloc_slice", "int", "bool", "byte", "float", "f32", "c_int", "c_ptr",
     "World", "Io", "for", "loop", "break", "self", "_x", "__", "x_1", "fnord", "Fn", "letx", "A9"],
)
def test_contextual_and_ordinary_words_are_identifiers(word):
    t = only(word)
    assert (t.kind, t.text) == (IDENT, word)


def test_underscore_alone_is_the_underscore_token():
    assert only("_").kind == "_"
    assert only("__").kind == IDENT


# ---------------------------------------------------------------- integer literals


@pytest.mark.parametrize(
    "text,value",
    [
        ("0", 0), ("7", 7), ("007", 7), ("0_0_7", 7), ("1_000", 1000), ("1__0", 10),
        ("0x0", 0), ("0xff", 255), ("0xFF", 255), ("0xffff_ffff", 0xFFFFFFFF), ("0x1e3", 0x1E3),
        ("0x1f32", 0x1F32), ("9223372036854775807", 2**63 - 1),
        ("9223372036854775808", 2**63), ("99999999999999999999999999", 99999999999999999999999999),
        ("0xffffffffffffffffffff", 0xFFFFFFFFFFFFFFFFFFFF),
    ],
)
def test_integer_literal_values(text, value):
    t = only(text)
    assert (t.kind, t.value, t.text) == (INT, value, text)


def test_a_very_long_integer_keeps_its_exact_value():
    text = "1" * 5000
    assert only(text).value == (10**5000 - 1) // 9


@pytest.mark.parametrize("text", ["0x", "0x_1", "0xg", "0x;"])
def test_hex_needs_a_digit(text):
    d = refuse(text)
    assert d.rule == "literal-form"
    assert d.message == "`0x` needs at least one hexadecimal digit"
    assert d.span.start == 0


@pytest.mark.parametrize(
    "text,col",
    [("0b101", 2), ("0o7", 2), ("1x", 2), ("0X1F", 2), ("2f32", 2), ("12abc", 3), ("0xfg", 4), ("1_a", 3)],
)
def test_an_integer_may_not_run_into_a_name(text, col):
    d = refuse(text)
    assert d.rule == "unexpected-character"
    assert d.message == "unexpected character in an integer literal"
    assert d.span.column == col


def test_integer_then_dot_without_digit_is_not_a_float():
    assert kinds("1.") == [INT, "."]
    assert kinds("1..2") == [INT, "..", INT]
    assert kinds("1.x") == [INT, ".", IDENT]


# ---------------------------------------------------------------- float literals


@pytest.mark.parametrize(
    "text,value",
    [
        ("1.0", 1.0), ("0.5", 0.5), ("2.5e-3", 2.5e-3), ("1e9", 1e9), ("1E9", 1e9), ("1e+2", 100.0),
        ("1_0.2_5", 10.25), ("3.141592653589793", 3.141592653589793), ("0.0", 0.0), ("1e-400", 0.0),
        ("1.7976931348623157e308", 1.7976931348623157e308),
    ],
)
def test_float_literal_bits(text, value):
    t = only(text)
    assert t.kind == FLOAT
    assert t.value == (f64_bits(value), False)


@pytest.mark.parametrize("text,value", [("0.5f32", 0.5), ("1e3f32", 1000.0), ("1.5e-3f32", 1.5e-3),
                                        ("1_0.2_5f32", 10.25), ("3.4e38f32", 3.4e38), ("1e-50f32", 0.0),
                                        ("1.4e-45f32", 1.4e-45)])
def test_f32_literal_bits(text, value):
    t = only(text)
    assert (t.kind, t.text) == (FLOAT, text)
    assert t.value == (f32_bits(value), True)


def test_f32_rounds_once_from_the_decimal_value():
    # Just below the midpoint of 1+2**-23 and 1+2**-22: rounding through binary64 would land on
    # the midpoint and then tie to even (0x3f800002); the correct answer is 0x3f800001.
    assert only("1.00000017881393432617187499f32").value == (0x3F800001, True)


def test_floats_keep_their_sign_separately():
    # `-0.0` is `-` then the literal `0.0`: the literal's own bits are +0.
    assert kinds("-0.0") == ["-", FLOAT]
    assert only("0.0").value == (0, False)


@pytest.mark.parametrize("text", ["1e309", "1.0e400", "2e308", "3.5e38f32", "1e39f32"])
def test_float_overflow_is_out_of_range(text):
    d = refuse(text)
    assert d.rule == "literal-out-of-range"
    assert d.span.start == 0


@pytest.mark.parametrize(
    "text,col",
    [("1.5f64", 4), ("1.5f32x", 4), ("1.5f3", 4), ("1e3x", 4), ("1.0a", 4)],
)
def test_a_float_may_not_run_into_a_name(text, col):
    d = refuse(text)
    assert d.rule == "unexpected-character"
    assert "floating-point literal" in d.message
    assert d.span.column == col


def test_float_with_a_separate_f32_word():
    assert kinds("1.5 f32") == [FLOAT, IDENT]


def test_exponent_needs_digits():
    assert refuse("1e").rule == "unexpected-character"
    assert refuse("1e+").rule == "unexpected-character"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("t.0.1", [IDENT, ".", INT, ".", INT]),
        ("t.0", [IDENT, ".", INT]),
        ("a.1.0", [IDENT, ".", INT, ".", INT]),
        ("x.0 1.5", [IDENT, ".", INT, FLOAT]),
    ],
)
def test_a_number_after_a_dot_is_never_a_float(text, expected):
    assert kinds(text) == expected


def test_hex_never_becomes_a_float():
    assert kinds("0x1.5") == [INT, ".", INT]


# ---------------------------------------------------------------- strings


@pytest.mark.parametrize(
    "text,value",
    [
        ('""', b""),
        ('"libc"', b"libc"),
        ('"Hello, world!\\n"', b"Hello, world!\n"),
        ('"\\n\\r\\t\\\\\\"\\0"', b"\n\r\t\\\"\x00"),
        ('"caf\u00e9 \u65e5 \U0001F600"', "caf\u00e9 \u65e5 \U0001F600".encode()),
        ('"it\'s"', b"it's"),
        ('"// not a comment"', b"// not a comment"),
    ],
)
def test_string_values(text, value):
    t = only(text)
    assert (t.kind, t.value, t.text) == (STR, value, text)


@pytest.mark.parametrize("esc", ["q", "x", "u", "'", "a", "e", "1", "\u00e9"])
def test_unknown_string_escape(esc):
    d = refuse('x = "ab\\' + esc + 'cd";')
    assert d.rule == "unknown-escape"
    assert d.span.column == 8  # the backslash
    assert f"`\\{esc}` is not an escape" in d.message


@pytest.mark.parametrize(
    "text,message,col",
    [
        ('"abc', "unterminated string literal", 1),
        ('"abc\\', "unterminated string literal", 1),
        ('"abc\\"', "unterminated string literal", 1),
        ('x "ab\ncd"', "a string literal may not span lines", 3),
    ],
)
def test_malformed_strings(text, message, col):
    d = refuse(text)
    assert (d.rule, d.message, d.span.column) == ("literal-form", message, col)


# ---------------------------------------------------------------- character literals


@pytest.mark.parametrize(
    "text,value",
    [("'a'", 97), ("'0'", 48), ("' '", 32), ("'\"'", 34), ("'\\n'", 10), ("'\\r'", 13), ("'\\t'", 9),
     ("'\\\\'", 92), ("'\\''", 39), ("'\\0'", 0), ("'~'", 126), ("'/'", 47)],
)
def test_char_literals_are_ints(text, value):
    t = only(text)
    assert (t.kind, t.value) == (INT, value)


@pytest.mark.parametrize(
    "text,rule,fragment",
    [
        ("''", "literal-form", "holds none"),
        ("'ab'", "literal-form", "exactly one character"),
        ("'a", "literal-form", "unterminated"),
        ("'", "literal-form", "unterminated"),
        ("'\\", "literal-form", "unterminated"),
        ("'a\n'", "literal-form", "unterminated"),
        ("'\n'", "literal-form", "may not span lines"),
        ("'\u00e9'", "literal-form", "not ASCII"),
        ("'\\\"'", "unknown-escape", "is not an escape"),
        ("'\\q'", "unknown-escape", "is not an escape"),
    ],
)
def test_malformed_char_literals(text, rule, fragment):
    d = refuse(text)
    assert d.rule == rule
    assert fragment in d.message


def test_char_escape_span_points_at_the_backslash():
    d = refuse("x = '\\q';")
    assert (d.span.line, d.span.column) == (1, 6)


# ---------------------------------------------------------------- operators


TWO = ["->", "&&", "||", "==", "=>", "::", "..", "!=", "<=", ">=", "<<", ">>"]
ONE = list("(){}[],.;:=<>+-*/%!|^~&")


@pytest.mark.parametrize("op", TWO + ONE)
def test_each_operator(op):
    assert kinds(op) == [op]


@pytest.mark.parametrize(
    "text,expected",
    [
        ("&!r", ["&", "!", IDENT]),
        ("&&&", ["&&", "&"]),
        ("a<<=b", [IDENT, "<<", "=", IDENT]),
        (">>>", [">>", ">"]),
        ("...", ["..", "."]),
        (":::", ["::", ":"]),
        ("-->", ["-", "->"]),
        ("=>=", ["=>", "="]),
        ("!==", ["!=", "="]),
        ("|||", ["||", "|"]),
        ("a+=1", [IDENT, "+", "=", INT]),
    ],
)
def test_maximal_munch(text, expected):
    assert kinds(text) == expected


@pytest.mark.parametrize("ch", ["@", "#", "$", "?", "`", "\\", "\u03c0", "\u00e9", "\U0001F600", "\x00", "\x0b"])
def test_unexpected_characters(ch):
    d = refuse(f"let x\n  = a {ch} b;")
    assert d.rule == "unexpected-character"
    assert (d.span.line, d.span.column) == (2, 7)
    assert d.span.end - d.span.start == 1


def test_non_ascii_character_is_named_whole():
    assert "\u03c0" in refuse("\u03c0").message


def test_unexpected_character_message():
    assert refuse("a @ b").message == "unexpected character `@`"


# ---------------------------------------------------------------- spans


def test_spans_point_back_into_the_source():
    src = "fn main(world: World)\n  -> [] int { return 0x1f; }"
    for t in lex(src):
        assert src[t.span.start : t.span.end] == t.text
    ret = [t for t in lex(src) if t.kind == "return"][0]
    assert (ret.span.line, ret.span.column) == (2, 15)


def test_lex_error_position_on_later_line():
    d = refuse("fn f() -> [] int {\n    return 0x;\n}")
    assert (d.span.line, d.span.column) == (2, 12)
