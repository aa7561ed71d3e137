"""The compiler's limits (issue 12, items 2–5): what it must refuse in bounded time, what it must
accept however large, and how it reads source bytes.

* Generic instantiation: polymorphic recursion, non-regular and infinite types, and explosive
  but finite instantiation are refused with `infinite-type` at the call or declaration.
* Depth: 10,000 terms, `else if` branches, nested parentheses and struct links compile and run;
  peak memory at 4N stays within a constant factor of 4x the one at N (linear, not quadratic).
* `static` evaluation has a compile-time budget (steps and bytes), refused as `static-item` at
  the static.
* Source text: a byte that is not UTF-8 is refused where it stands; a byte order mark is refused
  as the reference's lexer refuses it.

No test here has a wall-time threshold: a regression to a hang is caught by pytest-timeout.
"""

from __future__ import annotations

import textwrap
import tracemalloc
from pathlib import Path

import pytest

from cancho_kernel.compiler import api
from cancho_kernel.compiler.check.evaluate import FUEL, MAX_BYTES
from cancho_kernel.compiler.check.limits import MAX_TYPE_NODES
from cancho_kernel.compiler.source import SourceFile

MAIN0 = "fn main(world: World) -> [] int { release(world); return 0; }\n"


@pytest.fixture(scope="module")
def jit_worker():
    from cancho_kernel.compiler.backends import jit

    worker = jit.JitWorker()
    yield worker
    worker.close()


def compile_text(text: str, path: str = "limits.cho") -> api.CompileResult:
    return api.compile_sources([SourceFile(path, text)])


def refused(text: str) -> tuple[str, int | None, int | None, str]:
    """(rule, line, column, message) of the first refusal; fails if the program compiled."""
    result = compile_text(text)
    assert not result.ok, "expected a refusal, but the program compiled"
    d = result.diagnostics[0]
    line, col = (d.span.line, d.span.column) if d.span is not None else (None, None)
    return d.rule, line, col, d.message


def run_status(text: str, jit_worker) -> int:
    """Compile (must succeed) and run on the jit backend: the exit status."""
    from cancho_kernel.compiler.backends import process

    result = compile_text(text)
    assert result.ok, [d.message for d in result.diagnostics]
    run = jit_worker.run(result.ir, ["limits"], b"", process.StdoutTarget.pipe(), process.RunLimits(timeout=120))
    assert run.signal is None, run
    return run.exit_status


# --------------------------------------------------------------------------- item 2: generics


def test_polymorphic_recursion_is_refused_at_the_call():
    rule, line, col, message = refused(textwrap.dedent("""\
        fn f[T: val](x: T, n: int) -> [] int {
            if n == 0 { return 0; }
            return f((x, x), n - 1);
        }
        fn main(world: World) -> [] int { release(world); return f(1, 3); }
        """))
    assert (rule, line, col) == ("infinite-type", 3, 12)
    assert "polymorphic recursion" in message and "(T, T)" in message


def test_polymorphic_recursion_through_two_functions_is_refused():
    rule, line, _, _ = refused(textwrap.dedent("""\
        fn f[T: val](x: T, n: int) -> [] int {
            if n == 0 { return 0; }
            return g(x, n - 1);
        }
        fn g[U: val](y: U, n: int) -> [] int { return f((y, 1), n); }
        fn main(world: World) -> [] int { release(world); return f(1, 3); }
        """))
    assert (rule, line) == ("infinite-type", 5)


def test_recursion_at_the_same_type_arguments_is_accepted(jit_worker):
    text = textwrap.dedent("""\
        fn f[T: val](x: T, n: int) -> [] int {
            if n == 0 { return 40; }
            return g(x, n - 1);
        }
        fn g[U: val](y: U, n: int) -> [] int { return f(y, n) + 1; }
        fn main(world: World) -> [] int { release(world); return f((1, true), 4); }
        """)
    assert run_status(text, jit_worker) == 44


def test_a_non_regular_type_is_refused_at_its_declaration():
    rule, line, col, message = refused("struct S[T] { v: T, next: S[(T, T)] }\n"
                                       "fn g(s: S[int]) -> [] int { return 0; }\n" + MAIN0)
    assert (rule, line, col) == ("infinite-type", 1, 8)
    assert "S[(T, T)]" in message


def test_a_non_regular_type_behind_a_box_is_refused_too():
    rule, line, _, _ = refused("enum L[T] { Nil, Cons(T, Box[L[(T, T)]]) }\n" + MAIN0)
    assert (rule, line) == ("infinite-type", 1)


