"""The module cache (compiler/modcache.py): std modules parsed and checked once, accepted programs
kept by content, and every change a result depends on seen (std text, edition, compiler version,
a user module a program or a std module depends on)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest

from cancho_kernel.compiler import api, resolve
from cancho_kernel.compiler.diagnostics import Rule
from cancho_kernel.compiler.modcache import ModuleCache
from cancho_kernel.compiler.source import SourceFile
from cancho_kernel.kernel.session import Session

ROOT = Path(__file__).resolve().parent.parent

STD_A = "module std.a;\n\npub fn one() -> [] int {\n    return {v};\n}\n"
STD_B = "module std.b;\n\nimport std.a;\n\npub fn two() -> [] int {\n    return a.one() + 1;\n}\n"
MAIN_B = """import std.b;

fn main(world: World) -> [] int {
    release(world);
    return b.two();
}
"""


def signature(res: api.CompileResult) -> tuple:
    """What must not depend on the cache: every diagnostic (rule, text, file, place) and the IR."""
    return ([(d.rule, d.message, d.span.source.path if d.span else d.file_hint,
              d.span.start if d.span else None) for d in res.diagnostics], res.ir)


@pytest.fixture
def std_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A std library of two small modules (`std.b` imports `std.a`) the compiler reads instead."""
    d = tmp_path / "std"
    d.mkdir()
    (d / "a.cho").write_text(STD_A.replace("{v}", "1"))
    (d / "b.cho").write_text(STD_B)
    monkeypatch.setattr(resolve, "STD_DIR", d)
    return d


def compile_main(text: str, cache: ModuleCache | None, extra: list[SourceFile] = ()) -> api.CompileResult:
    return api.compile_sources([SourceFile("main.cho", text), *extra], cache)


def test_std_modules_are_checked_once_and_the_result_is_the_same(std_dir: Path) -> None:
    cache = ModuleCache(max_programs=0)  # every compile goes through the module layer
    fresh = compile_main(MAIN_B, None)
    first = compile_main(MAIN_B, cache)
    assert cache.stats.module_hits == 0 and cache.sizes()["modules"] == 2
    again = compile_main(MAIN_B, cache)
    assert cache.stats.module_hits == 2 and cache.stats.parse_hits == 2
    assert fresh.ok and signature(fresh) == signature(first) == signature(again)
    assert not again.reused


def test_editing_a_std_dependency_is_seen(std_dir: Path) -> None:
    cache = ModuleCache()
    before = compile_main(MAIN_B, cache)
    assert before.ok
    # std.b is unchanged, but what it imports changed: neither may be answered from the cache.
    (std_dir / "a.cho").write_text(STD_A.replace("{v}", "41"))
    after = compile_main(MAIN_B, cache)
    assert after.ok and not after.reused
    assert after.ir != before.ir
    assert signature(after) == signature(compile_main(MAIN_B, None))
    assert "41" in after.ir or "42" in after.ir


def test_a_refused_std_edit_points_into_the_std_file(std_dir: Path) -> None:
    cache = ModuleCache()
    assert compile_main(MAIN_B, cache).ok
    (std_dir / "a.cho").write_text(STD_A.replace("{v}", "true"))
    res = compile_main(MAIN_B, cache)
    assert not res.ok
    assert {d.span.source.path for d in res.diagnostics if d.span} == {"<std>/a.cho"}
    assert signature(res) == signature(compile_main(MAIN_B, None))


def test_a_signature_change_in_a_dependency_rechecks_its_unchanged_dependent(std_dir: Path) -> None:
    cache = ModuleCache()
    assert compile_main(MAIN_B, cache).ok
    # std.a is well typed on its own; std.b, unchanged, now adds 1 to a bool.
    (std_dir / "a.cho").write_text(STD_A.replace("-> [] int", "-> [] bool").replace("{v}", "true"))
    res = compile_main(MAIN_B, cache)
    assert not res.ok
    assert {d.span.source.path for d in res.diagnostics if d.span} == {"<std>/b.cho"}
    assert signature(res) == signature(compile_main(MAIN_B, None))


def test_a_std_edition_change_is_seen(std_dir: Path) -> None:
    # `connect` is a builtin from edition 2 on: a std module declaring it is refused there.
    decl = "module std.a;\n\npub fn connect() -> [] int {\n    return 1;\n}\n"
    (std_dir / "a.cho").write_text(decl)
    main = "import std.a;\n\nfn main(world: World) -> [] int {\n    release(world);\n    return a.connect();\n}\n"
    cache = ModuleCache()
    assert compile_main(main, cache).ok
    (std_dir / "a.cho").write_text("edition 2;\n" + decl)
    res = compile_main(main, cache)
    redeclared = [d for d in res.diagnostics if d.rule == Rule.BUILTIN_REDECLARED]
    assert [d.span.source.path for d in redeclared] == ["<std>/a.cho"]
    assert signature(res) == signature(compile_main(main, None))


