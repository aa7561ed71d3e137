"""Parser tests: every production of language.md §2–§4, precedence, spans, refusals, examples."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cancho_kernel.compiler import ast
from cancho_kernel.compiler.lexer import LexError
from cancho_kernel.compiler.parser import (
    ParseError,
    parse_expression_text,
    parse_file,
    parse_stmt_text,
    parse_type_text,
)
from cancho_kernel.compiler.source import SourceFile

I = lambda name: ast.Ident(name, span=None)  # noqa: E731  (spans are excluded from equality)
N = lambda name: ast.Name(name, span=None)  # noqa: E731
L = lambda value: ast.IntLit(value, span=None)  # noqa: E731


def B(op, left, right):
    return ast.Binary(op, left, right, span=None)


def U(op, operand):
    return ast.Unary(op, operand, span=None)


def T(name, *args, q=None):
    return ast.NamedType(I(q) if q else None, I(name), list(args), span=None)


def call(name, *args):
    return ast.Call(N(name), list(args), span=None)


def e(text: str) -> ast.Expr:
    return parse_expression_text(text)


def ty(text: str) -> ast.TypeExpr:
    return parse_type_text(text)


def s(text: str) -> ast.Stmt:
    return parse_stmt_text(text)


def parse(text: str) -> ast.File:
    f, diags = parse_file(SourceFile("t.cho", text))
    assert diags == [], [d.render() for d in diags]
    assert f is not None
    return f


def refuse(text: str):
    f, diags = parse_file(SourceFile("t.cho", text))
    assert f is None
    assert len(diags) == 1
    return diags[0]


M = "fn main(world: World) -> [] int { release(world); return 0; }"
P1 = "let Split { io, ffi, fs, heap, args } = split(world);"


def in_fn(body: str) -> str:
    return "fn f() -> [] int {\n" + body + "\n}\n"


def body_of(text: str) -> list[ast.Stmt]:
    return parse(in_fn(text)).items[0].body.stmts


# ================================================================ expressions


@pytest.mark.parametrize(
    "text,expected",
    [
        ("flags & mask == 0", B("==", B("&", N("flags"), N("mask")), L(0))),
        ("bits >> 16 & 0xff", B("&", B(">>", N("bits"), L(16)), L(255))),
        ("bits << 8 | c", B("|", B("<<", N("bits"), L(8)), N("c"))),
        ("a | b ^ c & d", B("|", N("a"), B("^", N("b"), B("&", N("c"), N("d"))))),
        ("a || b && c", B("||", N("a"), B("&&", N("b"), N("c")))),
        ("a && b || c", B("||", B("&&", N("a"), N("b")), N("c"))),
        ("a == b && c != d", B("&&", B("==", N("a"), N("b")), B("!=", N("c"), N("d")))),
        ("a < b == c > d", B("==", B("<", N("a"), N("b")), B(">", N("c"), N("d")))),
        ("a <= b | c", B("<=", N("a"), B("|", N("b"), N("c")))),
        ("a >= b", B(">=", N("a"), N("b"))),
        ("1 + 2 * 3", B("+", L(1), B("*", L(2), L(3)))),
        ("1 * 2 + 3", B("+", B("*", L(1), L(2)), L(3))),
        ("a - b - c", B("-", B("-", N("a"), N("b")), N("c"))),
        ("a / b / c", B("/", B("/", N("a"), N("b")), N("c"))),
        ("a % b * c", B("*", B("%", N("a"), N("b")), N("c"))),
        ("a << b << c", B("<<", B("<<", N("a"), N("b")), N("c"))),
        ("1 + 2 << 3", B("<<", B("+", L(1), L(2)), L(3))),
        ("a < b < c", B("<", B("<", N("a"), N("b")), N("c"))),
        ("'0' + n % 10", B("+", L(48), B("%", N("n"), L(10)))),
        ("(a + b) * c", B("*", B("+", N("a"), N("b")), N("c"))),
        ("((a))", N("a")),
    ],
)
def test_precedence_and_associativity(text, expected):
    assert e(text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("-x", U("-", N("x"))),
        ("!b", U("!", N("b"))),
        ("~m", U("~", N("m"))),
        ("*r", U("*", N("r"))),
        ("- -x", U("-", U("-", N("x")))),
        ("!!b", U("!", U("!", N("b")))),
        ("-a * b", B("*", U("-", N("a")), N("b"))),
        ("*p.x", U("*", ast.FieldAccess(N("p"), I("x"), span=None))),
        ("-a[0]", U("-", ast.Index(N("a"), L(0), span=None))),
        ("*f(x)", U("*", call("f", N("x")))),
        ("a - -1", B("-", N("a"), U("-", L(1)))),
        ("-5", U("-", L(5))),
        ("x * *r", B("*", N("x"), U("*", N("r")))),
    ],
)
def test_prefix_operators(text, expected):
    assert e(text) == expected


def test_most_negative_int_folds_into_the_literal():
    assert e("-9223372036854775808") == L(-(2**63))
    node = e("-9223372036854775808")
    assert (node.span.start, node.span.end) == (0, 20)
    assert e("0 + -9223372036854775808") == B("+", L(0), L(-(2**63)))
    assert e("--9223372036854775808") == U("-", L(-(2**63)))


@pytest.mark.parametrize(
    "text",
    ["9223372036854775808", "0 - 9223372036854775808", "-9223372036854775809", "-(9223372036854775808)",
     "99999999999999999999999", "0x8000000000000000", "-9223372036854775808[0]", "f(18446744073709551616)"],
)
def test_integer_literal_out_of_range(text):
    with pytest.raises(ParseError) as info:
        e(text)
    assert info.value.diagnostic.rule == "literal-out-of-range"


def test_largest_int_literal_is_fine():
    assert e("9223372036854775807") == L(2**63 - 1)
    assert e("0x7fffffffffffffff") == L(2**63 - 1)


def test_out_of_range_position():
    d = refuse(in_fn("    return 1 + 9223372036854775808;"))
    assert (d.rule, d.span.line, d.span.column) == ("literal-out-of-range", 2, 16)
    assert d.message == "integer literal does not fit in `int` (64-bit signed)"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("42", L(42)),
        ("0x1f", L(31)),
        ("'a'", L(97)),
        ("true", ast.BoolLit(True, span=None)),
        ("false", ast.BoolLit(False, span=None)),
        ('"hi\\n"', ast.StrLit(b"hi\n", span=None)),
        ("1.5", ast.FloatLit(struct.unpack("<Q", struct.pack("<d", 1.5))[0], False, span=None)),
        ("1.5f32", ast.FloatLit(struct.unpack("<I", struct.pack("<f", 1.5))[0], True, span=None)),
        ("x", N("x")),
        ("static", N("static")),
        ("alloc", N("alloc")),
    ],
)
def test_primaries(text, expected):
    assert e(text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("f()", call("f")),
        ("f(1, 2)", call("f", L(1), L(2))),
        ("f(1, 2,)", call("f", L(1), L(2))),
        ("f(x)(y)", ast.Call(call("f", N("x")), [N("y")], span=None)),
        ("a.b(1)", ast.Call(ast.QualifiedName(I("a"), I("b"), span=None), [L(1)], span=None)),
        ("io.write_all(io, s)", ast.Call(ast.QualifiedName(I("io"), I("write_all"), span=None),
                                         [N("io"), N("s")], span=None)),
        ("a.b", ast.FieldAccess(N("a"), I("b"), span=None)),
        ("a.b.c", ast.FieldAccess(ast.FieldAccess(N("a"), I("b"), span=None), I("c"), span=None)),
        ("t.0", ast.TupleIndex(N("t"), 0, span=None)),
        ("t.0.1", ast.TupleIndex(ast.TupleIndex(N("t"), 0, span=None), 1, span=None)),
        ("p.x.0", ast.TupleIndex(ast.FieldAccess(N("p"), I("x"), span=None), 0, span=None)),
        ("s[n]", ast.Index(N("s"), N("n"), span=None)),
        ("s[i][j]", ast.Index(ast.Index(N("s"), N("i"), span=None), N("j"), span=None)),
        ("buf[0..m]", ast.SliceExpr(N("buf"), L(0), N("m"), span=None)),
        ("text[a + 1..b]", ast.SliceExpr(N("text"), B("+", N("a"), L(1)), N("b"), span=None)),
        ("f(x).y", ast.FieldAccess(call("f", N("x")), I("y"), span=None)),
        ("(a, b).0", ast.TupleIndex(ast.TupleExpr([N("a"), N("b")], span=None), 0, span=None)),
        ("a.b.c(x)", ast.Call(ast.FieldAccess(ast.FieldAccess(N("a"), I("b"), span=None), I("c"), span=None),
                              [N("x")], span=None)),
    ],
)
def test_postfix_forms(text, expected):
    assert e(text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("E::V", ast.VariantExpr(None, I("E"), I("V"), None, span=None)),
        ("E::V()", ast.VariantExpr(None, I("E"), I("V"), [], span=None)),
        ("Result::Ok(7)", ast.VariantExpr(None, I("Result"), I("Ok"), [L(7)], span=None)),
        ("option.Option::None", ast.VariantExpr(I("option"), I("Option"), I("None"), None, span=None)),
        ("q.E::V(1, 2)", ast.VariantExpr(I("q"), I("E"), I("V"), [L(1), L(2)], span=None)),
        ("P { x: 1, y: 2 }", ast.StructLit(None, I("P"), [ast.FieldInit(I("x"), L(1), span=None),
                                                          ast.FieldInit(I("y"), L(2), span=None)], span=None)),
        ("P { x: 1, }", ast.StructLit(None, I("P"), [ast.FieldInit(I("x"), L(1), span=None)], span=None)),
        ("Io { }", ast.StructLit(None, I("Io"), [], span=None)),
        ("m.S { a: f(x) }", ast.StructLit(I("m"), I("S"), [ast.FieldInit(I("a"), call("f", N("x")), span=None)],
                                          span=None)),
        ("alloc[a](v)", ast.Alloc(I("a"), N("v"), span=None)),
        ("alloc[static](P { x: 1 })", ast.Alloc(I("static"), ast.StructLit(None, I("P"), [
            ast.FieldInit(I("x"), L(1), span=None)], span=None), span=None)),
        ("alloc_slice[a](4096, byte_of('x'))", ast.AllocSlice(I("a"), L(4096), call("byte_of", L(120)), span=None)),
        ("alloc_slice[static](256, 0 - 1)", ast.AllocSlice(I("static"), L(256), B("-", L(0), L(1)), span=None)),
        ("alloc(x)", call("alloc", N("x"))),
        ("(a, b)", ast.TupleExpr([N("a"), N("b")], span=None)),
        ("(a, b, c,)", ast.TupleExpr([N("a"), N("b"), N("c")], span=None)),
        ("(at + 2, 0)", ast.TupleExpr([B("+", N("at"), L(2)), L(0)], span=None)),
    ],
)
def test_construction_forms(text, expected):
    assert e(text) == expected


@pytest.mark.parametrize("text", ["(a,)", "(f(x),)"])
def test_one_tuple_is_refused(text):
    with pytest.raises(ParseError) as info:
        e(text)
    assert info.value.diagnostic.rule == "pattern-shape"


@pytest.mark.parametrize(
    "text",
    ["()", "a +", "f(", "a.", "a.\"x\"", "s[1..]", "s[..2]", "alloc[a](1, 2)", "alloc_slice[a](1)", "E::",
     "P { x }", "P { x: 1 y: 2 }", "a.-1", "+a", "1 2", "a.(b)"],
)
def test_malformed_expressions(text):
    with pytest.raises((ParseError, LexError)) as info:
        e(text)
    assert info.value.diagnostic.rule == "type-mismatch"


def test_tuple_index_spellings():
    # The index is the integer token's value, however it was spelled.
    assert e("t.0x1") == ast.TupleIndex(N("t"), 1, span=None)
    assert e("t.007") == ast.TupleIndex(N("t"), 7, span=None)
    with pytest.raises(ParseError) as info:
        e("t.4294967296")
    assert info.value.diagnostic.rule == "literal-form"


def test_expected_found_message():
    with pytest.raises(ParseError) as info:
        e("f(1 2)")
    d = info.value.diagnostic
    assert d.message == "expected `)`, found an integer literal `2`"
    assert d.span.column == 5


# ---------------------------------------------------------------- struct literals vs blocks


def test_struct_literal_not_taken_in_if_condition():
    (st_,) = body_of("if p == Point { return 0; }")
    assert isinstance(st_, ast.If)
    assert st_.cond == B("==", N("p"), N("Point"))
    assert isinstance(st_.then.stmts[0], ast.Return)


def test_struct_literal_not_taken_in_while_condition():
    (st_,) = body_of("while x < limit { x = x + 1; }")
    assert isinstance(st_, ast.While)
    assert st_.cond == B("<", N("x"), N("limit"))


def test_struct_literal_not_taken_in_match_scrutinee():
    (st_,) = body_of("match o { _ => { return 0; } }")
    assert isinstance(st_, ast.Match) and st_.scrutinee == N("o")


def test_qualified_field_in_condition_is_field_access():
    (st_,) = body_of("if m.ok { return 0; }")
    assert st_.cond == ast.FieldAccess(N("m"), I("ok"), span=None)


def test_parenthesised_struct_literal_in_condition():
    (st_,) = body_of("if p == (Point { x: 1 }) { return 0; }")
    lit = ast.StructLit(None, I("Point"), [ast.FieldInit(I("x"), L(1), span=None)], span=None)
    assert st_.cond == B("==", N("p"), lit)


def test_struct_literal_in_call_argument_inside_condition():
    (st_,) = body_of("if same(p, Point { x: 1 }) { return 0; }")
    assert st_.cond.args[1] == ast.StructLit(None, I("Point"), [ast.FieldInit(I("x"), L(1), span=None)], span=None)


def test_variant_in_condition_is_fine():
    (st_,) = body_of("if o == Ordering::Less { return 0; }")
    assert st_.cond.right == ast.VariantExpr(None, I("Ordering"), I("Less"), None, span=None)


def test_struct_literal_in_block_inside_condition_body():
    (st_,) = body_of("if c { let p = P { x: 1 }; }")
    assert isinstance(st_.then.stmts[0].value, ast.StructLit)


# ================================================================ types


@pytest.mark.parametrize(
    "text,expected",
    [
        ("int", T("int")),
        ("i32", T("i32")),
        ("&r T", ast.RefType(I("r"), False, T("T"), span=None)),
        ("&!i Io", ast.RefType(I("i"), True, T("Io"), span=None)),
        ("&static [byte]", ast.RefType(I("static"), False, ast.SliceType(T("byte"), span=None), span=None)),
        ("&!a &b int", ast.RefType(I("a"), True, ast.RefType(I("b"), False, T("int"), span=None), span=None)),
        ("[int]", ast.SliceType(T("int"), span=None)),
        ("(int, bool)", ast.TupleType([T("int"), T("bool")], span=None)),
        ("(int, bool,)", ast.TupleType([T("int"), T("bool")], span=None)),
        ("(buffer.Buffer, int)", ast.TupleType([T("Buffer", q="buffer"), T("int")], span=None)),
        ("()", ast.TupleType([], span=None)),
        ("(int)", ast.TupleType([T("int")], span=None)),
        ("Pair[int, bool]", T("Pair", T("int"), T("bool"))),
        ("Pair[int, bool,]", T("Pair", T("int"), T("bool"))),
        ("vec.Vec[int]", T("Vec", T("int"), q="vec")),
        ("io.Buffer", T("Buffer", q="io")),
        ("Box[Box[int]]", T("Box", T("Box", T("int")))),
        ("Thread[int, int]", T("Thread", T("int"), T("int"))),
        ("fn(int) -> [] int", ast.FnType([T("int")], ast.Row([], span=None), T("int"), span=None)),
        ("fn() -> [io_write] bool", ast.FnType([], ast.Row([ast.Label("io_write", span=None)], span=None),
                                              T("bool"), span=None)),
        ("fn(int, &r [byte],) -> [] int", ast.FnType(
            [T("int"), ast.RefType(I("r"), False, ast.SliceType(T("byte"), span=None), span=None)],
            ast.Row([], span=None), T("int"), span=None)),
    ],
)
def test_types(text, expected):
    assert ty(text) == expected


@pytest.mark.parametrize(
    "text,qualifier,literal",
    [('Ffi("libc")', None, "libc"), ('Ffi("")', None, ""), ('Fs("/tmp")', None, "/tmp"),
     ('m.Ffi("libc,libssl")', "m", "libc,libssl")],
)
def test_capability_types(text, qualifier, literal):
    t = ty(text)
    assert isinstance(t, ast.CapType)
    assert t.literal == literal
    assert (t.qualifier.name if t.qualifier else None) == qualifier
    assert text[t.literal_span.start : t.literal_span.end] == f'"{literal}"'


@pytest.mark.parametrize("text", ["&r", "&", "[int", "(int", "fn(int) int", "fn(int) -> int", "Ffi(libc)",
                                  "Pair[int", "&!", "1", "m.", 'Ffi("a"'])
def test_malformed_types(text):
    with pytest.raises(ParseError) as info:
        ty(text)
    assert info.value.diagnostic.rule == "type-mismatch"


# ================================================================ statements


def test_let_and_var():
    assert s("let x = 1;") == ast.Let(I("x"), None, L(1), False, span=None)
    assert s("var x = 1;") == ast.Let(I("x"), None, L(1), True, span=None)
    assert s("let x: int = 1;") == ast.Let(I("x"), T("int"), L(1), False, span=None)
    assert s("var s: &r [byte] = t;") == ast.Let(
        I("s"), None if False else ast.RefType(I("r"), False, ast.SliceType(T("byte"), span=None), span=None),
        N("t"), True, span=None)


def test_let_struct_destructure():
    assert s(P1) == ast.LetStruct(None, I("Split"), [I(n) for n in ["io", "ffi", "fs", "heap", "args"]],
                                  call("split", N("world")), span=None)
    assert s("let m.S { a, b, } = e;") == ast.LetStruct(I("m"), I("S"), [I("a"), I("b")], N("e"), span=None)
    assert s("let Ticket { serial } = t;") == ast.LetStruct(None, I("Ticket"), [I("serial")], N("t"), span=None)


def test_let_tuple_destructure():
    assert s("let (a, b) = e;") == ast.LetTuple([I("a"), I("b")], N("e"), span=None)
    assert s("let (next, step, more,) = flags.step(g, c);") == ast.LetTuple(
        [I("next"), I("step"), I("more")],
        ast.Call(ast.QualifiedName(I("flags"), I("step"), span=None), [N("g"), N("c")], span=None), span=None)


@pytest.mark.parametrize(
    "text",
    ["let (a, _) = e;", "let x = 1", "let x;", "let = 1;", "let x: = 1;", "var x: int;", "let (a.b) = e;",
     "let S { a: b } = e;", "var x.y = 1;"],
)
def test_malformed_bindings(text):
    with pytest.raises(ParseError) as info:
        s(text)
    assert info.value.diagnostic.rule == "type-mismatch"


@pytest.mark.parametrize(
    "text,col",
    [("var (a, b) = e;", 5), ("var S { a, b } = e;", 7), ("var m.S { a } = e;", 9)],
)
def test_var_cannot_destructure(text, col):
    with pytest.raises(ParseError) as info:
        s(text)
    d = info.value.diagnostic
    assert (d.rule, d.span.column) == ("pattern-shape", col)
    assert "write `let`, not `var`" in d.message


def test_tuple_patterns_do_not_nest():
    with pytest.raises(ParseError) as info:
        s("let ((a, b), c) = e;")
    assert info.value.diagnostic.rule == "pattern-shape"
    assert "does not nest" in info.value.diagnostic.message


def test_var_destructure_in_a_file_ends_it():
    d = refuse(M + "\nfn g(p: P) -> [] int { var P { x } = p; return x; }")
    assert (d.rule, d.span.line) == ("pattern-shape", 2)


@pytest.mark.parametrize(
    "text,target",
    [
        ("n = n + 1;", N("n")),
        ("s[i] = v;", ast.Index(N("s"), N("i"), span=None)),
        ("r.f = v;", ast.FieldAccess(N("r"), I("f"), span=None)),
        ("*r = v;", U("*", N("r"))),
        ("f(1) = v;", call("f", L(1))),
        ("t.0 = v;", ast.TupleIndex(N("t"), 0, span=None)),
    ],
)
def test_assignment(text, target):
    assert s(text) == ast.Assign(target, N("v") if "v;" in text else B("+", N("n"), L(1)), span=None)


def test_expression_statement():
    assert s("putchar(io, 10);") == ast.ExprStmt(call("putchar", N("io"), L(10)), span=None)
    assert s("x;") == ast.ExprStmt(N("x"), span=None)


def test_if_else_chain():
    st_ = s("if a { return 1; } else if b { return 2; } else { return 3; }")
    assert isinstance(st_, ast.If) and st_.cond == N("a")
    assert isinstance(st_.else_, ast.If) and st_.else_.cond == N("b")
    assert isinstance(st_.else_.else_, ast.Block)
    assert st_.else_.else_.stmts == [ast.Return(L(3), span=None)]
    assert s("if a { }") == ast.If(N("a"), ast.Block([], span=None), None, span=None)


def test_while():
    assert s("while k < n { k = k + 1; }") == ast.While(
        B("<", N("k"), N("n")), ast.Block([ast.Assign(N("k"), B("+", N("k"), L(1)), span=None)], span=None),
        span=None)


def test_return_and_defer():
    assert s("return 0;") == ast.Return(L(0), span=None)
    assert s("defer release(x);") == ast.Defer(call("release", N("x")), span=None)


@pytest.mark.parametrize("text", ["return;", "defer;", "if { }", "while x", "if a { } else return 1;",
                                  "{ x; }", "region { }", "return 0"])
def test_malformed_statements(text):
    with pytest.raises(ParseError) as info:
        s(text)
    assert info.value.diagnostic.rule == "type-mismatch"


def test_borrow_forms():
    assert s("borrow mut io as &!i in { greet(i); }") == ast.Borrow(
        I("io"), True, I("i"), True, ast.Block([ast.ExprStmt(call("greet", N("i")), span=None)], span=None),
        span=None)
    assert s("borrow args as &g in { }") == ast.Borrow(I("args"), False, I("g"), False, ast.Block([], span=None),
                                                        span=None)



@pytest.mark.parametrize(
    "text,fragment",
    [("borrow io as &!i in { }", "write `borrow mut`"), ("borrow mut io as &i in { }", "write `as &!r`")],
)
def test_borrow_halves_must_agree(text, fragment):
    with pytest.raises(ParseError) as info:
        s(text)
    d = info.value.diagnostic
    assert d.rule == "pattern-shape" and fragment in d.message


@pytest.mark.parametrize("text", ["borrow f(x) as &r in { }", "borrow x as r in { }", "borrow x &r in { }",
                                  "borrow x as &r { }", "borrow mut as &r in { }"])
def test_malformed_borrow(text):
    with pytest.raises(ParseError):
        s(text)


def test_region_statement():
    assert s("region a { let b = alloc[a](1); }") == ast.RegionStmt(
        I("a"), ast.Block([ast.Let(I("b"), None, ast.Alloc(I("a"), L(1), span=None), False, span=None)], span=None),
        span=None)


def test_match_arms_and_patterns():
    st_ = s(
        "match flush_out(i) {\n"
        "    Done::Ok(n) => { status = 0; }\n"
        "    Done::Failed(e) => { status = e; },\n"
        "    flags.Arg::Short(_, c, _,) => { }\n"
        "    flags.Arg::Done => { }\n"
        "    E::V() => { }\n"
        "    _ => { }\n"
        "}"
    )
    assert isinstance(st_, ast.Match)
    assert st_.scrutinee == call("flush_out", N("i"))
    pats = [a.pattern for a in st_.arms]
    assert pats == [
        ast.VariantPattern(None, I("Done"), I("Ok"), [I("n")], span=None),
        ast.VariantPattern(None, I("Done"), I("Failed"), [I("e")], span=None),
        ast.VariantPattern(I("flags"), I("Arg"), I("Short"), [None, I("c"), None], span=None),
        ast.VariantPattern(I("flags"), I("Arg"), I("Done"), None, span=None),
        ast.VariantPattern(None, I("E"), I("V"), [], span=None),
        ast.WildcardPattern(span=None),
    ]
    assert st_.arms[1].body.stmts == [ast.Assign(N("status"), N("e"), span=None)]
    assert s("match o { }").arms == []


@pytest.mark.parametrize("text", ["match o { V => { } }", "match o { 1 => { } }", "match o { E::V => return 1; }",
                                  "match o { E::V { } }", "match o { E::V(1) => { } }", "match o { E::V(a.b) => { } }",
                                  "match o { _ => { } _ }"])
def test_malformed_match(text):
    with pytest.raises(ParseError) as info:
        s(text)
    assert info.value.diagnostic.rule == "type-mismatch"


# ================================================================ items


def test_fn_decl_full():
    f = parse("pub fn copy_into[&dst, &src, T: val, U where src <= dst, a <= b](d: &!dst [T], s: &src [T],)"
              " -> [io_write, ffi(\"libc\")] int { return 0; }")
    (fn,) = f.items
    assert isinstance(fn, ast.FnDecl) and fn.pub and fn.name == I("copy_into")
    g = fn.generics
    assert g.params == [ast.RegionParam("dst", span=None), ast.RegionParam("src", span=None),
                        ast.TypeParam("T", "val", span=None), ast.TypeParam("U", None, span=None)]
    assert [r.name for r in g.regions] == ["dst", "src"] and [t.name for t in g.types] == ["T", "U"]
    assert g.where == [ast.WhereClause(I("src"), I("dst"), span=None), ast.WhereClause(I("a"), I("b"), span=None)]
    assert [p.name.name for p in fn.params] == ["d", "s"]
    assert fn.row.labels == [ast.Label("io_write", None, span=None), ast.Label("ffi", "libc", span=None)]
    assert fn.ret == T("int")
    assert fn.body.stmts == [ast.Return(L(0), span=None)]


def test_fn_decl_minimal():
    (fn,) = parse("fn f() -> [] int { }").items
    assert fn.generics is None and fn.params == [] and fn.row.labels == [] and not fn.pub


@pytest.mark.parametrize(
    "text,params",
    [
        ("fn f[T]() -> [] int { }", [ast.TypeParam("T", None, span=None)]),
        ("fn f[T: res]() -> [] int { }", [ast.TypeParam("T", "res", span=None)]),
        ("fn f[&r,]() -> [] int { }", [ast.RegionParam("r", span=None)]),
        ("fn f[]() -> [] int { }", []),
        ("fn f[where a <= b]() -> [] int { }", []),
    ],
)
def test_declaration_params(text, params):
    (fn,) = parse(text).items
    assert fn.generics.params == params


@pytest.mark.parametrize("text,found", [
    ("fn f[T: int]() -> [] int { }", "an identifier `int`"),
    ("fn f[T: ]() -> [] int { }", "`]`"),
    ("fn f[T: &r]() -> [] int { }", "`&`"),
])
def test_bound_must_be_val(text, found):
    d = refuse(text)
    assert d.rule == "type-mismatch"
    assert d.message == f"expected `val` after `:`, found {found}"


def test_missing_row_is_type_mismatch():
    d = refuse("fn f() -> int { return 0; }")
    assert (d.rule, d.message) == ("type-mismatch", "expected `[`, found an identifier `int`")
    assert (d.span.line, d.span.column) == (1, 11)


def test_missing_semicolon_position():
    d = refuse("fn f() -> [] int {\n    let x = 1\n    return x;\n}")
    assert d.rule == "type-mismatch"
    assert d.message == "expected `;`, found `return`"
    assert (d.span.line, d.span.column) == (3, 5)


def test_extern_fn():
    (x,) = parse('extern fn write[&f, &b](ffi: &f Ffi("libc"), fd: int, buf: &b [byte]) -> [ffi("libc")] int;').items
    assert isinstance(x, ast.ExternFn) and x.name == I("write") and not x.pub
    assert [p.name for p in x.generics.regions] == ["f", "b"]
    assert x.params[0].ty == ast.RefType(I("f"), False, ast.CapType(None, I("Ffi"), "libc", None, span=None),
                                         span=None)
    assert x.row.labels == [ast.Label("ffi", "libc", span=None)]
    (y,) = parse("pub extern fn close[&f](ffi: &f Ffi(\"libc\"), fd: int) -> [ffi(\"libc\")] c_int;").items
    assert y.pub and y.ret == T("c_int")
    d = refuse('extern fn id[T, &f](ffi: &f Ffi("libc"), x: T) -> [ffi("libc")] int;')
    assert d.rule == "foreign-declaration" and "no type parameters" in d.message


@pytest.mark.parametrize("text", ['extern write() -> [] int;', 'extern fn w() -> [] int { }',
                                  'extern fn w() -> [] int'])
def test_malformed_extern(text):
    assert refuse(text).rule == "type-mismatch"


@pytest.mark.parametrize(
    "text,mode",
    [("struct P { x: int, y: int }", None), ("res struct P { x: int, y: int, }", "res"),
     ("val struct P { x: int, y: int }", "val")],
)
def test_struct_decl(text, mode):
    (sd,) = parse(text).items
    assert isinstance(sd, ast.StructDecl) and sd.mode == mode and sd.generics is None
    assert sd.fields == [ast.FieldDecl(I("x"), T("int"), span=None), ast.FieldDecl(I("y"), T("int"), span=None)]


def test_struct_decl_generic_and_empty():
    (sd,) = parse("pub res struct Vec[T: val] { items: Box[T], len: int }").items
    assert sd.pub and sd.mode == "res" and sd.generics.params == [ast.TypeParam("T", "val", span=None)]
    (e_,) = parse("struct Unit { }").items
    assert e_.fields == []
    d = refuse("struct S[&r] { n: int }")
    assert d.rule == "region-mismatch" and "no region parameters" in d.message
    assert refuse("enum E[T, &r] { A }").rule == "region-mismatch"
    d = refuse("val struct Wrap[T: val] { held: T }")
    assert d.rule == "mode-bound-violated" and "already bounds its parameters" in d.message
    (w,) = parse("val enum Wrap[T] { A(T) }").items
    assert w.mode == "val" and w.generics.types == [ast.TypeParam("T", None, span=None)]
    (u,) = parse("enum Pair[A: val, B] { One(A), Two(B) }").items
    assert [t.bound for t in u.generics.types] == ["val", None]


def test_enum_decl():
    (ed,) = parse("pub enum Result[T, E] { Ok(T), Err(E,), Nothing(), Done, }").items
    assert isinstance(ed, ast.EnumDecl) and ed.pub and ed.mode is None
    assert ed.variants == [
        ast.VariantDecl(I("Ok"), [T("T")], True, span=None),
        ast.VariantDecl(I("Err"), [T("E")], True, span=None),
        ast.VariantDecl(I("Nothing"), [], True, span=None),
        ast.VariantDecl(I("Done"), [], False, span=None),
    ]
    (r,) = parse("res enum Opened { Ok(File), Failed(int) }").items
    assert r.mode == "res" and len(r.variants) == 2
    (n,) = parse("enum Never { }").items
    assert n.variants == []


def test_static_decl():
    f = parse("static decode_table: [int] {\n    let table = alloc_slice[static](256, 0 - 1);\n"
              "    var i = 0;\n    while i < 64 { table[i] = i; i = i + 1; }\n    return table;\n}\n"
              "pub static names: [byte] { return x; }")
    st_, pub_st = f.items
    assert isinstance(st_, ast.StaticDecl) and st_.name == I("decode_table") and not st_.pub
    assert st_.ty == ast.SliceType(T("int"), span=None)
    assert len(st_.body.stmts) == 4
    assert pub_st.pub


def test_static_is_contextual():
    # `static` is an identifier elsewhere: as a region, a local name, a call.
    f = parse("fn f(s: &static [byte]) -> [] &static [byte] { let static = 1; return s; }")
    assert f.items[0].ret == ast.RefType(I("static"), False, ast.SliceType(T("byte"), span=None), span=None)


@pytest.mark.parametrize(
    "text,found",
    [
        ("let x = 1;", "`let`"),
        ("x", "an identifier `x`"),
        ("edition 2;\nedition 2;", "an identifier `edition`"),
        ("pub pub fn f() -> [] int { }", "`pub`"),
        ("pub import a;", "`import`"),
        ("42", "an integer literal `42`"),
        ("pub", "end of file"),
        ("{ }", "`{`"),
    ],
)
def test_bad_item_start(text, found):
    d = refuse(text)
    assert d.rule == "type-mismatch"
    assert d.message == f"expected `fn`, `extern`, `struct`, `enum` or `static`, found {found}"


def test_res_must_be_followed_by_struct_or_enum():
    d = refuse("res fn f() -> [] int { }")
    assert d.rule == "type-mismatch" and "`struct` or `enum`" in d.message


# ---------------------------------------------------------------- edition, module, import


@pytest.mark.parametrize("n", range(1, 9))
def test_known_editions(n):
    f = parse(f"edition {n};\n{M}")
    assert f.edition == n
    assert (f.edition_span.start, f.edition_span.end) == (0, 10)


def test_default_edition_is_one():
    f = parse(M)
    assert f.edition == 1 and f.edition_span is None


@pytest.mark.parametrize("text", ["edition 0;", "edition 9;", "edition 100;", "edition 99999999999999999999;"])
def test_unknown_edition(text):
    d = refuse(text + "\n" + M)
    assert d.rule == "unknown-edition"
    assert "the only editions today are 1, 2, 3, 4, 5, 6, 7 and 8" in d.message
    assert (d.span.line, d.span.column) == (1, 1)


@pytest.mark.parametrize("text", ["edition x;", "edition 1.5;", 'edition "5";', "edition;"])
def test_edition_needs_a_number(text):
    d = refuse(text)
    assert d.rule == "unknown-edition"
    assert d.message.startswith("expected an edition number, found")


def test_edition_needs_a_semicolon():
    assert refuse("edition 5 fn").rule == "type-mismatch"


def test_edition_only_first():
    d = refuse("module a;\nedition 5;")
    assert d.rule == "type-mismatch"


def test_module_and_imports():
    f = parse("edition 5;\nmodule std.io;\nimport std.math;\nimport std.flags as fl;\npub fn f() -> [] int { }")
    assert f.module.dotted == "std.io" and f.module_name == "std.io"
    assert [i.dotted for i in f.imports] == ["std.math", "std.flags"]
    assert f.imports[0].alias is None and f.imports[0].qualifier == I("math")
    assert f.imports[1].qualifier == I("fl")
    assert f.items[0].pub


def test_imports_may_interleave_with_items():
    f = parse("import a;\nfn f() -> [] int { }\nimport b;")
    assert [i.dotted for i in f.imports] == ["a", "b"] and len(f.items) == 1


def test_root_module():
    assert parse(M).module_name == ""


@pytest.mark.parametrize(
    "text,line,message",
    [
        ("import a;\nmodule b;", 2, "a `module` declaration is the first item in its file"),
        (M + "\nmodule b;", 2, "a `module` declaration is the first item in its file"),
        ("module a;\nmodule b;", 2, "a file declares at most one module"),
    ],
)
def test_module_must_come_first(text, line, message):
    d = refuse(text)
    assert (d.rule, d.span.line, d.message) == ("program-shape", line, message)


@pytest.mark.parametrize("text", ["module;", "module a.;", "import a", "import a as;", "import a as b.c;",
                                  "module a b;"])
def test_malformed_module_and_import(text):
    assert refuse(text).rule == "type-mismatch"


# ================================================================ spans


def test_spans_cover_first_to_last_token():
    src = "fn f(a: int) -> [] int {\n    return foo(a, b)[0] + 1;\n}"
    f = parse(src)
    fn = f.items[0]
    assert src[fn.span.start : fn.span.end] == src
    ret = fn.body.stmts[0]
    assert src[ret.span.start : ret.span.end] == "return foo(a, b)[0] + 1;"
    expr = ret.value
    assert src[expr.span.start : expr.span.end] == "foo(a, b)[0] + 1"
    assert src[expr.left.span.start : expr.left.span.end] == "foo(a, b)[0]"
    assert (expr.left.span.line, expr.left.span.column) == (2, 12)
    assert src[fn.params[0].span.start : fn.params[0].span.end] == "a: int"
    assert src[fn.row.span.start : fn.row.span.end] == "[]"


def test_every_node_has_a_span_inside_the_file():
    src = HELLO
    f = parse(src)

    def walk(node):
        if isinstance(node, ast.Node):
            assert node.span is not None and 0 <= node.span.start <= node.span.end <= len(src), node
            for name in node.__dataclass_fields__:
                if name not in ("span", "source", "ty", "info", "edition_span", "literal_span"):
                    walk(getattr(node, name))
        elif isinstance(node, list):
            for x in node:
                walk(x)

    walk(f)


def test_paren_group_leaves_no_node_but_tuple_span_covers_parens():
    src = "(a + b)"
    node = e(src)
    assert isinstance(node, ast.Binary) and (node.span.start, node.span.end) == (1, 6)
    tup = e("(a, b)")
    assert (tup.span.start, tup.span.end) == (0, 6)


def test_item_span_includes_pub_and_mode():
    src = "pub res struct T { n: int }"
    (sd,) = parse(src).items
    assert (sd.span.start, sd.span.end) == (0, len(src))


def test_diagnostic_positions_across_lines():
    d = refuse("fn f() -> [] int {\n  let a = 1;\n  let b = a +;\n}")
    assert (d.span.line, d.span.column) == (3, 14)
    assert d.message == "expected an expression, found `;`"


def test_unclosed_block_names_end_of_file():
    d = refuse("fn f() -> [] int { return 0;")
    assert d.message == "expected `}`, found end of file"
    d = refuse("fn f() -> [] int { match x { _ => { } ")
    assert d.message == "expected `}`, found end of file"


def test_lex_error_ends_the_file():
    d = refuse("fn f() -> [] int {\n  let s = \"\\q\";\n  return 0 0;\n}")
    assert (d.rule, d.span.line, d.span.column) == ("unknown-escape", 2, 12)


# ================================================================ example programs

HELLO = """//~ STDOUT Hello, world!
//~ EXIT 0
fn write_all[&r, &i](io: &!i Io, s: &r [byte]) -> [io_write] int {
    var n = 0;
    while n < len(s) {
        putchar(io, int_of(s[n]));
        n = n + 1;
    }
    return len(s);
}
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(args); release(heap); release(fs); release(ffi);
    var written = 0;
    borrow mut io as &!i in {
        written = write_all(i, "Hello, world!\\n");
    }
    release(io);
    if written == 14 { return 0; }
    return 1;
}
"""

BENCH = """fn spin[&i](io: &!i Io, n: int) -> [io_write] int {
    var k = 0;
    while k < n { putchar(io, 'a' + k % 26); k = k + 1; }
    return k;
}
fn bulk[&i](io: &!i Io, n: int) -> [io_write] int {
    region a {
        let buf = alloc_slice[a](4096, byte_of('x'));
        var left = n;
        while left > 0 {
            var m = left; if m > 4096 { m = 4096; }
            write_bytes(io, buf[0..m]);
            left = left - m;
        }
    }
    return n;
}
"""

LIBC = """extern fn write[&f, &b](ffi: &f Ffi("libc"), fd: int, buf: &b [byte]) -> [ffi("libc")] int;

fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(fs); release(heap); release(args);
    let libc = narrow(ffi, "libc");             // Ffi("") -> Ffi("libc"), consumes ffi
    var n = 0;
    borrow libc as &f in { n = write(f, 1, "hello\\n"); }
    release(libc);
    if n == 6 { return 0; }
    return 1;
}
"""

FLUSH = """edition 5;
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args, net, clock } = split(world);
    release(ffi); release(fs); release(heap); release(args); release(net); release(clock);
    var status = 0;
    borrow mut io as &!i in {
        write_bytes(i, "hello\\n");
        match flush_out(i) {
            Done::Ok(n) => { status = 0; }
            Done::Failed(e) => { status = e; }
        }
    }
    release(io);
    return status;
}
"""

MINIMAL_PROGRAMS = {
    "linear-value-unconsumed": """fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(ffi); release(fs); release(args);
    return 0;                                   // `heap` is still live
}""",
    "linear-use-after-move": """fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(io);                   // second use
    release(ffi); release(fs); release(heap); release(args);
    return 0;
}""",
    "linear-value-taken-apart": """res struct Ticket { serial: int }
fn peek(t: Ticket) -> [] int { return t.serial; }    // must be `let Ticket { serial } = t;`
M""",
    "borrow-conflict": """fn main(world: World) -> [] int {
    P1  release(ffi); release(fs); release(heap); release(args);
    borrow mut io as &!a in { borrow mut io as &!b in { putchar(b, 65); } }
    release(io); return 0;
}""",
    "effect-not-declared": """fn greet[&i](io: &!i Io) -> [] int { return putchar(io, 72); }
