"""Parser tests: expressions and precedence, types and statements (language.md §3.1, §4)."""

from __future__ import annotations

import struct

import pytest

from cancho_kernel.compiler import ast
from cancho_kernel.compiler.lexer import LexError
from cancho_kernel.compiler.parser import ParseError
from parser_helpers import I, N, L, B, U, T, call, e, ty, s, refuse, M, P1, in_fn, body_of

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
