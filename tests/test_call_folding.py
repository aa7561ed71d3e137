"""Pure calls on constants evaluated while compiling (check/callfold.py; the reference's
compile-time.md §3–§5): what the IR and the authority report show, the budget's edge, what is
declined, and that a kept lowering never outlives the callee value it embedded."""

from __future__ import annotations

import re

from cancho_kernel.compiler import api
from cancho_kernel.compiler.authority import authority_report
from cancho_kernel.compiler.modcache import ModuleCache
from cancho_kernel.compiler.source import SourceFile

FIB = """
fn fib(n: int) -> [] int {
    if n < 2 {
        return n;
    }
    return fib(n - 1) + fib(n - 2);
}
"""


def program(body: str, extra: str = FIB) -> list[SourceFile]:
    main = f"fn main(world: World) -> [] int {{\n    release(world);\n    {body}\n}}\n"
    return [SourceFile("folding.cho", extra + main)]


def main_text(ir: str) -> str:
    """The body of the program's own `main` (`lexs_main`)."""
    start = ir.index('define internal i64 @"lexs_main"')
    return ir[start:ir.index("\n}\n", start)]


def test_fib_23_is_evaluated_and_fib_24_is_a_call() -> None:
    folded = api.compile_sources(program("return fib(23) % 256;"))
    assert folded.ok, folded.diagnostics
    body = main_text(folded.ir)
    assert "28657" in body and "lexs_fib" not in body
    assert authority_report(folded.program).folded_calls == 1
    kept = api.compile_sources(program("return fib(24) % 256;"))
    assert kept.ok, kept.diagnostics
    assert re.search(r'call i64 @"lexs_fib', main_text(kept.ir))
    assert authority_report(kept.program).folded_calls == 0


def test_a_call_with_a_run_time_argument_or_an_impure_callee_is_not_evaluated() -> None:
    src = program("var n = 3;\n    n = n + 1;\n    return fib(n);")
    got = api.compile_sources(src)
    assert got.ok and re.search(r'call i64 @"lexs_fib', main_text(got.ir))
    # A body that builds memory (a region) is declined: the call stays, and so does its trap.
    extra = """
fn first() -> [] int {
    var v = 0;
    region r {
        let s = alloc_slice[r](2, 7);
        v = s[5];
    }
    return v;
}
"""
    declined = api.compile_sources(program("return first();", extra))
    assert declined.ok, declined.diagnostics
    assert re.search(r'call i64 @"lexs_first', main_text(declined.ir))


def test_an_explicit_trap_is_left_to_run_time() -> None:
    extra = """
fn check(ok: bool) -> [] int {
    if ok {
        return 0;
    }
    return trap();
}
"""
    got = api.compile_sources(program("return check(false);", extra))
    assert got.ok, got.diagnostics


def test_a_kept_lowering_follows_the_callee_it_evaluated() -> None:
    """The caller's text embeds the callee's value: editing only the callee must change it,
    though the caller's own text (its cache key's body) is the same."""
    cache = ModuleCache()
    first = api.compile_sources(program("return seven();", "fn seven() -> [] int { return 7; }\n"), cache)
    second = api.compile_sources(program("return seven();", "fn seven() -> [] int { return 8; }\n"), cache)
    assert first.ok and second.ok
    assert "ret i64 7" in main_text(first.ir)
    assert "ret i64 8" in main_text(second.ir)