def test_module_keys_hold_the_edition(std_dir: Path) -> None:
    from cancho_kernel.compiler.parser import parse_file

    cache = ModuleCache(version="v")
    f, _ = parse_file(SourceFile("<std>/a.cho", STD_A.replace("{v}", "1")))
    k1 = cache.module_key("std.a", f, {})
    f.edition = 2  # same text, another edition: another key
    assert cache.module_key("std.a", f, {}) != k1


def test_a_new_compiler_version_answers_nothing_old(std_dir: Path) -> None:
    cache = ModuleCache(version="compiler-1")
    first = compile_main(MAIN_B, cache)
    assert compile_main(MAIN_B, cache).reused
    hits = (cache.stats.parse_hits, cache.stats.module_hits, cache.stats.program_hits)
    cache.version = "compiler-2"
    again = compile_main(MAIN_B, cache)
    assert not again.reused
    assert (cache.stats.parse_hits, cache.stats.module_hits, cache.stats.program_hits) == hits
    assert signature(again) == signature(first)


def test_a_user_module_shadowing_a_std_dependency_is_used(std_dir: Path) -> None:
    cache = ModuleCache()
    assert compile_main(MAIN_B, cache).ok  # std.a and std.b checked and cached
    # The program declares `std.a` itself: the cached std.b (checked against the std file) must
    # not be taken, and std.b is checked against the user's module.
    own_a = SourceFile("own_a.cho", "module std.a;\n\npub fn one() -> [] bool {\n    return true;\n}\n")
    res = compile_main(MAIN_B, cache, [own_a])
    assert not res.ok
    assert {d.span.source.path for d in res.diagnostics if d.span} == {"<std>/b.cho"}
    assert signature(res) == signature(compile_main(MAIN_B, None, [own_a]))
    ok_a = SourceFile("own_a.cho", "module std.a;\n\npub fn one() -> [] int {\n    return 9;\n}\n")
    res = compile_main(MAIN_B, cache, [ok_a])
    assert res.ok and signature(res) == signature(compile_main(MAIN_B, None, [ok_a]))


def test_a_user_module_edit_is_seen_by_its_dependents(std_dir: Path) -> None:
    main = "import util;\nimport std.b;\n\nfn main(world: World) -> [] int {\n    release(world);\n" \
           "    return util.three() + b.two();\n}\n"

    def util(body: str) -> SourceFile:
        return SourceFile("util.cho", f"module util;\n\npub fn three() -> [] int {{\n    return {body};\n}}\n")

    cache = ModuleCache()
    first = compile_main(main, cache, [util("3")])
    assert first.ok and compile_main(main, cache, [util("3")]).reused
    edited = compile_main(main, cache, [util("30")])
    assert edited.ok and not edited.reused and edited.ir != first.ir
    refused = compile_main(main, cache, [util("false")])
    assert not refused.ok
    assert {d.span.source.path for d in refused.diagnostics if d.span} == {"util.cho"}


def test_diagnostics_of_a_program_using_cached_modules_point_at_its_files(std_dir: Path) -> None:
    cache = ModuleCache()
    assert compile_main(MAIN_B, cache).ok
    bad = MAIN_B.replace("b.two()", "b.two(1)")
    res = compile_main(bad, cache)
    assert not res.ok and cache.stats.module_hits >= 2
    assert {d.span.source.path for d in res.diagnostics if d.span} == {"main.cho"}
    assert signature(res) == signature(compile_main(bad, None))


def test_the_cache_is_bounded(std_dir: Path) -> None:
    cache = ModuleCache(max_parsed=1, max_modules=1, max_programs=1)
    for v in range(3):
        (std_dir / "a.cho").write_text(STD_A.replace("{v}", str(v + 1)))
        res = compile_main(MAIN_B, cache)
        assert signature(res) == signature(compile_main(MAIN_B, None))
    assert cache.sizes() == {"parsed": 1, "modules": 1, "programs": 1}


def test_threads_share_one_cache() -> None:
    cache = ModuleCache(max_programs=0)
    text = (ROOT / "benchmarks" / "cell_latency.py").read_text()
    assert "import std.vec" in text
    from benchmarks.cell_latency import std_cell

    expected = signature(api.compile_sources([SourceFile("c.cho", std_cell(3))]))
    got: list[tuple] = []

    def work() -> None:
        got.append(signature(api.compile_sources([SourceFile("c.cho", std_cell(3))], cache)))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [expected] * 4


