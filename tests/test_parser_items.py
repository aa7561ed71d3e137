"""Parser tests: items, edition/module/import, spans, whole example programs and robustness (language.md §2)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cancho_kernel.compiler import ast
from cancho_kernel.compiler.parser import parse_file
from cancho_kernel.compiler.source import SourceFile
from parser_helpers import I, N, L, T, call, e, parse, refuse, M, P1


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
    # The caret is where the `;` belongs: the end of the line's last token, not the next line.
    assert (d.span.line, d.span.column) == (2, 13)
    assert "syntax error" in d.explanation and "`;`" in d.explanation
    assert "after an integer literal `1`" in d.explanation
    assert d.explanation != "The types disagree."


def test_missing_semicolon_on_the_same_line_points_at_what_was_found():
    d = refuse("fn f() -> [] int {\n    let x = 1 return x;\n}")
    assert (d.span.line, d.span.column) == (2, 15)
    assert "syntax error" in d.explanation and "here, and `return`" in d.explanation


def test_syntax_refusals_explain_syntax_not_types():
    d = refuse("fn f() -> int { return 0; }")
    assert d.explanation.startswith("This is a syntax error: the grammar needs `[` here")


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
