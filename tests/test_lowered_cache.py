"""Lowered code kept per function instance (compiler/codegen/fncache.py): editing one function
lowers only it again, and every change a function's text depends on is seen — a callee's
signature, a type's layout, a static's value, the edition, a std module's text, the compiler
version — while the IR is the same with and without the cache."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from cancho_kernel.compiler import api, resolve
from cancho_kernel.compiler.modcache import ModuleCache
from cancho_kernel.compiler.source import SourceFile
from cancho_kernel.kernel.session import Session

ROOT = Path(__file__).resolve().parent.parent

PRINT_MAIN = """import std.io;
import std.fmt;

fn main(world: World) -> [] int {{
    let Split {{ io, ffi, fs, heap, args }} = split(world);
    release(ffi);
    release(fs);
    release(heap);
    release(args);
    var seed = 0;  // a variable, so the calls below are not evaluated while compiling
    borrow mut io as &!i in {{
        region line {{
            let out = alloc_slice[line](32, byte_of(0));
            var at = fmt.put_int(out, 0, {expr});
            at = fmt.put(out, at, "\\n");
            io.write_all(i, out[0..at]);
        }}
    }}
    release(io);
    return 0;
}}
"""


class Lowered:
    """What one compile lowered afresh (by LLVM name), read from the cache's counters."""

    def __init__(self, cache: ModuleCache) -> None:
        self.cache = cache
        self.seen = Counter(cache.lowered.stats.lowered)

    def since(self) -> set[str]:
        now = Counter(self.cache.lowered.stats.lowered)
        got = {name for name in now if now[name] > self.seen[name]}
        self.seen = now
        return got


def compile_text(text: str, cache: ModuleCache | None) -> api.CompileResult:
    res = api.compile_sources([SourceFile("main.cho", text)], cache)
    assert res.ok, res.diagnostics
    return res


def fresh_ir(text: str) -> str:
    return compile_text(text, None).ir


def program(helpers: str, expr: str) -> str:
    return helpers + PRINT_MAIN.format(expr=expr)


def user_names(names: set[str]) -> set[str]:
    return {n for n in names if not n.startswith("lexs_std.")}


HELPERS = """fn scale(n: int) -> [] int {
    return n * 3;
}

fn twice(n: int) -> [] int {
    return scale(n) + scale(n);
}

fn unrelated(n: int) -> [] int {
    return 7 + n;
}
"""


def test_editing_a_body_lowers_only_that_function() -> None:
    cache = ModuleCache(max_programs=0)
    seen = Lowered(cache)
    text = program(HELPERS, "twice(2 + seed) + unrelated(seed)")
    first = compile_text(text, cache)
    assert {"lexs_main", "lexs_scale", "lexs_twice", "lexs_unrelated", "lexs_std.fmt.put_int"} <= seen.since()
    again = compile_text(text, cache)
    assert again.ir == first.ir and seen.since() == set()
    edited = program(HELPERS.replace("n * 3", "n * 4"), "twice(2 + seed) + unrelated(seed)")
    out = compile_text(edited, cache)
    assert seen.since() == {"lexs_scale"}  # its callers and std kept: the signature is unchanged
    assert out.ir == fresh_ir(edited) != first.ir


def test_a_kernel_cell_edit_lowers_only_the_edited_function() -> None:
    """The benchmark's edited std cell, through the session as the kernel compiles it."""
    from benchmarks.cell_latency import std_cell

    s = Session()
    seen = Lowered(s.module_cache)
    for k in (3, 4):
        out = s.process(s.new_source(std_cell(k)), compile=True)
        assert out.ok
        s.commit(out)
        lowered = seen.since()
    assert lowered == {"lexs_scale"}
    assert out.ir == fresh_ir(std_cell(4))


def test_a_changed_signature_relowers_its_unchanged_callers() -> None:
    """`one` becomes generic: `twice`'s text is the same, but it now calls `lexs_one[int]`."""
    plain = "fn one(n: int) -> [] int {\n    return n;\n}\n\nfn twice(n: int) -> [] int {\n    return one(n) + one(n);\n}\n"
    generic = plain.replace("fn one(n: int) -> [] int", "fn one[T](n: T) -> [] T")
    cache = ModuleCache(max_programs=0)
    seen = Lowered(cache)
    compile_text(program(plain, "twice(5)"), cache)
    seen.since()
    out = compile_text(program(generic, "twice(5)"), cache)
    lowered = seen.since()
    assert {"lexs_twice", "lexs_one[int]", "lexs_main"} <= lowered
    assert not any(n.startswith("lexs_std.") for n in lowered)  # std's texts depend on std alone
    assert out.ir == fresh_ir(program(generic, "twice(5)"))
    assert '@"lexs_one[int]"(i64' in out.ir


