"""`--target wasm32-wasip1` (issue 14, item 4; compiler/target.py, codegen/wasi.py,
backends/wasm.py).

Without a toolchain: the per-target catalogue (names real builtins, the host lacks nothing), the
refusals (`unsupported-on-target` at the reaching function, once per family, only reachable
code), the command line (spellings, usage errors), and the module's IR (wasm32 triple and
layout, wasi-libc's 32-bit signatures, the entry wasi-libc calls, no x86 trap).

With the toolchain (clang, wasm-ld, wasi-libc, compiler-rt's wasm32 builtins) and the wasmtime
package: hello, the base64 example (std.io, std.flags) and a std.map/std.fmt word counter build
as modules and run with the same stdout, stderr and status as the native executable; a trap is
status 134 and loses the unflushed stdout as a native trap does; checked arithmetic links
(compiler-rt) and traps on overflow. These skip where the toolchain is absent, except under CI
(`CI` set), which installs it (.ci/run): there they fail.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from cancho_kernel import cli
from cancho_kernel.compiler import api, diagnostics
from cancho_kernel.compiler.backends import native, wasm
from cancho_kernel.compiler.check.builtins import BUILTIN_EDITION, BUILTINS
from cancho_kernel.compiler.codegen.wasi import WASI_C
from cancho_kernel.compiler.source import SourceFile
from cancho_kernel.compiler.target import (HOST, WASI_BUILT, WASI_GAPS, WASM32_WASIP1, Gap,
                                           UnknownTarget, parse_target, refusal_for)

REPO = Path(__file__).resolve().parent.parent
HELLO = REPO / "examples" / "hello.cho"
BASE64 = REPO / "examples" / "base64" / "base64.cho"
WORDS = REPO / "tests" / "wasm_programs" / "words.cho"
FILES = REPO / "tests" / "wasm_programs" / "files.cho"
SORT = REPO / "examples" / "sort" / "sort.cho"
FLUSH = REPO / "tests" / "programs" / "flush_status.cho"
CLI = [sys.executable, "-m", "cancho_kernel.cli"]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
TRAP_STATUS = 134


def src(text: str, name: str = "t.cho") -> list[SourceFile]:
    return [SourceFile(name, text)]


def check_wasi(text: str) -> list[diagnostics.Diagnostic]:
    return api.check_sources(src(text), target=WASM32_WASIP1).diagnostics


def cancho(*args: str, stdin: bytes = b"", cwd: Path | None = None,
           env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], input=stdin, capture_output=True, cwd=cwd,
                          env=env or ENV, timeout=300)


# ----------------------------------------------------------------------------- the catalogue


def test_the_catalogue_names_only_real_builtins() -> None:
    assert set(WASI_GAPS) <= set(BUILTIN_EDITION), set(WASI_GAPS) - set(BUILTIN_EDITION)
    assert WASI_BUILT <= set(BUILTIN_EDITION), WASI_BUILT - set(BUILTIN_EDITION)
    assert not WASI_BUILT & set(WASI_GAPS)


def test_what_is_built_for_wasi_is_implemented_for_the_host() -> None:
    assert all(BUILTINS[n].supported for n in WASI_BUILT), \
        sorted(n for n in WASI_BUILT if not BUILTINS[n].supported)


def test_every_builtin_is_on_one_side_for_wasi_and_the_host_lacks_nothing() -> None:
    for name in BUILTIN_EDITION:
        assert refusal_for(name, HOST) is None
        refusal = refusal_for(name, WASM32_WASIP1)
        assert (refusal is None) == (name in WASI_BUILT), name
        if refusal is not None:
            assert refusal.gap is WASI_GAPS.get(name)


def test_the_reference_families_are_gaps() -> None:
    assert WASI_GAPS["spawn"] is Gap.THREADS and WASI_GAPS["join"] is Gap.THREADS
    assert WASI_GAPS["dir_own_mode"] is Gap.PERMISSIONS and WASI_GAPS["dir_mode"] is Gap.PERMISSIONS
    assert WASI_GAPS["dir_rename_new"] is Gap.NO_REPLACE_RENAMES
    assert "dir_rename" not in WASI_GAPS  # the replacing rename is WASI's own
    assert WASI_GAPS["exec_spawn"] is Gap.PROCESSES and WASI_GAPS["tcp_connect"] is Gap.SOCKETS


def test_target_spellings() -> None:
    host = native.host_triple()
    assert parse_target("wasm32-wasip1", host) == WASM32_WASIP1
    assert parse_target("wasm32-wasi", host) == WASM32_WASIP1
    assert not parse_target(host, host).is_wasi
    with pytest.raises(UnknownTarget, match="wasm32-wasip1"):
        parse_target("riscv64-unknown-linux-gnu", host)


# ----------------------------------------------------------------------------- refusals

SPARE = """
edition 5;
fn spare(clock: Clock) -> [] int {
    borrow clock as &c in {
        let a = fork_clock(c);
        let b = fork_clock(c);
        release(a);
        release(b);
    }
    release(clock);
    return 0;
}
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args, net, clock } = split(world);
    release(io); release(ffi); release(fs); release(heap); release(args); release(net);
    return MAIN_BODY;
}
"""


def test_a_gap_is_refused_at_the_reaching_function_once_per_family() -> None:
    diags = check_wasi(SPARE.replace("MAIN_BODY", "spare(clock)"))
    assert [d.rule for d in diags] == [diagnostics.Rule.UNSUPPORTED_ON_TARGET]
    (d,) = diags
    assert "`spare` uses `fork_clock`, and threads do not exist on `wasm32-wasip1`" in d.message
    assert d.span is not None and d.span.line == 3  # `fn spare`
    assert api.check_sources(src(SPARE.replace("MAIN_BODY", "spare(clock)"))).ok  # the host


def test_unreachable_code_is_not_refused() -> None:
    text = SPARE.replace("MAIN_BODY", "0").replace("release(net);", "release(net); release(clock);")
    assert check_wasi(text) == []


def test_what_is_not_carried_yet_is_refused_and_a_gap_speaks_first() -> None:
    lister = """
