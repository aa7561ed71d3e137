"""Multi-file programs: modules, imports, qualifiers, visibility and editions per file."""

from __future__ import annotations

from cancho_kernel.compiler import api
from cancho_kernel.compiler.backends import exe, process
from cancho_kernel.compiler.source import SourceFile

UTIL = """\
module util.io;
pub fn write_all[&r, &i](io: &!i Io, s: &r [byte]) -> [io_write] int { return write_bytes(io, s); }
pub fn twice(n: int) -> [] int { return helper(n) * 2; }
fn helper(n: int) -> [] int { return n; }
pub struct Pair { a: int, b: int }
struct Secret { n: int }
"""

MAIN = """\
import util.io;
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(ffi); release(fs); release(heap); release(args);
    let p = io.Pair { a: 1, b: 2 };
    borrow mut io as &!i in { io.write_all(i, "hi\\n"); }
    release(io);
    return io.twice(p.a + p.b);
}
"""


def compile_(*files: tuple[str, str]):
    return api.compile_sources([SourceFile(name, text) for name, text in files])


def rules(result) -> list[str]:
    return [d.rule for d in result.diagnostics]


def test_qualified_calls_types_and_a_qualifier_that_is_also_a_local(tmp_path):
    result = compile_(("main.cho", MAIN), ("util.cho", UTIL))
    assert result.ok, result.diagnostics
    out = tmp_path / "prog"
    exe.build_executable(result.ir, out)
    run = process.run_executable(out, [str(out)], b"", process.StdoutTarget.pipe(), process.RunLimits(timeout=10))
    assert (run.stdout, run.exit_status) == (b"hi\n", 6)


def test_import_as_binds_another_qualifier():
    main = MAIN.replace("import util.io;", "import util.io as u;").replace("io.Pair", "u.Pair") \
        .replace("io.write_all", "u.write_all").replace("io.twice", "u.twice")
    assert compile_(("main.cho", main), ("util.cho", UTIL)).ok


def test_files_order_does_not_matter():
    assert compile_(("util.cho", UTIL), ("main.cho", MAIN)).ok


def test_private_function_is_not_public():
    main = MAIN.replace("io.twice(p.a + p.b)", "io.helper(1)")
    r = compile_(("main.cho", main), ("util.cho", UTIL))
    assert rules(r) == ["not-public"]
    assert r.diagnostics[0].span.source.path == "main.cho"


def test_private_type_is_not_public_and_a_pub_signature_may_not_name_one():
    main = MAIN.replace("io.Pair { a: 1, b: 2 }", "io.Secret { n: 3 }").replace("p.a + p.b", "1")
    assert rules(compile_(("main.cho", main), ("util.cho", UTIL))) == ["not-public"]
    util = UTIL + "pub fn leak(s: Secret) -> [] int { let Secret { n } = s; return n; }\n"
    r = compile_(("main.cho", MAIN), ("util.cho", util))
    assert rules(r) == ["not-public"] and r.diagnostics[0].span.source.path == "util.cho"


def test_qualifier_without_import_and_unknown_module():
    main = MAIN.replace("import util.io;\n", "")
    assert rules(compile_(("main.cho", main), ("util.cho", UTIL)))[0] == "module-not-imported"
    # An import naming no module is an unknown name, as in the reference (docs/decisions.md).
    main = MAIN.replace("import util.io;", "import util.nothere;")
    r = compile_(("main.cho", main), ("util.cho", UTIL))
    assert rules(r)[0] == "unknown-name" and "no module `util.nothere`" in r.diagnostics[0].message


def test_two_files_share_one_module_namespace():
    more = "module util.io;\npub fn thrice(n: int) -> [] int { return helper(n) * 3; }\n"
    main = MAIN.replace("io.twice(p.a + p.b)", "io.thrice(p.a)")
    assert compile_(("main.cho", main), ("util.cho", UTIL), ("more.cho", more)).ok
    dup = "module util.io;\nfn helper(n: int) -> [] int { return n; }\n"
    assert rules(compile_(("main.cho", MAIN), ("util.cho", UTIL), ("dup.cho", dup))) == ["duplicate-declaration"]


def test_two_imports_may_not_bind_one_qualifier():
    other = "module other.io;\npub fn f() -> [] int { return 1; }\n"
    main = "import util.io;\nimport other.io;\n" + MAIN.replace("import util.io;\n", "")
    assert "duplicate-declaration" in rules(compile_(("main.cho", main), ("util.cho", UTIL), ("o.cho", other)))


def test_module_must_come_first():
    bad = "import util.io;\nmodule late.one;\n"
    assert rules(compile_(("main.cho", MAIN), ("util.cho", UTIL), ("bad.cho", bad))) == ["program-shape"]


def test_editions_are_per_file():
    # An edition-1 library may declare its own `flush_out`: the name is not a builtin there.
    lib = "module old.lib;\npub fn flush_out(n: int) -> [] int { return n + 1; }\n"
    main = """edition 5;
import old.lib;
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args, net, clock } = split(world);
    release(ffi); release(fs); release(heap); release(args); release(net); release(clock);
    var status = 0;
    borrow mut io as &!i in {
        match flush_out(i) { Done::Ok(n) => { status = n; } Done::Failed(e) => { status = e; } }
    }
    release(io);
    return lib.flush_out(status);
}
"""
    assert compile_(("main.cho", main), ("lib.cho", lib)).ok
    # ... while calling the builtin from an edition-1 file is `not-a-function`.
    old_main = main.replace("edition 5;\n", "").replace(", net, clock", "").replace(
        " release(net); release(clock);", "")
    assert "not-a-function" in rules(compile_(("main.cho", old_main), ("lib.cho", lib)))


def test_an_extern_is_callable_from_another_module_without_pub():
    lib = 'module c.lib;\nextern fn labs[&f](ffi: &f Ffi("libc"), n: int) -> [ffi("libc")] int;\n'
    main = """import c.lib;
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(fs); release(heap); release(args);
    let libc = narrow(ffi, "libc");
    var n = 0;
    borrow libc as &f in { n = lib.labs(f, 0 - 3); }
    release(libc);
    return n;
}
"""
    assert compile_(("main.cho", main), ("lib.cho", lib)).ok