M""",
    "effect-declared-not-performed": """fn quiet[&i](io: &!i Io) -> [io_write] int { return 1; }
M""",
    "reference-escapes-region": """fn leak() -> [] &static [byte] {
    region a { let bytes = alloc_slice[a](4, byte_of(65)); return bytes; }
}
M""",
    "region-not-in-scope": """fn first(s: &r [byte]) -> [] int { return int_of(s[0]); }
M""",
    "shared-reference-written": """fn poke[&r](s: &r [byte]) -> [] int { s[0] = byte_of(1); return 0; }
M""",
    "mode-bound-violated": """fn keep[T: val](x: T) -> [] int { return 0; }
fn main(world: World) -> [] int { keep(world); return 0; }   // World is res (also: world unconsumed)""",
    "unsized-type": """struct Holder { bytes: [byte] }
M""",
    "constant-traps": """fn f() -> [] int { return 7 / 0; }
M""",
    "type-mismatch": """fn f() -> [] int { return true; }
M""",
    "operator-type-mismatch": """fn f(a: bool) -> [] int { return a + 1; }
M""",
    "field-order": """struct P { x: int, y: int }
fn f() -> [] P { return P { y: 1, x: 2 }; }     // field-order; `P { x: 1 }` is missing-field
M""",
    "match-not-exhaustive": """enum Ordering { Less, Equal, Greater }
fn f(o: Ordering) -> [] int { match o { Ordering::Less => { return 0; } } }
M""",
    "missing-return": """fn f(b: bool) -> [] int { if b { return 1; } }
M""",
    "not-a-function": """fn main(world: World) -> [] int { release(world); let value = 7; return value(1); }""",
    "module-not-imported": """fn f() -> [] int { return math.max(1, 2); }
M""",
    "assign-to-immutable": """fn f() -> [] int { let n = 0; n = 1; return n; }
M""",
    "capability-misused": """fn main(world: World) -> [] int { release(world); let c = Io { }; release(c); return 0; }""",
    "capability-not-narrowable": """fn main(world: World) -> [] int {
    P1  release(io); release(fs); release(heap); release(args);
    let c = narrow(ffi, "libcrypto"); let d = narrow(c, "libc");   // not an extension
    release(d); return 0;
}""",
    "pattern-shape": "fn nothing() -> [] () { return 0; }\nM",
    "program-shape": "fn main() -> [] int { return 0; }",
    "static-item": "fn f() -> [] int { let t = alloc_slice[static](4, 0); return 0; }\nM",
    "type-args-not-taken": "fn f[T](x: T[int]) -> [] int { return 0; }\nM",
    "not-a-place": "fn f() -> [] int { f(1) = 2; return 0; }\nM",
}