def test_an_infinite_struct_through_a_generic_is_refused():
    rule, line, col, message = refused("struct W[T] { v: T }\nstruct N { w: W[N] }\n" + MAIN0)
    assert (rule, line, col) == ("infinite-type", 2, 8)
    assert "contains itself" in message


def test_an_infinite_enum_through_a_generic_is_refused_not_internal():
    text = textwrap.dedent("""\
        struct W[T] { v: T }
        enum E { A, B(W[E]) }
        fn k(e: E) -> [] int { match e { E::A => { return 1; } _ => { return 2; } } }
        fn main(world: World) -> [] int { release(world); return k(E::A); }
        """)
    rule, line, col, _ = refused(text)
    assert (rule, line, col) == ("infinite-type", 2, 6)


def test_a_type_containing_another_instance_of_itself_is_refused():
    rule, line, _, _ = refused("struct S[T] { v: T, other: S[int] }\n" + MAIN0)
    assert (rule, line) == ("infinite-type", 1)


def test_regular_recursive_generics_are_accepted(jit_worker):
    text = textwrap.dedent("""\
        enum List[T] { Nil, Cons(T, Box[List[T]]) }
        struct Pair[A, B] { a: A, b: B, swapped: Box[Pair[B, A]] }
        struct W[T] { v: T }
        struct Holder { w: W[int], again: W[W[bool]] }
        fn main(world: World) -> [] int {
            release(world);
            let h = Holder { w: W { v: 5 }, again: W { v: W { v: true } } };
            return h.w.v;
        }
        """)
    assert run_status(text, jit_worker) == 5


def doubling_chain(length: int) -> str:
    """`length` generic functions, each calling the next with its argument doubled."""
    lines = [f"fn f{i}[T: val](x: T) -> [] int {{ return f{i + 1}((x, x)); }}" for i in range(length)]
    lines.append(f"fn f{length}[T: val](x: T) -> [] int {{ return 7; }}")
    lines.append("fn main(world: World) -> [] int { release(world); return f0(1); }")
    return "\n".join(lines) + "\n"


def test_a_chain_of_24_doubling_generic_functions_is_refused_at_the_limit():
    rule, line, _, message = refused(doubling_chain(24))
    # f_k is instantiated at a tuple of 2^k ints: about 2^(k+1) parts.
    assert rule == "infinite-type" and str(MAX_TYPE_NODES) in message
    assert 2 ** (line + 1) > MAX_TYPE_NODES >= 2 ** line


def test_a_short_doubling_chain_compiles_and_runs(jit_worker):
    assert run_status(doubling_chain(8), jit_worker) == 7


def test_a_chain_of_24_doubling_generic_types_is_refused():
    lines = [f"struct A{i}[T] {{ x: A{i + 1}[(T, T)] }}" for i in range(24)]
    lines.append("struct A24[T] { x: T }")
    rule, line, _, message = refused("\n".join(lines) + "\n" + MAIN0)
    assert (rule, line) == ("infinite-type", 1) and str(MAX_TYPE_NODES) in message


# --------------------------------------------------------------------------- item 3: depth

N = 10_000


def sum_of_terms(n: int) -> str:
    terms = " + ".join(str(i % 7) for i in range(n))
    total = sum(i % 7 for i in range(n))
    return ("fn main(world: World) -> [] int { release(world); var k = 0; let x = " + terms.replace("0 +", "k +", 1)
            + f"; return x - {total} + 7; }}\n")


def else_if_chain(n: int) -> str:
    body = "    if k == 0 { return 1; }" + "".join(
        f" else if k == {i} {{ return {i % 97 + 2}; }}" for i in range(1, n)) + " else { return 0; }"
    return (f"fn pick(k: int) -> [] int {{\n{body}\n}}\n"
            f"fn main(world: World) -> [] int {{ release(world); return pick({n - 2}) * 1000 + pick({n + 5}); }}\n")


def nested_parens(n: int) -> str:
    return ("fn main(world: World) -> [] int { release(world); var k = 4; return "
            + "(" * n + "k + 3" + ")" * n + "; }\n")


def struct_chain(n: int) -> str:
    """n struct declarations, each holding the previous one; main builds and reads two links."""
    decls = ["struct S0 { v: int }"] + [f"struct S{i} {{ v: int, next: S{i - 1} }}" for i in range(1, n)]
    return ("\n".join(decls) + "\nfn deepest(s: S" + str(n - 1) + ") -> [] int { return s.v; }\n"
            "fn main(world: World) -> [] int { release(world); let s = S2 { v: 2, next: S1 { v: 40, next: S0 { v: 1 } } };"
            " return s.next.v + s.v + s.next.next.v; }\n")