edition 6;
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args, net, clock, signals } = split(world);
    release(io); release(ffi); release(heap); release(args); release(net); release(signals);
    var n = 0;
    borrow fs as &f in {
        match open_dir(f, "/tmp") {
            DirOpened::Ok(dir) => { n = dir_close(dir); }
            DirOpened::Failed(e) => { n = e; }
        }
    }
    release(fs);
    MORE
    release(clock);
    return n;
}
"""
    (d,) = check_wasi(lister.replace("MORE", ""))  # open_dir and dir_close: one refusal, the first
    assert d.rule is diagnostics.Rule.UNSUPPORTED_ON_TARGET
    assert "`main` uses `open_dir`, which cancho-kernel does not build for `wasm32-wasip1` yet" in d.message
    both_kinds = lister.replace("MORE", "borrow clock as &c in { let other = fork_clock(c); release(other); }")
    diags = check_wasi(both_kinds)
    assert [d.rule for d in diags] == [diagnostics.Rule.UNSUPPORTED_ON_TARGET], diags
    assert "`main` uses `fork_clock`, and threads do not exist" in diags[0].message


def test_check_command_with_a_target(tmp_path: Path) -> None:
    path = tmp_path / "spare.cho"
    path.write_text(SPARE.replace("MAIN_BODY", "spare(clock)"))
    refused = cancho("check", "--target", "wasm32-wasip1", "--output", "json", str(path))
    assert refused.returncode == 1
    assert b'"rule": "unsupported-on-target"' in refused.stdout
    assert cancho("check", str(path)).returncode == 0
    assert cancho("check", "--target", native.host_triple(), str(path)).returncode == 0


@pytest.mark.parametrize("args,words", [
    (["check", "--target", "sparc-sun-solaris"], b"unknown target `sparc-sun-solaris`"),
    (["run", "--target", "wasm32-wasip1", "--backend", "exe"], b"`--backend`"),
    (["build", "--target", "wasm32-wasip1", "-l", "m"], b"host library"),
    (["test", "--target", "wasm32-wasip1"], b"unknown option `--target`"),
    ([str(HELLO), "--target"], b"`--target` needs a target triple"),
    (["run", "--safe", "--target", "wasm32-wasip1"], b"refused in safe mode"),
])
def test_target_usage_errors(args: list[str], words: bytes) -> None:
    if args[0] == str(HELLO):  # the flag last, with no value
        args = ["check", *args]
    else:
        args = [*args, str(HELLO)]
    done = cancho(*args)
    assert done.returncode == 2, done.stderr
    assert words in done.stderr


# ----------------------------------------------------------------------------- the module's IR


def wasm_ir(path: Path) -> str:
    result = api.compile_sources(api.load_sources([path]), target=WASM32_WASIP1)
    assert result.ok, result.diagnostics
    return result.ir


def test_the_ir_is_wasm32_with_wasi_libc_signatures() -> None:
    ir_text = wasm_ir(WORDS)
    assert 'target triple = "wasm32-unknown-wasi"' in ir_text
    assert "p:32:32" in ir_text  # 32-bit pointers in the data layout
    assert 'define i32 @"__main_argc_argv"(' in ir_text and '@"main"(' not in ir_text
    assert "ud2" not in ir_text and '@"llvm.trap"()' in ir_text
    declared = [line for line in ir_text.splitlines() if line.startswith("declare")]
    for line in declared:
        name = line.split("@", 1)[1].split("(", 1)[0].strip('"')
        if name in WASI_C:
            assert "i64" not in line, f"a 64-bit size_t/int reaches wasi-libc: {line}"
    assert any('@"malloc"(i32' in line for line in declared)


def test_the_host_ir_is_unchanged_by_the_target_work() -> None:
    result = api.compile_sources(api.load_sources([HELLO]))
    assert 'define i32 @"main"(' in result.ir and "cancho.wasi." not in result.ir


def test_an_object_needs_no_toolchain(tmp_path: Path) -> None:
    out = tmp_path / "hello.o"
    done = cancho("build", "--target", "wasm32-wasip1", "--emit", "obj", "-o", str(out), str(HELLO))
    assert done.returncode == 0, done.stderr
    assert out.read_bytes()[:4] == b"\0asm"


# ----------------------------------------------------------------------------- toolchain missing


def test_a_missing_toolchain_is_an_environment_error(tmp_path: Path) -> None:
    for key, value, words in [("CLANG", "/nonexistent/clang", b"no `/nonexistent/clang` found"),
                              ("WASM_LD", "/nonexistent/wasm-ld", b"no `/nonexistent/wasm-ld` found"),
                              ("WASI_SYSROOT", str(tmp_path), b"no WASI libc")]:
        done = cancho("build", "--target", "wasm32-wasip1", "-o", str(tmp_path / "h.wasm"), str(HELLO),
                      env={**ENV, key: value})
        assert done.returncode == 3, (key, done.stderr)
        assert words in done.stderr and b"apt-get install" in done.stderr
        assert not (tmp_path / "h.wasm").exists()


def test_a_missing_runtime_is_an_environment_error(monkeypatch, capsys) -> None:
    monkeypatch.setattr(wasm, "runtime_available", lambda: False)
    assert cli.main(["run", "--target", "wasm32-wasip1", str(HELLO)]) == 3
    assert "no WASI runtime" in capsys.readouterr().err


# ----------------------------------------------------------------------------- built and run


def toolchain_or_skip() -> None:
    try:
        wasm.find_toolchain()
    except wasm.WasiToolchainMissing as missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI installs the WASI toolchain (.ci/run), yet: {missing}")
        pytest.skip(f"no WASI toolchain on this machine: {missing}")
    if not wasm.runtime_available():
        if os.environ.get("CI"):
            pytest.fail("CI installs the wasmtime package (.ci/run)")
        pytest.skip("the wasmtime package is not installed (pip install '.[wasm]')")


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """path -> (native executable, wasm module), each built once through the CLI."""
    toolchain_or_skip()
    root = tmp_path_factory.mktemp("wasm")
    made: dict[Path, tuple[Path, Path]] = {}

    def get(path: Path) -> tuple[Path, Path]:
        if path not in made:
            exe_path, module = root / path.stem, root / f"{path.stem}.wasm"
            for args in (["-o", str(exe_path)], ["--target", "wasm32-wasip1", "-o", str(module)]):
                done = cancho("build", *args, str(path))
                assert done.returncode == 0, done.stderr.decode()
            made[path] = (exe_path, module)
        return made[path]

    return get


def both(built: tuple[Path, Path], args: list[str], stdin: bytes, cwd: tuple[Path, Path] | None = None,
         grants: tuple[str, ...] = (), stdout=subprocess.PIPE) -> tuple:
    """The native executable and the module, run alike (the module through the runner `run`
    uses, with ``grants``); each in its own directory of ``cwd`` when given."""
    exe_path, module = built
    native_cwd, wasm_cwd = cwd or (None, None)
    native_run = subprocess.run([str(exe_path), *args], input=stdin, stdout=stdout, stderr=subprocess.PIPE,
                                cwd=native_cwd, timeout=60)
    wasm_run = subprocess.run([sys.executable, "-m", "cancho_kernel.compiler.backends.wasi_runner",
                               *(f"--dir={g}" for g in grants), str(module), exe_path.name, *args],
                              input=stdin, stdout=stdout, stderr=subprocess.PIPE, cwd=wasm_cwd, env=ENV,
                              timeout=120)
    return native_run, wasm_run


def test_hello_runs_as_a_wasi_module(builds) -> None:
    native_run, wasm_run = both(builds(HELLO), [], b"")
    assert wasm_run.stdout == native_run.stdout == b"Hello, world!\n"
    assert wasm_run.returncode == native_run.returncode == 0
    assert wasm_run.stderr == native_run.stderr == b""
    assert builds(HELLO)[1].read_bytes()[:4] == b"\0asm"


def test_run_command_with_the_target(tmp_path: Path) -> None:
    toolchain_or_skip()
    done = cancho("run", "--target", "wasm32-wasip1", str(HELLO), cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"Hello, world!\n", b"")
    assert list(tmp_path.iterdir()) == []  # built in a temporary directory, removed


def test_base64_example_agrees_on_random_input(builds) -> None:
    rng = random.Random(14)
    for size in (0, 1, 2, 3, 57, 76, 4095, 4096, 4097, 20_000):
        data = rng.randbytes(size)
        native_run, wasm_run = both(builds(BASE64), [], data)
        assert wasm_run.stdout == native_run.stdout and wasm_run.returncode == native_run.returncode == 0
        back_native, back_wasm = both(builds(BASE64), ["-d"], native_run.stdout)
        assert back_wasm.stdout == back_native.stdout == data
    native_run, wasm_run = both(builds(BASE64), ["--bogus"], b"")
    assert (wasm_run.returncode, wasm_run.stdout, wasm_run.stderr) == \
        (native_run.returncode, native_run.stdout, native_run.stderr)
    assert native_run.returncode != 0


def test_a_std_map_and_fmt_program_agrees(builds) -> None:
    rng = random.Random(7)
    vocabulary = [bytes(rng.choice(b"abcdefgh") for _ in range(rng.randint(1, 9))) for _ in range(300)]
    for count in (0, 1, 10, 5000):
        text = b" ".join(rng.choice(vocabulary) for _ in range(count)) + b"\n"
        native_run, wasm_run = both(builds(WORDS), [], text)
        assert wasm_run.stdout == native_run.stdout
        assert wasm_run.returncode == native_run.returncode == count % 256
    assert b"e0\n" in native_run.stdout  # the mean length, through std.fmt's float printing


TRAPS = """
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(ffi); release(fs); release(heap);
    var n = 0;
    borrow args as &a in { n = arg_count(a) - 1; }
    release(args);
    borrow mut io as &!i in { write_bytes(i, "lost with the buffer\\n"); }
    release(io);
    let big = 3037000500 + n;
    if n == 1 { return int_of("abc"[n + 5]); }
    if n == 2 { return big * big; }
    return (big * 3 + n * 1000) % 256;
}
"""


def test_traps_and_checked_arithmetic(builds, tmp_path: Path) -> None:
    path = tmp_path / "traps.cho"
    path.write_text(TRAPS)
    built = builds(path)
    native_run, wasm_run = both(built, [], b"")  # no trap: the product fits
    assert wasm_run.returncode == native_run.returncode == (3037000500 * 3) % 256
    assert wasm_run.stdout == native_run.stdout == b"lost with the buffer\n"
    for args in (["x"], ["x", "y"]):  # an index past the end; a multiply that overflows
        native_run, wasm_run = both(built, args, b"")
        assert native_run.returncode == -4  # SIGILL
        assert wasm_run.returncode == TRAP_STATUS
        assert wasm_run.stdout == native_run.stdout == b""  # unflushed stdout is lost on both
        assert b"trapped" in wasm_run.stderr


def test_exit_status_is_the_low_byte(builds, tmp_path: Path) -> None:
    path = tmp_path / "status.cho"
    path.write_text("fn main(world: World) -> [] int {\n    release(world);\n    return 300;\n}\n")
    native_run, wasm_run = both(builds(path), [], b"")
    assert wasm_run.returncode == native_run.returncode == 44


CLOCKS = """
edition 6;
import std.io;
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args, net, clock, signals } = split(world);
    release(ffi); release(fs); release(heap); release(args); release(net); release(signals);
    var code = 0;
    var wall = 0;
    borrow clock as &c in {
        let a = clock_ms(c);
        var spin = 0;
        while spin < 1000000 { spin = spin + 1; }
        let b = clock_ms(c);
        wall = clock_unix_ms(c);
        if b < a { code = 1; }  // the origin is unspecified (wasmtime: near 0)
    }
    release(clock);
    borrow mut io as &!i in { io.print_int(i, wall / 1000); io.newline(i); }
    release(io);
    return code + value_barrier(40) + 2;
}
"""


def test_clocks_and_value_barrier(builds, tmp_path: Path) -> None:
    import time

    path = tmp_path / "clocks.cho"
    path.write_text(CLOCKS)
    before = int(time.time())
    native_run, wasm_run = both(builds(path), [], b"")
    after = int(time.time())
    assert wasm_run.returncode == native_run.returncode == 42, wasm_run.stderr
    for run in (native_run, wasm_run):
        assert before - 1 <= int(run.stdout) <= after + 1  # wasi-libc's realtime clock, in seconds


def test_errno_table_matches_the_headers() -> None:
    """WASI's numbers (wasi-libc's headers) to Linux's (this host's `errno`), by name."""
    import errno
    import re

    from cancho_kernel.compiler.codegen.wasi import WASI_ERRNO_TO_LINUX

    api_h, values_h = Path("/usr/include/wasm32-wasi/wasi/api.h"), Path("/usr/include/wasm32-wasi/__errno_values.h")
    if not api_h.exists() or sys.platform != "linux":
        if os.environ.get("CI"):
            pytest.fail("CI installs wasi-libc (.ci/run)")
        pytest.skip("wasi-libc's headers (or a Linux errno) are not here")
    numbers = {m[1]: int(m[2]) for m in re.finditer(r"#define __WASI_ERRNO_(\w+) \(UINT16_C\((\d+)\)\)",
                                                    api_h.read_text())}
    names = dict(re.findall(r"#define (E\w+) __WASI_ERRNO_(\w+)", values_h.read_text()))
    assert len(WASI_ERRNO_TO_LINUX) == max(numbers.values()) + 1
    for name, wasi_name in names.items():
        want = getattr(errno, name, errno.EPERM)  # ENOTCAPABLE has no Linux name
        assert WASI_ERRNO_TO_LINUX[numbers[wasi_name]] == want, name


def test_the_errno_adapter_translates() -> None:
    """The adapter, compiled for the host around a stand-in for wasi-libc's `errno`."""
    import ctypes

    import llvmlite.binding as llvm
    from llvmlite import ir

    from cancho_kernel.compiler.codegen.wasi import build_errno_adapter

    module = ir.Module(name="errno_probe")
    i32, ptr = ir.IntType(32), ir.PointerType()
    fake = ir.GlobalVariable(module, i32, name="errno")  # wasi-libc's, stood in for
    fake.initializer = ir.Constant(i32, 0)
    adapter = build_errno_adapter(module)
    probe = ir.Function(module, ir.FunctionType(i32, [i32]), name="probe")
    b = ir.IRBuilder(probe.append_basic_block())
    b.store(probe.args[0], fake)
    b.ret(b.load(b.call(adapter, []), typ=i32))
    native.ensure_initialised()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)), native.target_machine(jit=True))
    engine.finalize_object()
    call = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)(engine.get_function_address("probe"))
    assert [call(n) for n in (0, 64, 8, 44, 29, 76, 500)] == [0, 32, 9, 2, 5, 1, 500]