@pytest.mark.parametrize("name,text", [("hello", HELLO), ("bench", BENCH), ("libc", LIBC), ("flush_out", FLUSH)])
def test_example_programs_parse(name, text):
    f = parse(text)
    assert f.items


def test_hello_shape():
    f = parse(HELLO)
    write_all, main = f.items
    assert [p.name for p in write_all.generics.regions] == ["r", "i"]
    assert write_all.row.labels == [ast.Label("io_write", span=None)]
    borrow = main.body.stmts[6]
    assert isinstance(borrow, ast.Borrow) and borrow.target == I("io") and borrow.region == I("i")
    assert borrow.body.stmts[0] == ast.Assign(
        N("written"), call("write_all", N("i"), ast.StrLit(b"Hello, world!\n", span=None)), span=None)


def test_flush_out_shape():
    f = parse(FLUSH)
    assert f.edition == 5
    match = f.items[0].body.stmts[8].body.stmts[1]
    assert isinstance(match, ast.Match) and len(match.arms) == 2


@pytest.mark.parametrize("rule", sorted(MINIMAL_PROGRAMS))
def test_minimal_programs_parse(rule):
    text = MINIMAL_PROGRAMS[rule].replace("P1", P1).replace("\nM", "\n" + M)
    f = parse(text)
    assert any(isinstance(i, ast.FnDecl) and i.name.name == "main" for i in f.items)