def test_a_sum_of_10000_terms_runs(jit_worker):
    assert run_status(sum_of_terms(N), jit_worker) == 7


def test_an_else_if_chain_of_10000_branches_runs(jit_worker):
    assert run_status(else_if_chain(N), jit_worker) == ((N - 2) % 97 + 2) * 1000 % 256


def test_10000_nested_parentheses_run(jit_worker):
    assert run_status(nested_parens(N), jit_worker) == 7


def test_a_chain_of_10000_structs_runs(jit_worker):
    assert run_status(struct_chain(N), jit_worker) == 43


def test_a_struct_literal_nested_10000_deep_compiles():
    """Ten thousand nested literals of ten thousand struct types: checked and lowered."""
    n = N
    decls = ["struct S0 { v: int }"] + [f"struct S{i} {{ v: int, next: S{i - 1} }}" for i in range(1, n)]
    literal = "".join(f"S{i} {{ v: {i}, next: " for i in range(n - 1, 0, -1)) + "S0 { v: 0 }" + " }" * (n - 1)
    result = compile_text("\n".join(decls) + "\nfn main(world: World) -> [] int { release(world); let s = "
                          + literal + "; return s.next.v; }\n")
    assert result.ok, [d.message for d in result.diagnostics]
    assert f"i64 {n - 1}" in result.ir  # the outermost literal's own field


