"""No undefined behaviour reaches generated code: every checked operation traps (or is refused
as `constant-traps`) whatever the form of its operands — literal, variable the optimiser can see
through, value hidden behind `value_barrier`, or constant tree.

Issue 12 §1: `x << 64` with `x` a variable skipped the amount check because the amount was an LLVM
constant, so `shl i64 %x, 64` (poison) reached O2 and the program returned `undef` (jit exited 0,
exe 48). The reference folds only operations whose operands are *all* literals
(`cancho-ir/src/fold.rs` `bin`) and always emits the shift check (`cancho-codegen-llvm` `checked_shift`),
so a literal amount with a variable value traps at run time; `1 << 64` is `constant-traps`.

Every run goes through both backends, which must agree byte for byte on stdout, stderr and status
(a trap is SIGILL, status 132 as a shell shows it).
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from pathlib import Path

import pytest

from cancho_kernel.compiler import api, diagnostics
from cancho_kernel.compiler.backends import exe, native, process
from cancho_kernel.compiler.source import SourceFile

TRAP = 128 + signal.SIGILL
MIN = "(-9223372036854775807 - 1)"

MAIN = """
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args, net, clock, signals } = split(world);
    release(ffi);
    release(fs);
    release(heap);
    release(args);
    release(net);
    release(clock);
    release(signals);
    var status = 0;
    borrow mut io as &!i in {
        status = run(i);
    }
    release(io);
    return status;
}
"""

PUT_LINE = """
// The decimal digits of -n for n <= 0 (the negative side holds every int).
fn put_digits[&i](io: &!i Io, n: int) -> [io_write] int {
    if n <= -10 {
        put_digits(io, n / 10);
    }
    putchar(io, '0' - n % 10);
    return 0;
}

// n in decimal and a newline, flushed so that a later trap cannot lose it.
fn put_line[&i](io: &!i Io, n: int) -> [io_write] int {
    if n < 0 {
        putchar(io, '-');
        put_digits(io, n);
    } else {
        put_digits(io, -n);
    }
    putchar(io, '\\n');
    match flush_out(io) {
        Done::Ok(_) => { }
        Done::Failed(_) => { }
    }
    return 0;
}