def corpus() -> list[list[Path]]:
    progs = [[p] for p in sorted((ROOT / "tests" / "conformance").rglob("*.cho"))]
    progs += [[p] for p in sorted((ROOT / "tests" / "programs").glob("*.cho"))]
    progs += [[p] for p in sorted((ROOT / "examples").glob("*.cho"))]
    progs += [sorted(d.glob("*.cho")) for d in sorted((ROOT / "examples").iterdir()) if d.is_dir()]
    return [p for p in progs if p]


def test_the_corpus_compiles_the_same_with_and_without_the_cache() -> None:
    progs = corpus()
    assert len(progs) > 250
    modules_only = ModuleCache(max_programs=0)
    whole = ModuleCache()
    for paths in progs:
        sources = api.load_sources(paths)
        want = signature(api.compile_sources(sources))
        assert signature(api.compile_sources(sources, modules_only)) == want, paths
        assert signature(api.compile_sources(sources, whole)) == want, paths
        again = api.compile_sources(sources, whole)
        assert signature(again) == want and again.reused == (want[1] is not None and not want[0]), paths
    assert modules_only.stats.module_hits > 0


# -- the kernel session ------------------------------------------------------------------------


def run_cell(s: Session, text: str):
    out = s.process(s.new_source(text), compile=True)
    s.commit(out)
    return out


def test_an_unchanged_cell_rerun_skips_check_and_lower() -> None:
    from benchmarks.cell_latency import std_cell

    s = Session()
    first = run_cell(s, std_cell(3))
    same = run_cell(s, std_cell(3))
    assert first.ok and same.ok and same.ir == first.ir
    assert s.module_cache.stats.program_hits == 1 and same.timings["lower"] == 0.0
    edited = run_cell(s, std_cell(4))
    assert edited.ok and edited.ir != first.ir
    assert s.module_cache.stats.program_hits == 1 and s.module_cache.stats.module_hits > 0
    assert edited.ir == api.compile_sources([SourceFile("c.cho", std_cell(4))]).ir


def test_a_session_edition_change_is_seen() -> None:
    cell = "fn connect() -> [] int {\n    return 1;\n}\n"
    s = Session()
    assert run_cell(s, cell).ok
    assert run_cell(s, "edition 2;\n").ok
    out = run_cell(s, cell)
    assert [d.rule for d in out.diagnostics] == [Rule.BUILTIN_REDECLARED]


def test_a_refused_rerun_points_into_the_new_cell() -> None:
    s = Session()
    text = "fn main(world: World) -> [] int {\n    release(world);\n    return true;\n}\n"
    a = run_cell(s, text)
    b = run_cell(s, text)
    assert not a.ok and not b.ok
    assert a.diagnostics[0].span.source.path != b.diagnostics[0].span.source.path
    assert b.diagnostics[0].span.source.path == b.source.path


def test_an_edited_session_item_is_seen_by_an_unchanged_main() -> None:
    s = Session()
    main = "fn main(world: World) -> [] int {\n    release(world);\n    return f();\n}\n"
    assert run_cell(s, "fn f() -> [] int {\n    return 1;\n}\n").ok
    first = run_cell(s, main)
    assert run_cell(s, "fn f() -> [] int {\n    return 2;\n}\n").ok
    second = run_cell(s, main)
    assert first.ok and second.ok and first.ir != second.ir


def test_the_kernel_warm_up_checks_the_common_std_modules_into_the_session_cache() -> None:
    """The kernel's warm-up fills its session's cache, so the first cell importing std.io and
    std.fmt checks neither again, and compiles to the same IR as a session that never warmed."""
    from cancho_kernel.kernel.session import WARM_STD, warm_compiler

    cell = SourceFile("cell[1]", "import std.io;\nimport std.fmt;\n"
                      "fn main(world: World) -> [] int {\n    release(world);\n    return 0;\n}\n")
    warmed = Session()
    warm_compiler(warmed.module_cache)
    assert {"io", "fmt"} <= set(WARM_STD)
    before = dataclasses.replace(warmed.module_cache.stats)  # a snapshot
    out = warmed.process(cell, compile=True)
    after = warmed.module_cache.stats
    assert out.ok and after.module_hits - before.module_hits >= 2
    assert after.module_misses == before.module_misses
    cold = Session()
    assert cold.process(SourceFile("cell[1]", cell.text), compile=True).ir == out.ir