def test_a_changed_type_layout_relowers_the_functions_using_it() -> None:
    before = "struct P {\n    a: int,\n    b: int,\n}\n\nfn get_b(p: P) -> [] int {\n    return p.b;\n}\n"
    after = before.replace("a: int,", "a: int,\n    c: bool,")
    main_before = "get_b(P { a: 1, b: 2 })"
    main_after = "get_b(P { a: 1, c: true, b: 2 })"
    cache = ModuleCache(max_programs=0)
    seen = Lowered(cache)
    first = compile_text(program(before, main_before), cache)
    seen.since()
    out = compile_text(program(after, main_after), cache)
    assert "lexs_get_b" in seen.since()  # its text is unchanged, the field's place is not
    assert out.ir == fresh_ir(program(after, main_after)) != first.ir


def test_a_static_whose_value_changes_relowers_its_readers() -> None:
    """A static's bytes come from running a function at compile time: editing that function's
    body changes what the static's readers are lowered against."""
    def helpers(n: int) -> str:
        return ("fn fill() -> [] int {\n    return %d;\n}\n\n" % n
                + "static table: [int] {\n    let t = alloc_slice[static](fill(), 0);\n    return t;\n}\n\n"
                + "fn count() -> [] int {\n    return len(table);\n}\n")

    cache = ModuleCache(max_programs=0)
    seen = Lowered(cache)
    first = compile_text(program(helpers(3), "count()"), cache)
    seen.since()
    out = compile_text(program(helpers(5), "count()"), cache)
    assert "lexs_count" in seen.since()
    assert out.ir == fresh_ir(program(helpers(5), "count()")) != first.ir


QUIET_MAIN = """import std.fmt;

fn main(world: World) -> [] int {
    release(world);
    var at = 0;
    var one = 1;  // a variable: `twice(1)` would be evaluated while compiling
    region line {
        let out = alloc_slice[line](32, byte_of(0));
        at = fmt.put_int(out, 0, twice(one));
    }
    return at;
}
"""


def test_an_edition_change_relowers_the_program_and_not_std() -> None:
    text = HELPERS + QUIET_MAIN
    cache = ModuleCache(max_programs=0)
    seen = Lowered(cache)
    compile_text(text, cache)
    seen.since()
    out = compile_text("edition 2;\n" + text, cache)
    lowered = seen.since()
    assert {"lexs_main", "lexs_twice", "lexs_scale"} <= lowered
    assert user_names(lowered) == lowered
    assert out.ir == fresh_ir("edition 2;\n" + text)


def test_a_new_compiler_version_reuses_nothing() -> None:
    text = program(HELPERS, "twice(1 + seed)")
    cache = ModuleCache(max_programs=0, version="compiler one")
    seen = Lowered(cache)
    first = compile_text(text, cache)
    everything = seen.since()
    cache.version = "compiler two"
    again = compile_text(text, cache)
    assert seen.since() == everything and again.ir == first.ir


def test_a_std_module_edit_relowers_its_functions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    std = tmp_path / "std"
    std.mkdir()
    module = ("module std.a;\n\npub fn one(n: int) -> [] int {\n    return %d + n;\n}\n\n"
              "pub fn other(n: int) -> [] int {\n    return 9 + n;\n}\n")
    (std / "a.cho").write_text(module % 1)
    monkeypatch.setattr(resolve, "STD_DIR", std)
    text = ("import std.a;\n\nfn main(world: World) -> [] int {\n    release(world);\n"
            "    var seed = 0;\n    return a.one(seed) + a.other(seed);\n}\n")
    cache = ModuleCache(max_programs=0)
    seen = Lowered(cache)
    first = compile_text(text, cache)
    assert {"lexs_std.a.one", "lexs_std.a.other", "lexs_main"} <= seen.since()
    (std / "a.cho").write_text(module % 2)
    out = compile_text(text, cache)
    assert {"lexs_std.a.one", "lexs_std.a.other", "lexs_main"} <= seen.since()
    assert out.ir == fresh_ir(text) != first.ir


