"""Property tests: the checker answers every program with diagnostics, never a Python exception
(nor an `internal` refusal), and whatever it accepts compiles to IR that LLVM verifies."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cancho_kernel.compiler import api
from cancho_kernel.compiler.backends import native
from cancho_kernel.compiler.source import SourceFile

INT_VARS = ["a", "b", "c"]
BOOL_VARS = ["p", "q"]


@st.composite
def int_expr(draw, depth=0):
    if depth > 2 or draw(st.booleans()):
        return draw(st.one_of(st.sampled_from(INT_VARS), st.integers(-5, 100).map(str),
                              st.sampled_from(["'a'", "0x1f", "len(s)", "int_of(s[0])"])))
    op = draw(st.sampled_from(["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"]))
    left, right = draw(int_expr(depth + 1)), draw(int_expr(depth + 1))
    if op in ("/", "%"):
        right = f"(1 + ({right}) * ({right}))"  # never zero... unless it overflows, which is fine
    if op in ("<<", ">>"):
        right = str(draw(st.integers(0, 63)))
    return f"({left} {op} {right})"


@st.composite
def bool_expr(draw, depth=0):
    if depth > 1 or draw(st.booleans()):
        return draw(st.sampled_from(BOOL_VARS + ["true", "false"]))
    kind = draw(st.sampled_from(["cmp", "and", "or", "not"]))
    if kind == "cmp":
        return f"({draw(int_expr(2))} {draw(st.sampled_from(['<', '<=', '==', '!=', '>', '>=']))} {draw(int_expr(2))})"
    if kind == "not":
        return f"!{draw(bool_expr(depth + 1))}"
    op = "&&" if kind == "and" else "||"
    return f"({draw(bool_expr(depth + 1))} {op} {draw(bool_expr(depth + 1))})"


@st.composite
def statement(draw, depth=0):
    kind = draw(st.sampled_from(["assign", "assignb", "if", "while", "put", "call"] if depth < 2 else ["assign", "put"]))
    if kind == "assign":
        return f"{draw(st.sampled_from(INT_VARS))} = {draw(int_expr())};"
    if kind == "assignb":
        return f"{draw(st.sampled_from(BOOL_VARS))} = {draw(bool_expr())};"
    if kind == "put":
        return f"putchar(i, {draw(st.sampled_from(INT_VARS))} % 26 + 'a');"
    if kind == "call":
        return f"a = helper({draw(int_expr())}, {draw(bool_expr())});"
    body = " ".join(draw(st.lists(statement(depth + 1), min_size=0, max_size=3)))
    if kind == "if":
        other = " ".join(draw(st.lists(statement(depth + 1), max_size=2)))
        return f"if {draw(bool_expr())} {{ {body} }} else {{ {other} }}"
    return f"var k{depth} = 0; while k{depth} < 3 {{ {body} k{depth} = k{depth} + 1; }}"


@st.composite
def program(draw):
    stmts = "\n        ".join(draw(st.lists(statement(), min_size=1, max_size=6)))
    return f"""fn helper(x: int, flag: bool) -> [] int {{
    if flag {{ return x; }}
    return 0 - x;
}}
fn body[&i](i: &!i Io, s: &static [byte]) -> [io_write] int {{
    var a = 1; var b = 2; var c = 3; var p = true; var q = false;
        {stmts}
    putchar(i, 10);
    return a;
}}
fn main(world: World) -> [] int {{
    let Split {{ io, ffi, fs, heap, args }} = split(world);
    release(ffi); release(fs); release(heap); release(args);
    var r = 0;
    borrow mut io as &!i in {{ r = body(i, "xyz"); }}
    release(io);
    return r;
}}
"""


def check_never_crashes(text: str) -> None:
    result = api.compile_sources([SourceFile("p.cho", text)])
    internal = [d for d in result.diagnostics if d.rule == "internal"]
    assert not internal, (text, internal[0].message)
    if result.ok:
        native.emit_object(result.ir)  # the IR must verify and compile
    else:
        assert result.diagnostics and all(d.rule for d in result.diagnostics)


SLOW = settings(max_examples=int(__import__("os").environ.get("CANCHO_PROP_EXAMPLES", "40")), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SLOW
@given(program())
def test_generated_programs_are_accepted_and_compile(text):
    result = api.compile_sources([SourceFile("p.cho", text)])
    # Literal-only operations may be refused as constant-traps; nothing else may be.
    assert all(d.rule == "constant-traps" for d in result.diagnostics), (text, result.diagnostics)
    if result.ok:
        native.emit_object(result.ir)


@SLOW
@given(program(), st.data())
def test_mutated_programs_get_diagnostics_not_exceptions(text, data):
    lines = text.splitlines()
    kind = data.draw(st.sampled_from(["drop-line", "dup-line", "drop-char", "swap-word", "insert"]))
    i = data.draw(st.integers(0, len(lines) - 1))
    if kind == "drop-line":
        del lines[i]
    elif kind == "dup-line":
        lines.insert(i, lines[i])
    elif kind == "drop-char" and lines[i]:
        j = data.draw(st.integers(0, len(lines[i]) - 1))
        lines[i] = lines[i][:j] + lines[i][j + 1:]
    elif kind == "swap-word":
        words = ["io", "i", "a", "p", "true", "release", "return", "int", "bool", "&!i", "[]", "s"]
        old, new = data.draw(st.sampled_from(words)), data.draw(st.sampled_from(words))
        lines[i] = lines[i].replace(old, new, 1)
    else:
        frag = data.draw(st.sampled_from(["let", "(", "}", "{", ";", "match a {", "release(io);", "&!", "0x"]))
        lines[i] = lines[i] + frag
    check_never_crashes("\n".join(lines))