def test_files_in_a_granted_directory(builds, tmp_path: Path) -> None:
    dirs = (tmp_path / "native", tmp_path / "wasm")
    for d in dirs:
        d.mkdir()
    native_run, wasm_run = both(builds(FILES), [], b"", cwd=dirs, grants=(".",))
    assert wasm_run.stdout == native_run.stdout == b"carried to wasm\ncarrie\n16 16 6 2\n"
    assert wasm_run.returncode == native_run.returncode == 2  # ENOENT, in the language's numbers
    assert (dirs[1] / "note.txt").read_bytes() == (dirs[0] / "note.txt").read_bytes()
    ungranted = both(builds(FILES), [], b"", cwd=dirs, grants=())[1]
    assert ungranted.returncode != 0 and not (dirs[1] / "no-such-file.txt").exists()


def test_sort_example_reads_a_granted_file(builds, tmp_path: Path) -> None:
    rng = random.Random(3)
    lines = b"".join(bytes(rng.choice(b"abcxyz ") for _ in range(rng.randint(0, 12))) + b"\n"
                     for _ in range(2000))
    (tmp_path / "lines.txt").write_bytes(lines)
    native_run, wasm_run = both(builds(SORT), ["lines.txt", "-"], b"zz\naa\n", cwd=(tmp_path, tmp_path),
                                grants=(".",))
    assert wasm_run.stdout == native_run.stdout and wasm_run.returncode == native_run.returncode == 0
    assert wasm_run.stdout.count(b"\n") == 2002
    refused = both(builds(SORT), ["lines.txt"], b"", cwd=(tmp_path, tmp_path))[1]  # no grant
    assert refused.returncode != 0 and b"lines.txt" in refused.stderr