// One decimal line of stdin (an optional leading '-').
fn get_int[&i](io: &!i Io) -> [io_read] int {
    var negative = false;
    var value = 0;
    var c = getchar(io);
    if c == '-' {
        negative = true;
        c = getchar(io);
    }
    while c >= '0' && c <= '9' {
        value = value * 10 - (c - '0');
        c = getchar(io);
    }
    if negative {
        return value;
    }
    return -value;
}
"""


@dataclass(frozen=True)
class Observed:
    """What a shell sees of one run: both output streams and the status (128 + signal)."""

    stdout: bytes
    stderr: bytes
    status: int | None


def status_of(run: process.RunResult) -> int | None:
    if run.exit_status is not None:
        return run.exit_status
    return None if run.signal is None else 128 + run.signal


def compile_text(text: str, name: str = "ub.cho") -> api.CompileResult:
    return api.compile_sources([SourceFile(name, text)])


class BothBackends:
    """Builds a program once for each backend and runs it on both, demanding byte-for-byte
    agreement; returns the one observation they share."""

    def __init__(self, worker, root: Path):
        self.worker = worker
        self.root = root
        self.built: dict[str, Path] = {}

    def run(self, ir: str, stdin: bytes = b"") -> Observed:
        binary = self.built.get(ir)
        if binary is None:
            binary = self.root / f"p{len(self.built)}"
            exe.build_executable(ir, binary)
            self.built[ir] = binary
        limits = process.RunLimits(timeout=20)
        a = process.run_executable(binary, ["p"], stdin, process.StdoutTarget.pipe(), limits)
        b = self.worker.run(ir, ["p"], stdin, process.StdoutTarget.pipe(), limits)
        seen = [Observed(r.stdout, r.stderr, status_of(r)) for r in (a, b)]
        assert seen[0] == seen[1], f"exe and jit disagree:\n  exe {seen[0]}\n  jit {seen[1]}"
        for r in (a, b):
            assert not r.timed_out
            if status_of(r) == TRAP:
                assert r.signal == signal.SIGILL, "status 132 must be a trap, not a return"
        return seen[0]


@pytest.fixture(scope="module")
def jit_worker():
    from cancho_kernel.compiler.backends import jit

    worker = jit.JitWorker()
    yield worker
    worker.close()


@pytest.fixture(scope="module")
def both(jit_worker, tmp_path_factory) -> BothBackends:
    return BothBackends(jit_worker, tmp_path_factory.mktemp("ub"))


def no_undefined_values(ir: str) -> None:
    """The optimised IR holds no `undef`/`poison`: LLVM derives them from undefined behaviour."""
    optimised = native.optimized_ir(ir)
    found = re.findall(r"\b(undef|poison)\b", optimised)
    assert not found, "undefined values in the optimised IR:\n" + optimised


# ---------------------------------------------------------------------------- the issue's program

ISSUE_PROGRAM = """
fn main(world: World) -> [] int {
    release(world);
    var x = 1;
    let y = x OP AMOUNT;
    if y == 12345 { return 9; }
    return 5;
}
"""

AMOUNTS = ["64", "65", "100", "-1", "-9223372036854775808", "9223372036854775807", MIN]


@pytest.mark.parametrize("op", ["<<", ">>"])
@pytest.mark.parametrize("amount", AMOUNTS)
def test_issue_program_shift_by_a_literal_out_of_range_traps(both, op, amount):
    compiled = compile_text(ISSUE_PROGRAM.replace("OP", op).replace("AMOUNT", amount))
    assert compiled.ok, diagnostics.render_text(compiled.diagnostics)
    no_undefined_values(compiled.ir)
    assert both.run(compiled.ir) == Observed(b"", b"", TRAP)


@pytest.mark.parametrize("op,amount,value", [("<<", "63", -(1 << 63)), ("<<", "0", 1), (">>", "0", 1),
                                             ("<<", "2", 4), (">>", "63", 0)])
def test_issue_program_in_range_literal_shifts_compute(both, op, amount, value):
    """Constant amounts inside 0..63 still need no check, and compute the shift."""
    text = ISSUE_PROGRAM.replace("OP", op).replace("AMOUNT", amount).replace("12345", str(value))
    compiled = compile_text(text)
    assert compiled.ok, diagnostics.render_text(compiled.diagnostics)
    no_undefined_values(compiled.ir)
    assert both.run(compiled.ir) == Observed(b"", b"", 9)


# ---------------------------------------------------------------------------- every checked operation

@dataclass(frozen=True)
class Case:
    """One checked operation in one operand form: the statements of its branch and what it
    prints, or None when it must trap."""

    name: str
    body: str
    prints: str | None


def _trap(name: str, body: str) -> Case:
    return Case(name, body, None)


def _shift_cases() -> list[Case]:
    cases = []
    for op in ("<<", ">>"):
        for amount in AMOUNTS:
            for form, decl in (("var", "var x = 1;"), ("barrier", "let x = value_barrier(1);")):
                cases.append(_trap(f"x {op} {amount} ({form})", f"{decl} put_line(io, x {op} {amount});"))
        # the amount is a folded constant tree or a variable, the value a literal
        cases.append(_trap(f"x {op} (60 + 4)", f"var x = 1; put_line(io, x {op} (60 + 4));"))
        cases.append(_trap(f"1 {op} variable 64", f"var k = 64; put_line(io, 1 {op} k);"))
        cases.append(_trap(f"1 {op} variable -1", f"var k = -1; put_line(io, 1 {op} k);"))
    cases += [
        Case("x << 63", "var x = 1; put_line(io, x << 63);", "-9223372036854775808"),
        Case("x >> 63", "var x = -5; put_line(io, x >> 63);", "-1"),
        Case("x << 0", "var x = 7; put_line(io, x << 0);", "7"),
        Case("3 << variable 62", "var k = 62; put_line(io, 3 << k);", "-4611686018427387904"),
    ]
    return cases


def _arith_cases() -> list[Case]:
    cases = []
    for form, decl in (("var", "var {n} = {v};"), ("barrier", "let {n} = value_barrier({v});")):
        def d(n: str, v: str) -> str:
            return decl.format(n=n, v=v)
        cases += [
            _trap(f"x / 0 ({form})", d("x", "7") + " put_line(io, x / 0);"),
            _trap(f"x % 0 ({form})", d("x", "7") + " put_line(io, x % 0);"),
            _trap(f"7 / z ({form})", d("z", "0") + " put_line(io, 7 / z);"),
            _trap(f"7 % z ({form})", d("z", "0") + " put_line(io, 7 % z);"),
            _trap(f"MIN / -1 ({form})", d("m", MIN) + " put_line(io, m / -1);"),
            _trap(f"MIN / z=-1 ({form})", d("z", "-1") + f" put_line(io, {MIN} / z);"),
            Case(f"MIN % -1 ({form})", d("m", MIN) + " put_line(io, m % -1);", "0"),
            Case(f"MIN % z=-1 ({form})", d("z", "-1") + f" put_line(io, {MIN} % z);", "0"),
            Case(f"x / -1 ({form})", d("x", "-7") + " put_line(io, x / -1);", "7"),
            Case(f"-7 / 2 ({form})", d("x", "-7") + " put_line(io, x / 2);", "-3"),
            Case(f"-7 % 2 ({form})", d("x", "-7") + " put_line(io, x % 2);", "-1"),
            _trap(f"-MIN ({form})", d("m", MIN) + " put_line(io, -m);"),
            _trap(f"x + MAX ({form})", d("x", "1") + " put_line(io, x + 9223372036854775807);"),
            _trap(f"MIN - x ({form})", d("x", "1") + f" put_line(io, {MIN} - x);"),
            _trap(f"m - 1 ({form})", d("m", MIN) + " put_line(io, m - 1);"),
            _trap(f"x * MIN ({form})", d("x", "-1") + f" put_line(io, x * {MIN});"),
            _trap(f"x * 2^62 ({form})", d("x", "2") + " put_line(io, x * 4611686018427387904);"),
            Case(f"x * 2^62 fits ({form})", d("x", "-2") + " put_line(io, x * 4611686018427387904);",
                 "-9223372036854775808"),
            _trap(f"byte_of(256) ({form})", d("n", "256") + " put_line(io, int_of(byte_of(n)));"),
            _trap(f"byte_of(-1) ({form})", d("n", "-1") + " put_line(io, int_of(byte_of(n)));"),
            _trap(f"byte_of(MIN) ({form})", d("n", MIN) + " put_line(io, int_of(byte_of(n)));"),
            Case(f"byte_of(255) ({form})", d("n", "255") + " put_line(io, int_of(byte_of(n)));", "255"),
            Case(f"wrapping_add ({form})", d("x", "9223372036854775807") + " put_line(io, wrapping_add(x, 1));",
                 "-9223372036854775808"),
            Case(f"wrapping_mul ({form})", d("x", "4611686018427387904") + " put_line(io, wrapping_mul(x, 4));",
                 "0"),
            Case(f"wrapping_sub ({form})", d("x", MIN) + " put_line(io, wrapping_sub(x, 1));",
                 "9223372036854775807"),
        ]
    return cases


def _conversion_and_memory_cases() -> list[Case]:
    return [
        # `truncate` is not folded: its literal argument reaches the backend's checks.
        _trap("truncate(2^63)", "put_line(io, truncate(9223372036854775808.0));"),
        _trap("truncate(-2^63)", "put_line(io, truncate(-9223372036854775808.0));"),
        _trap("truncate(1e300)", "put_line(io, truncate(1.0e300));"),
        _trap("truncate(NaN)", "put_line(io, truncate(0.0 / 0.0));"),
        _trap("truncate(inf)", "put_line(io, truncate(1.0 / 0.0));"),
        _trap("truncate(var 1e19)", "var f = 1.0e19; put_line(io, truncate(f));"),
        Case("truncate(-2.9)", "put_line(io, truncate(-2.9));", "-2"),
        Case("truncate(largest below 2^63)", "put_line(io, truncate(9223372036854774784.0));",
             "9223372036854774784"),
        _trap("\"abc\"[3]", 'let s = "abc"; put_line(io, int_of(s[3]));'),
        _trap("\"abc\"[-1]", 'let s = "abc"; put_line(io, int_of(s[-1]));'),
        _trap("\"abc\"[MIN]", f'let s = "abc"; put_line(io, int_of(s[{MIN}]));'),
        _trap("\"abc\"[var 3]", 'let s = "abc"; var k = 3; put_line(io, int_of(s[k]));'),
        Case("\"abc\"[2]", 'let s = "abc"; put_line(io, int_of(s[2]));', "99"),
        _trap("\"abc\"[2..1]", 'let s = "abc"; put_line(io, len(s[2..1]));'),
        _trap("\"abc\"[0..4]", 'let s = "abc"; put_line(io, len(s[0..4]));'),
        _trap("\"abc\"[-1..2]", 'let s = "abc"; put_line(io, len(s[-1..2]));'),
        Case("\"abc\"[3..3]", 'let s = "abc"; put_line(io, len(s[3..3]));', "0"),
        _trap("alloc_slice(-1)", "region a { let s = alloc_slice[a](-1, 0); put_line(io, len(s)); }"),
        _trap("alloc_slice(2^61)",
              "region a { let s = alloc_slice[a](2305843009213693952, 0); put_line(io, len(s)); }"),
        _trap("alloc_slice(MAX)",
              "region a { let s = alloc_slice[a](9223372036854775807, 0); put_line(io, len(s)); }"),
        _trap("alloc_slice past the arena",
              "region a { let s = alloc_slice[a](8193, 0); put_line(io, len(s)); }"),
        _trap("int slice [8]",
              "region a { let s = alloc_slice[a](8, 5); put_line(io, s[8]); }"),
        Case("alloc_slice(8192) fits", "region a { let s = alloc_slice[a](8192, 5); put_line(io, s[8191]); }",
             "5"),
    ]


STATICS = f"""
// Operands computed at compile time and read at run time.
static limits: [int] {{
    let t = alloc_slice[static](6, 0);
    t[0] = 64;
    t[1] = -1;
    t[2] = 0;
    t[3] = {MIN};
    t[4] = 300;
    t[5] = 63;
    return t;
}}
"""


def _static_cases() -> list[Case]:
    return [
        _trap("1 << static 64", "put_line(io, 1 << limits[0]);"),
        _trap("x >> static -1", "var x = 5; put_line(io, x >> limits[1]);"),
        _trap("7 / static 0", "put_line(io, 7 / limits[2]);"),
        _trap("7 % static 0", "put_line(io, 7 % limits[2]);"),
        _trap("static MIN / -1", "put_line(io, limits[3] / -1);"),
        _trap("-static MIN", "put_line(io, -limits[3]);"),
        _trap("static MIN - 1", "put_line(io, limits[3] - 1);"),
        _trap("byte_of(static 300)", "put_line(io, int_of(byte_of(limits[4])));"),
        _trap("static[6]", "put_line(io, limits[6]);"),
        _trap("static[2..7]", "put_line(io, len(limits[2..7]));"),
        Case("1 << static 63", "put_line(io, 1 << limits[5]);", "-9223372036854775808"),
        Case("static MIN % -1", "put_line(io, limits[3] % -1);", "0"),
    ]


CASES = _shift_cases() + _arith_cases() + _conversion_and_memory_cases() + _static_cases()


def case_program(cases: list[Case]) -> str:
    """One program holding every case; stdin selects the case to run."""
    branches = "\n".join(
        f"    if which == {k} {{\n        {c.body}\n    }}" for k, c in enumerate(cases))
    return (f"edition 6;\n\nfn run[&i](io: &!i Io) -> [io_read, io_write] int {{\n"
            f"    let which = get_int(io);\n{branches}\n    return 0;\n}}\n" + STATICS + PUT_LINE + MAIN)


@pytest.fixture(scope="module")
def case_ir() -> str:
    compiled = compile_text(case_program(CASES), "cases.cho")
    assert compiled.ok, diagnostics.render_text(compiled.diagnostics)
    return compiled.ir


def test_case_program_has_no_undefined_values(case_ir):
    no_undefined_values(case_ir)


@pytest.mark.parametrize("k", range(len(CASES)), ids=[c.name for c in CASES])
def test_checked_operation(both, case_ir, k):
    case = CASES[k]
    seen = both.run(case_ir, f"{k}\n".encode())
    if case.prints is None:
        assert seen == Observed(b"", b"", TRAP), case.name
    else:
        assert seen == Observed(case.prints.encode() + b"\n", b"", 0), case.name


# ---------------------------------------------------------------------------- all-literal: refused

REFUSED = [
    "1 << 64", "1 >> 64", "1 << -1", "1 >> 100", "1 << (60 + 4)", "0 << -9223372036854775808",
    "1 / 0", "1 % 0", f"{MIN} / -1", f"-{MIN}", "9223372036854775807 + 1", f"{MIN} - 1",
    "4611686018427387904 * 2", "int_of(byte_of(256))", "int_of(byte_of(-1))", "(1 / 0) * 0",
]


@pytest.mark.parametrize("expr", REFUSED)
def test_all_literal_trap_is_constant_traps(expr):
    text = f"fn main(world: World) -> [] int {{\n    release(world);\n    return {expr};\n}}\n"
    result = api.check_sources([SourceFile("lit.cho", text)])
    assert not result.ok
    first = result.diagnostics[0]
    assert first.rule == "constant-traps", diagnostics.render_text(result.diagnostics)
    assert first.span is not None


@pytest.mark.parametrize("expr,status", [(f"{MIN} % -1", 0), ("1 << 63 >> 63", 255),
                                        ("wrapping_add(9223372036854775807, 1) >> 63", 255)])
def test_all_literal_without_trap_is_accepted(both, expr, status):
    text = f"fn main(world: World) -> [] int {{\n    release(world);\n    return {expr};\n}}\n"
    compiled = compile_text(text)
    assert compiled.ok, diagnostics.render_text(compiled.diagnostics)
    assert both.run(compiled.ir) == Observed(b"", b"", status)


@pytest.mark.parametrize("kind,fill,stmt", [
    ("int", "0", "t[0] = len(t) << 64;"),
    ("int", "0", "t[0] = len(t) / (len(t) - 3);"),
    ("int", "0", "t[0] = len(t) % (len(t) - 3);"),
    ("int", "0", f"t[1] = {MIN}; t[0] = -t[1];"),
    ("int", "0", f"t[1] = {MIN}; t[0] = t[1] / -1;"),
    ("int", "0", "t[0] = t[len(t)];"),
    ("byte", "byte_of(0)", "t[0] = byte_of(len(t) + 300);"),
])
def test_static_whose_evaluation_traps_is_refused(kind, fill, stmt):
    """A static is computed at compile time, so a trap there can only be a refusal, located
    in the static."""
    text = (f"static bad: [{kind}] {{\n    let t = alloc_slice[static](3, {fill});\n    {stmt}\n"
            "    return t;\n}\n\nfn main(world: World) -> [] int {\n    release(world);\n"
            "    return len(bad);\n}\n")
    result = api.check_sources([SourceFile("static.cho", text)])
    assert not result.ok, text
    first = result.diagnostics[0]
    assert first.rule in ("constant-traps", "static-item"), diagnostics.render_text(result.diagnostics)
    assert first.span is not None and first.span.line <= 4
