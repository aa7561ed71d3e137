"""`cancho fmt` (compiler/fmt.py, compiler/printer.py): the reference's formatting rules
(its docs/formatting.md), held over the repository's own programs.

The corpus test is the contract: every std module, example and accepted fixture formats, the
result parses to the same tree (spans aside: `ast` nodes compare without them) and formatting it
again changes nothing. The others pin one rule each against a hand-written case.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cancho_kernel.compiler.fmt import Failure, FormatError, _format, format_text, scan
from cancho_kernel.compiler.parser import parse_file
from cancho_kernel.compiler.source import SourceFile

REPO = Path(__file__).resolve().parents[1]
CORPUS = sorted([*(REPO / "cancho_kernel" / "std").glob("*.cho"), *(REPO / "examples").rglob("*.cho"),
                 *(REPO / "tests" / "conformance" / "accept").glob("*.cho")])


def parsed(text: str):
    tree, diags = parse_file(SourceFile("<t>", text))
    assert tree is not None, diags
    return tree


def test_the_corpus_formats_to_the_same_tree_and_is_a_fixed_point():
    assert len(CORPUS) > 150
    for path in CORPUS:
        text = path.read_text(encoding="utf-8")
        out = format_text(text, str(path))
        assert parsed(out) == parsed(text), path
        assert _format(out, str(path), verify=False) == out, path
        assert [c.text for c in scan(SourceFile("<o>", out)).comments] == \
            [c.text for c in scan(SourceFile("<s>", text)).comments], path


def test_one_statement_per_line_and_the_canonical_layout():
    src = "fn f(a:int)->[] int{ if a>0 {return 1;} else { return (a+1)*2; } }\n"
    assert format_text(src) == (
        "fn f(a: int) -> [] int {\n"
        "    if a > 0 {\n"
        "        return 1;\n"
        "    } else {\n"
        "        return (a + 1) * 2;\n"
        "    }\n"
        "}\n")


def test_redundant_parentheses_go_and_needed_ones_stay():
    src = "fn f(a: int, b: int) -> [] int {\n    return ((a)) + ((b << 1) & 3) - (a - b);\n}\n"
    assert "return a + (b << 1 & 3) - (a - b);" in format_text(src)


def test_literal_spellings_are_the_sources():
    src = "fn f() -> [] int {\n    let c = 'a';\n    let h = 0x10;\n    let m = 1_000;\n    let x = 1.50;\n    return c;\n}\n"
    out = format_text(src)
    for spelling in ("'a'", "0x10", "1_000", "1.50"):
        assert spelling in out


def test_comments_stay_trailing_or_above_and_blank_lines_collapse():
    src = ("// head\n\n\n\nfn f() -> [] int { // opens\n\n    let a = 1;   // one\n    // before b\n"
           "    let b = foo(a, // inside\n        2);\n\n\n    return b;\n\n}\n")
    out = format_text(src)
    assert out == ("// head\n\nfn f() -> [] int { // opens\n    let a = 1; // one\n    // before b\n"
                   "    // inside\n    let b = foo(a, 2);\n\n    return b;\n}\n")


def test_struct_literal_in_a_head_and_a_field_callee_keep_their_parentheses():
    src = ("struct P { x: int }\nfn f(p: P) -> [] int {\n    if (P { x: 1 }).x == p.x { return (p.g)(1); }\n"
           "    return 0;\n}\n")
    out = format_text(src)
    assert "if (P { x: 1 }).x == p.x {" in out and "return (p.g)(1);" in out
    assert "struct P {\n    x: int,\n}" in out


def test_an_import_written_after_a_declaration_is_refused_with_the_line_to_move():
    src = "fn f() -> [] int {\n    return 1;\n}\n\nimport std.io;\n"
    with pytest.raises(FormatError) as info:
        format_text(src)
    assert info.value.failure is Failure.CANNOT
    assert info.value.why.startswith("line 5: an `import` after the first declaration")


def test_crlf_and_trailing_whitespace_go():
    src = "fn f() -> [] int {   \r\n    return 1; // x   \r\n}\r\n"
    assert format_text(src) == "fn f() -> [] int {\n    return 1; // x\n}\n"


def test_a_file_that_does_not_parse_is_a_located_parse_failure():
    with pytest.raises(FormatError) as info:
        format_text("fn f( -> [] int {}\n", "bad.cho")
    assert info.value.failure is Failure.PARSE
    assert info.value.diagnostic is not None and info.value.diagnostic.span.line == 1


def test_a_long_else_if_chain_and_a_deep_expression_format():
    chain = "".join(f" else if a == {k} {{\n        return {k};\n    }}" for k in range(1, 3000))
    src = f"fn f(a: int) -> [] int {{\n    if a == 0 {{\n        return 0;\n    }}{chain}\n    return a;\n}}\n"
    assert format_text(src) == src
    deep = "fn g(a: int) -> [] int {\n    return " + "(" * 2000 + "a" + " + 1)" * 2000 + ";\n}\n"
    assert "return a + 1 + 1" in format_text(deep)


def test_every_line_of_a_real_file_deleted_in_turn_never_crashes():
    lines = (REPO / "cancho_kernel" / "std" / "option.cho").read_text().splitlines(keepends=True)
    for k in range(len(lines)):
        damaged = "".join(lines[:k] + lines[k + 1:])
        try:
            out = format_text(damaged)
        except FormatError as e:
            assert e.failure is Failure.PARSE or e.why
            continue
        assert parsed(out) == parsed(damaged)


def test_a_comment_before_a_closing_brace_stays_inside_the_block():
    src = "fn f() -> [] int {\n    if true {\n        return 1;\n    // after\n    }\n// last\n}\n"
    assert format_text(src) == ("fn f() -> [] int {\n    if true {\n        return 1;\n        // after\n    }\n"
                                "    // last\n}\n")


def test_the_rejected_fixtures_never_crash_the_formatter():
    for path in sorted((REPO / "tests" / "conformance" / "reject").glob("*.cho")):
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        try:
            out = format_text(text, str(path))
        except FormatError as e:
            assert e.failure is Failure.PARSE and e.diagnostic is not None and e.diagnostic.rule, path
            continue
        assert parsed(out) == parsed(text), path