def test_the_cache_is_bounded() -> None:
    cache = ModuleCache(max_programs=0, max_lowered=3)
    compile_text(program(HELPERS, "twice(1 + seed) + unrelated(seed)"), cache)
    assert len(cache.lowered) == 3


def corpus() -> list[list[Path]]:
    progs = [[p] for p in sorted((ROOT / "tests" / "conformance").rglob("*.cho"))]
    for d in ("programs", "split_programs"):
        progs += [[p] for p in sorted((ROOT / "tests" / d).glob("*.cho"))]
    progs += [[p] for p in sorted((ROOT / "examples").glob("*.cho"))]
    progs += [sorted(d.glob("*.cho")) for d in sorted((ROOT / "examples").iterdir()) if d.is_dir()]
    return [p for p in progs if p]


def test_the_corpus_lowers_to_the_same_ir_from_kept_functions() -> None:
    """Every accepted program of the corpus: the IR lowered afresh, with a cache shared by the
    whole corpus (std functions kept from earlier programs) and again all from kept records."""
    from cancho_kernel.compiler.check.program import check_program
    from cancho_kernel.compiler.codegen.lower import lower_program

    progs = corpus()
    assert len(progs) > 250
    cache = ModuleCache(max_programs=0)
    accepted = 0
    for paths in progs:
        sources = api.load_sources(paths)
        want = api.compile_sources(sources)
        if not want.ok:
            continue
        accepted += 1
        assert api.compile_sources(sources, cache).ir == want.ir, paths
        diags, prog = api.run_deep(lambda: check_program(sources, cache))
        misses = cache.lowered.stats.misses
        ir, ds = api.run_deep(lambda: lower_program(prog, cache=cache))
        assert not diags and not ds and ir == want.ir, paths
        assert cache.lowered.stats.misses == misses, paths  # all put back, none lowered
    assert accepted > 100 and cache.lowered.stats.hits > 0


def test_two_named_types_meeting_on_one_name_stay_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Named struct types are named by a short digest of their body; should two bodies meet on
    one name, the second takes a suffix instead of sharing the first's body."""
    from llvmlite import ir

    from cancho_kernel.compiler.backends import native
    from cancho_kernel.compiler.check.typetable import TypeTable
    from cancho_kernel.compiler.codegen import layout

    monkeypatch.setattr(layout, "short_digest", lambda text, width=6: "same")
    lay = layout.Layout(TypeTable(), native.data_layout(), ir.Context())
    wide = lay._struct([ir.IntType(64)] * 20, "rec")
    narrow = lay._struct([ir.IntType(8)] * 20, "rec")
    again = lay._struct([ir.IntType(64)] * 20, "rec")
    assert (wide.name, narrow.name) == ("rec.same", "rec.same.1") and again is wide
    assert [str(t) for t in narrow.elements] == ["i8"] * 20


def test_kept_texts_that_disagree_make_the_module_lowered_afresh() -> None:
    """A kept record naming a global with another text than the module's (as a C symbol
    declared with another type in another program would) is not used: the whole module is
    lowered afresh, and the IR is the uncached one."""
    import dataclasses

    cache = ModuleCache(max_programs=0)
    seen = Lowered(cache)
    compile_text(program(HELPERS, "twice(2 + seed)"), cache)
    seen.since()
    entries = cache.lowered._data  # the records, by key
    key = next(k for k, rec in entries.items() if rec.text.startswith('define internal i64 @"lexs_scale"'))
    entries[key] = dataclasses.replace(entries[key], globals=(("lexs_argc", '@"lexs_argc" = internal global i64 1'),))
    edited = program(HELPERS.replace("return scale(n) + scale(n);", "return scale(n) * 2;"), "twice(2 + seed)")
    from cancho_kernel.compiler.check.program import check_program
    from cancho_kernel.compiler.codegen.lower import KeptTextsDisagree, ModuleLowering, lower_program

    sources = [SourceFile("main.cho", edited)]
    diags, prog = api.run_deep(lambda: check_program(sources, cache))
    assert not diags
    with pytest.raises(KeptTextsDisagree):
        api.run_deep(lambda: ModuleLowering(prog, cache=cache).lower())
    ir, ds = api.run_deep(lambda: lower_program(prog, cache=cache))
    assert not ds and ir == fresh_ir(edited)
    assert compile_text(edited, cache).ir == ir