@pytest.mark.parametrize(
    "text,rule,col",
    [
        ('fn f() -> [] int { let s = "\\q"; return 0; }', "unknown-escape", 29),
        ("fn g() -> [] int { let c = 'ab'; return c; }", "literal-form", 28),
        ("fn h() -> [] int { return 0b1; }", "unexpected-character", 28),
        ("fn f() -> [] int { return 9223372036854775808; }", "literal-out-of-range", 27),
        ("fn f() -> [] float { return 1e999; }", "literal-out-of-range", 29),
    ],
)
def test_minimal_lexical_refusals(text, rule, col):
    d = refuse(text + "\n" + M)
    assert (d.rule, d.span.line, d.span.column) == (rule, 1, col)


# ================================================================ robustness (property)

FRAGMENTS = [
    "fn", "main", "(", ")", "{", "}", "[", "]", "&", "!", "&!", "r", "->", "=>", "::", ".", "..", ",", ";", ":",
    "=", "==", "<", "<=", ">>", "+", "-", "*", "/", "%", "|", "||", "^", "~", "let", "var", "if", "else", "while",
    "match", "return", "defer", "borrow", "mut", "as", "in", "region", "struct", "enum", "res", "val", "extern",
    "module", "import", "pub", "where", "static", "edition", "alloc", "alloc_slice", "_", "x", "Io", "int", "0",
    "7", "0x", "0xff", "9223372036854775808", "1.5", "1e999", "2f32", "1.0f32", "t.0.1", '"s"', '"\\q"', '"',
    "'a'", "''", "'", "//", "\n", " ", "@", "\u00e9", "E::V", "S { a: 1 }", "(a, b)", "(a,)", "fn f() -> [] int {",
    "return 0;", "-9223372036854775808", "true", "false",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40), st.lists(st.sampled_from(["", " ", "\n"]), max_size=40))
def test_parse_file_never_raises(parts, seps):
    text = "".join(p + (seps[i] if i < len(seps) else " ") for i, p in enumerate(parts))
    f, diags = parse_file(SourceFile("fuzz.cho", text))
    assert (f is None) == (len(diags) == 1)
    assert len(diags) <= 1
    if diags:
        d = diags[0]
        assert d.rule != "internal", d.message
        assert d.span is not None and 0 <= d.span.start <= len(text)
        d.render()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_parse_file_never_raises_on_arbitrary_text(text):
    f, diags = parse_file(SourceFile("fuzz.cho", text))
    assert (f is None) == (len(diags) == 1)
    assert all(d.rule != "internal" for d in diags)


def test_deep_nesting_is_a_diagnostic_not_a_crash():
    f, diags = parse_file(SourceFile("deep.cho", "fn f() -> [] int { return " + "(" * 5000 + "1" + ")" * 5000 + "; }"))
    assert (f is None) == (len(diags) == 1)