def test_flush_failure_errno_is_the_languages(builds) -> None:
    """stdout on /dev/full: ENOSPC, 28 natively; WASI's 51 translated to 28."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    with open("/dev/full", "wb") as full:
        native_run, wasm_run = both(builds(FLUSH), [], b"", stdout=full)
    assert wasm_run.returncode == native_run.returncode == 28


def test_run_grants_only_what_wasmtime_flags_say(tmp_path: Path) -> None:
    toolchain_or_skip()
    (tmp_path / "f.txt").write_bytes(b"b\na\n")
    granted = cancho("run", "--target", "wasm32-wasip1", str(SORT), "--", "f.txt", cwd=tmp_path,
                     env={**ENV, "WASMTIME_FLAGS": "--dir ."})
    assert (granted.returncode, granted.stdout) == (0, b"a\nb\n"), granted.stderr
    refused = cancho("run", "--target", "wasm32-wasip1", str(SORT), "--", "f.txt", cwd=tmp_path,
                     env={**ENV, "WASMTIME_FLAGS": "--dir=. --env X=1"})
    assert refused.returncode == 3 and b"not `--env`" in refused.stderr
    assert wasm.granted_dirs("--dir=/tmp::/data --dir /tmp") == ["/tmp::/data", "/tmp"]


def test_ir_and_asm_for_the_target() -> None:
    ir_out = cancho("ir", "--target", "wasm32-wasip1", str(HELLO))
    assert ir_out.returncode == 0 and b'target triple = "wasm32-unknown-wasi"' in ir_out.stdout
    asm_out = cancho("asm", "--target", "wasm32-wasip1", str(HELLO))
    assert asm_out.returncode == 0 and b".functype" in asm_out.stdout  # WebAssembly's text form
    assert b".functype" not in cancho("asm", str(HELLO)).stdout


def test_authority_for_the_target_lists_the_modules_imports() -> None:
    """`authority --target wasm32-wasip1`: the host's report plus the module's import section,
    in text and in JSON (which its schema accepts); the host's report has neither."""
    import json

    import jsonschema

    toolchain_or_skip()
    text = cancho("authority", "--target", "wasm32-wasip1", str(HELLO))
    assert text.returncode == 0, text.stderr
    lines = text.stdout.decode().splitlines()
    at = lines.index("imports (wasm32-wasip1)")
    imports = [line.strip() for line in lines[at + 1:]]
    assert "wasi_snapshot_preview1.fd_write" in imports and imports == sorted(imports), lines
    assert lines[:at] == cancho("authority", str(HELLO)).stdout.decode().splitlines()
    doc = json.loads(cancho("authority", "--target", "wasm32-wasip1", "--output", "json", str(HELLO)).stdout)
    assert doc["wasi"] == {"target": "wasm32-wasip1", "imports": imports}
    schema = json.loads((REPO / "cancho_kernel" / "schemas" / "authority.schema.json").read_text())
    jsonschema.validate(doc, schema)
    assert "wasi" not in json.loads(cancho("authority", "--output", "json", str(HELLO)).stdout)