def peak_bytes(text: str, compile: bool) -> int:
    """Peak Python memory while checking (or compiling) text; tracemalloc follows every thread."""
    run = compile_text if compile else (lambda t: api.check_sources([SourceFile("limits.cho", t)]))
    run(MAIN0)  # imports and first-use caches are not the program's cost
    tracemalloc.start()
    try:
        result = run(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.ok, [d.message for d in result.diagnostics]
    return peak


SHAPES = pytest.mark.parametrize("shape", [sum_of_terms, else_if_chain, nested_parens, struct_chain],
                                 ids=["sum", "else-if", "parens", "structs"])


def grows_linearly(shape, small_n: int, compile: bool) -> None:
    """Four times the size costs at most six times the memory above a trivial program's (linear
    is 4, quadratic 16)."""
    base = peak_bytes(MAIN0, compile)
    small = peak_bytes(shape(small_n), compile) - base
    large = peak_bytes(shape(4 * small_n), compile) - base
    assert 0 < large < 6 * small, (base, small, large)


@pytest.mark.parametrize("shape", [sum_of_terms, struct_chain], ids=["sum", "structs"])
def test_checking_memory_grows_linearly_with_depth(shape):
    grows_linearly(shape, 500, compile=False)


@pytest.mark.slow
@SHAPES
@pytest.mark.parametrize("compile", [False, True], ids=["check", "compile"])
def test_memory_grows_linearly_with_depth(shape, compile):
    grows_linearly(shape, 1_000, compile=compile)


def test_nesting_beyond_the_stack_is_a_located_refusal_not_a_crash():
    rule, line, col, message = refused(nested_parens(200_000))
    assert rule == "internal" and "nests too deeply" in message
    assert line == 1 and col is not None and col > 1


def test_the_recursion_limit_is_restored_after_compiling():
    import sys

    before = sys.getrecursionlimit()
    compile_text(nested_parens(100))
    assert sys.getrecursionlimit() == before


# --------------------------------------------------------------------------- item 4: static budget


def static_program(body: str) -> str:
    return (f"static table: [int] {{\n{body}\n}}\n"
            "fn main(world: World) -> [] int { release(world); return table[0]; }\n")


@pytest.mark.parametrize("count", [1_000_000_000, 100_000_000, MAX_BYTES // 8 + 1])
def test_a_static_over_the_byte_budget_is_refused_before_allocating(count):
    tracemalloc.start()
    try:
        rule, line, col, message = refused(static_program(
            f"    let t = alloc_slice[static]({count}, 7);\n    return t;"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (rule, line, col) == ("static-item", 1, 8)
    assert "compile-time budget" in message and "MiB" in message
    assert peak < MAX_BYTES // 2, peak  # refused before the slice was made


def test_the_byte_budget_is_shared_by_every_static():
    half = MAX_BYTES // 8 // 2 + 1
    text = (f"static a: [int] {{ let t = alloc_slice[static]({half}, 1); return t; }}\n"
            f"static b: [int] {{ let t = alloc_slice[static]({half}, 2); return t; }}\n"
            "fn main(world: World) -> [] int { release(world); return a[0] + b[0]; }\n")
    rule, line, _, _ = refused(text)
    assert (rule, line) == ("static-item", 2)


def test_an_endless_static_is_refused_when_its_steps_run_out():
    rule, line, col, message = refused(static_program(
        "    let t = alloc_slice[static](1, 7);\n    var i = 0;\n    while true { i = i + 1; }\n    return t;"))
    assert (rule, line, col) == ("static-item", 1, 8)
    assert f"{FUEL:,} evaluation steps" in message


def test_a_static_within_the_budget_is_computed(jit_worker):
    text = textwrap.dedent("""\
        static squares: [int] {
            let t = alloc_slice[static](100000, 0);
            var i = 0;
            while i < len(t) { t[i] = i * i; i = i + 1; }
            return t;
        }
        static flags: [bool] {
            let t = alloc_slice[static](3, false);
            t[1] = true;
            return t;
        }
        static text: [byte] {
            let t = alloc_slice[static](4, byte_of(65));
            t[3] = byte_of(200);
            return t;
        }
        fn main(world: World) -> [] int {
            release(world);
            var r = 0;
            if flags[1] && !flags[2] { r = 1; }
            return squares[99999] % 1000 + squares[12] + r + int_of(text[3]) - int_of(text[0]);
        }
        """)
    assert run_status(text, jit_worker) == (99999 * 99999 % 1000 + 144 + 1 + 200 - 65) % 256


# --------------------------------------------------------------------------- item 5: source text


def compile_bytes(tmp_path: Path, data: bytes) -> api.CompileResult:
    path = tmp_path / "source.cho"
    path.write_bytes(data)
    return api.compile_sources(api.load_sources([path]))


def test_a_byte_that_is_not_utf8_in_a_string_literal_is_refused_where_it_stands(tmp_path):
    result = compile_bytes(tmp_path, b'fn main(world: World) -> [] int {\n    release(world);\n'
                                     b'    let s = "a\xffb";\n    return len(s);\n}\n')
    assert not result.ok
    d = result.diagnostics[0]
    assert (d.rule, d.span.line, d.span.column) == ("literal-form", 3, 15)
    assert "0xff" in d.message and "UTF-8" in d.message
    assert "\ufffd" in d.render() or "?" in d.render()  # renders without raising


def test_a_byte_that_is_not_utf8_in_a_comment_is_refused(tmp_path):
    result = compile_bytes(tmp_path, b"// caf\xe9\n" + MAIN0.encode())
    d = result.diagnostics[0]
    assert (d.rule, d.span.line, d.span.column) == ("unexpected-character", 1, 7)
    assert "0xe9" in d.message


def test_valid_utf8_including_a_written_replacement_character_is_kept(tmp_path, jit_worker):
    from cancho_kernel.compiler.backends import process

    data = ('fn main(world: World) -> [] int { release(world); let s = "caf\u00e9 \ufffd"; '
            'return len(s) * 10 + int_of(s[3]) % 10; }\n').encode()
    result = compile_bytes(tmp_path, data)
    assert result.ok, [d.message for d in result.diagnostics]
    run = jit_worker.run(result.ir, ["x"], b"", process.StdoutTarget.pipe(), process.RunLimits(timeout=60))
    assert run.exit_status == 9 * 10 + 0xC3 % 10  # 9 bytes; s[3] is the first byte of é


def test_a_byte_order_mark_is_refused_as_the_reference_refuses_it(tmp_path):
    result = compile_bytes(tmp_path, b"\xef\xbb\xbf" + MAIN0.encode())
    d = result.diagnostics[0]
    assert (d.rule, d.span.line, d.span.column) == ("unexpected-character", 1, 1)
    assert "byte order mark" in d.message


# --------------------------------------------------------------------------- item 3: long names


def test_an_identifier_of_1025_characters_runs(jit_worker):
    """LLVM cuts local names past 1,024 characters; two cut names then collided when the IR was
    parsed again ("multiple definition of local value")."""
    a, b, f = "a" * 1025, "a" * 1024 + "b", "f" * 2000
    text = (f"fn {f}(x: int) -> [] int {{ return x; }}\n"
            f"fn main(world: World) -> [] int {{ release(world); let {a} = 3; var {b} = 4; "
            f"region {a} {{ }} return {f}({a}) + {b}; }}\n")
    assert run_status(text, jit_worker) == 7
