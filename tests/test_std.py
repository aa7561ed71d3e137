"""The standard library (cancho_kernel/std) and the `cancho test` runner (cancho_kernel/testing).

Every std module has a cancho test file in tests/std/ (`test_<module>.cho`) that the runner
builds once and runs once per test. A test whose name ends in `_traps` checks a trap the
library promises, so it must fail by SIGILL; every other test must pass. Programs that need
their own `main` (argument parsing, the exact bytes written) are drivers run by the exe backend.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cancho_kernel import testing
from cancho_kernel.compiler import api
from cancho_kernel.compiler.backends.exe import build_executable
from cancho_kernel.compiler.backends.process import RunLimits, StdoutTarget, run_executable

STD_TESTS = Path(__file__).resolve().parent / "std"
STD_DIR = Path(testing.__file__).resolve().parent / "std"
TEST_LINE = re.compile(r"^test (\S+) \.\.\. (ok|FAILED)$", re.M)


def run_runner(capsys, *argv: str) -> tuple[int, str, str]:
    code = testing.main_test(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def verdicts(out: str) -> dict[str, str]:
    return dict(TEST_LINE.findall(out))


def failure_reason(out: str, name: str) -> str:
    m = re.search(rf"^---- {re.escape(name)} ----\n(.*)$", out, re.M)
    assert m, out
    return m.group(1)


# ---------------------------------------------------------------------------------------------
# the std modules, through their cancho tests

STD_TEST_FILES = sorted(p.name for p in STD_TESTS.glob("test_*.cho"))


def test_every_std_module_has_a_test_file() -> None:
    modules = {p.stem for p in STD_DIR.glob("*.cho")}
    covered = {name[len("test_"):-len(".cho")] for name in STD_TEST_FILES}
    covered |= {"option", "result", "list"} if "collections" in covered else set()
    covered |= {"flags"}  # through flags_driver.cho below
    assert modules <= covered, modules - covered


@pytest.mark.parametrize("name", STD_TEST_FILES)
def test_std_module(name: str, capsys) -> None:
    code, out, err = run_runner(capsys, str(STD_TESTS / name))
    got = verdicts(out)
    assert got, out + err
    assert out.startswith(f"running {len(got)} test"), out
    for test, verdict in got.items():
        if test.endswith("_traps"):
            assert verdict == "FAILED", f"{test} should trap\n{out}"
            assert failure_reason(out, test).startswith("trapped: killed by signal 4"), out
        else:
            assert verdict == "ok", f"{test} failed\n{out}{err}"
    expect_failed = sum(1 for t in got if t.endswith("_traps"))
    assert code == (testing.EXIT_FAILED if expect_failed else testing.EXIT_OK), out + err
    passed = len(got) - expect_failed
    verdict = "FAILED" if expect_failed else "ok"
    assert out.rstrip("\n").endswith(
        f"test result: {verdict}. {passed} passed; {expect_failed} failed"), out


def test_std_module_on_the_jit_backend(capsys) -> None:
    code, out, err = run_runner(capsys, str(STD_TESTS / "test_math.cho"), "--backend", "jit")
    got = verdicts(out)
    assert got["test_gcd"] == "ok" and got["test_abs_of_min_traps"] == "FAILED", out + err
    assert code == testing.EXIT_FAILED


# ---------------------------------------------------------------------------------------------
# drivers with their own main


def build(tmp_path: Path, *files: Path) -> Path:
    result = api.compile_sources([api.SourceFile.from_path(f) for f in files])
    assert result.ok, "\n".join(d.render() for d in result.diagnostics)
    exe = tmp_path / "driver"
    build_executable(result.ir, exe)
    return exe


@pytest.fixture(scope="module")
def flags_exe(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("flags"), STD_TESTS / "flags_driver.cho")


def steps(exe: Path, *args: str) -> list[str]:
    res = run_executable(exe, [str(exe), *args], b"", StdoutTarget.pipe(), RunLimits(timeout=30))
    assert res.exit_status == 0, res.describe()
    return res.stdout.decode().splitlines()


# The driver asks for a value after -d, -f, --delimiter, --fields and --name; other flags
# take none.
FLAG_CASES = {
    "short": (["-x"], ["short x", "done"]),
    "bundled": (["-xi"], ["short x", "short i", "done"]),
    "bundled three": (["-abc"], ["short a", "short b", "short c", "done"]),
    "separate shorts": (["-x", "-i"], ["short x", "short i", "done"]),
    "value attached": (["-d,"], ["short d", "value ,", "done"]),
    "value next": (["-d", ","], ["short d", "value ,", "done"]),
    "value after a bundle": (["-xd:"], ["short x", "short d", "value :", "done"]),
    "value missing": (["-d"], ["short d", "value ", "done"]),
    "long": (["--decode"], ["long decode", "done"]),
    "long with =": (["--delimiter=,"], ["long delimiter", "value ,", "done"]),
    "long with empty =": (["--name="], ["long name", "value ", "done"]),
    "long value next": (["--fields", "2"], ["long fields", "value 2", "done"]),
    "long = not asked for": (["--skip=x", "-x"], ["long skip", "short x", "done"]),
    "double dash": (["--", "-x", "--y"], ["operand -x", "operand --y", "done"]),
    "double dash alone": (["--"], ["done"]),
    "lone dash": (["-"], ["operand -", "done"]),
    "operands": (["a", "b"], ["operand a", "operand b", "done"]),
    "no flag after an operand": (["a", "-x"], ["operand a", "operand -x", "done"]),
    "nothing": ([], ["done"]),
    "cut": (["-d", ",", "-f2", "--", "file.csv"],
            ["short d", "value ,", "short f", "value 2", "operand file.csv", "done"]),
    "value that looks like a flag": (["-d", "--"], ["short d", "value --", "done"]),
}


@pytest.mark.parametrize("case", sorted(FLAG_CASES))
def test_flags_shapes(flags_exe: Path, case: str) -> None:
    args, expected = FLAG_CASES[case]
    assert steps(flags_exe, *args) == expected


def test_io_writes(tmp_path: Path) -> None:
    exe = build(tmp_path, STD_TESTS / "io_driver.cho")
    res = run_executable(exe, [str(exe)], b"", StdoutTarget.pipe(), RunLimits(timeout=30))
    assert res.exit_status == 0, res.describe()
    assert res.stdout.decode() == (
        "-9223372036854775808\n9223372036854775807\n0 -7 42\n   42  -42123456\nbulk text\n")
    assert res.stderr == b"to stderr\n"


def test_std_files_name_their_module() -> None:
    for p in STD_DIR.glob("*.cho"):
        text = p.read_text()
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("//")]
        if lines[0].startswith("edition"):
            lines = lines[1:]
        assert lines[0] == f"module std.{p.stem};", p


# ---------------------------------------------------------------------------------------------
# the runner


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


MIXED = """\
    import std.test;
    fn test_add() -> [] int { return test.assert_eq(2 + 2, 4); }
    fn test_returns_nonzero() -> [] int { return 7; }
    fn test_traps() -> [] int { return test.assert(false); }
    fn test_with_caps[&i, &h](io: &!i Io, heap: &!h Heap) -> [io_write, heap] int {
        let b = box(heap, 5);
        putchar(io, 'x');
        return unbox(heap, b) - 5;
    }
    fn test_heap_then_io[&h, &i](heap: &!h Heap, io: &!i Io) -> [heap, io_write] int {
        let b = box(heap, 1);
        putchar(io, 'y');
        return unbox(heap, b) - 1;
    }
    fn test_multiple_of_256() -> [] int { return 512; }
    fn test_negative() -> [] int { return -1; }
    fn helper() -> [] int { return 0; }
"""


@pytest.mark.parametrize("backend", ["exe", "jit"])
def test_runner_reports_pass_fail_and_trap(tmp_path: Path, capsys, backend: str) -> None:
    f = write(tmp_path, "mixed.cho", MIXED)
    code, out, err = run_runner(capsys, str(f), "--backend", backend)
    assert code == testing.EXIT_FAILED, out + err
    lines = out.splitlines()
    assert lines[0] == "running 7 tests"
    assert lines[1:8] == [
        "test test_add ... ok",
        "test test_returns_nonzero ... FAILED",
        "test test_traps ... FAILED",
        "test test_with_caps ... ok",
        "test test_heap_then_io ... ok",
        "test test_multiple_of_256 ... FAILED",
        "test test_negative ... FAILED",
    ]
    assert "\nfailures:\n\n---- test_returns_nonzero ----\n" \
           "returned 7, and a test answers 0 to pass\n" in out
    assert ("---- test_traps ----\ntrapped: killed by signal 4 (SIGILL, the trap every "
            "checked operation ends with)\n") in out
    assert "---- test_multiple_of_256 ----\nreturned 1, and a test answers 0 to pass" in out
    assert "---- test_negative ----\nreturned 255, and a test answers 0 to pass" in out
    assert out.endswith("\ntest result: FAILED. 3 passed; 4 failed\n")


def test_runner_all_pass(tmp_path: Path, capsys) -> None:
    f = write(tmp_path, "good.cho", """\
        fn test_one() -> [] int { return 0; }
        fn test_two() -> [] int { return 256 - 256; }
    """)
    code, out, _ = run_runner(capsys, str(f))
    assert code == testing.EXIT_OK
    assert out == ("running 2 tests\ntest test_one ... ok\ntest test_two ... ok\n\n"
                   "test result: ok. 2 passed; 0 failed\n")


def test_runner_shows_a_failed_tests_output(tmp_path: Path, capsys) -> None:
    f = write(tmp_path, "loud.cho", """\
        fn test_loud[&i](io: &!i Io) -> [io_write, err_write] int {
            write_bytes(io, "said this\\n");
            write_err(io, "and this\\n");
            return 3;
        }
    """)
    code, out, _ = run_runner(capsys, str(f))
    assert code == testing.EXIT_FAILED
    assert "returned 3, and a test answers 0 to pass\nstdout:\nsaid this\nstderr:\nand this\n" in out


def test_runner_several_files_and_modules(tmp_path: Path, capsys) -> None:
    lib = write(tmp_path, "lib.cho", """\
        module app.lib;
        pub fn double(n: int) -> [] int { return n * 2; }
        pub fn test_double() -> [] int { if double(4) == 8 { return 0; } return 1; }
    """)
    root = write(tmp_path, "root.cho", """\
        import app.lib;
        fn test_through_lib() -> [] int { return lib.double(3) - 6; }
    """)
    code, out, err = run_runner(capsys, str(lib), str(root))
    assert code == testing.EXIT_OK, out + err
    assert verdicts(out) == {"app.lib.test_double": "ok", "test_through_lib": "ok"}


def test_runner_a_private_test_in_a_module_is_refused(tmp_path: Path, capsys) -> None:
    lib = write(tmp_path, "lib.cho", """\
        module app.lib;
        fn test_hidden() -> [] int { return 0; }
    """)
    code, out, err = run_runner(capsys, str(lib))
    assert code == testing.EXIT_USAGE
    assert "must be `pub`" in err and out == ""


@pytest.mark.parametrize("signature", [
    "fn test_x[T: val](x: T) -> [] int",
    "fn test_x(n: int) -> [] int",
    "fn test_x[&i](io: &i Io) -> [] int",
    "fn test_x[&a](args: &a Args) -> [] int",
    "fn test_x[&i, &j](a: &!i Io, b: &!j Io) -> [] int",
    "fn test_x() -> [] bool",
])
def test_runner_refuses_a_misshapen_test(tmp_path: Path, capsys, signature: str) -> None:
    f = write(tmp_path, "bad.cho", f"{signature} {{ return 0; }}\nfn test_ok() -> [] int {{ return 0; }}\n")
    code, out, err = run_runner(capsys, str(f))
    assert code == testing.EXIT_USAGE, err
    assert "`test_x` is not a test the runner can run" in err
    assert "bad.cho:1:4: error:" in err
    assert out == ""


def test_runner_no_tests(tmp_path: Path, capsys) -> None:
    f = write(tmp_path, "none.cho", "fn helper() -> [] int { return 0; }\n")
    code, out, err = run_runner(capsys, str(f))
    assert code == testing.EXIT_USAGE
    assert "no tests found" in err


def test_runner_a_root_main_is_refused(tmp_path: Path, capsys) -> None:
    f = write(tmp_path, "main.cho", """\
        fn main(world: World) -> [] int { release(world); return 0; }
        fn test_a() -> [] int { return 0; }
    """)
    code, _, err = run_runner(capsys, str(f))
    assert code == testing.EXIT_USAGE
    assert "no `main`" in err


def test_runner_a_refused_program_exits_1(tmp_path: Path, capsys) -> None:
    f = write(tmp_path, "refused.cho", "fn test_a() -> [] int { return true; }\n")
    code, out, err = run_runner(capsys, str(f))
    assert code == testing.EXIT_REFUSED
    assert "refused.cho:1:" in err and out == ""


def test_runner_a_parse_error_exits_1(tmp_path: Path, capsys) -> None:
    f = write(tmp_path, "broken.cho", "fn test_a() -> [] int { return 0 }\n")
    code, _, err = run_runner(capsys, str(f))
    assert code == testing.EXIT_REFUSED
    assert "broken.cho:1:" in err


def test_runner_usage_errors(tmp_path: Path, capsys) -> None:
    assert run_runner(capsys)[0] == testing.EXIT_USAGE
    f = write(tmp_path, "a.cho", "fn test_a() -> [] int { return 0; }\n")
    code, _, err = run_runner(capsys, str(f), "--backend", "cranelift-ish")
    assert code == testing.EXIT_USAGE and "unknown backend" in err
    code, _, err = run_runner(capsys, str(f), "--frobnicate")
    assert code == testing.EXIT_USAGE and "unknown option" in err


def test_runner_unreadable_input_is_the_environment(tmp_path: Path, capsys) -> None:
    code, _, err = run_runner(capsys, str(tmp_path / "missing.cho"))
    assert code == testing.EXIT_ENVIRONMENT
    assert "cannot read" in err


def test_runner_missing_linker_is_the_environment(tmp_path: Path, capsys, monkeypatch) -> None:
    f = write(tmp_path, "a.cho", "fn test_a() -> [] int { return 0; }\n")
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    code, _, err = run_runner(capsys, str(f))
    assert code == testing.EXIT_ENVIRONMENT
    assert "linker" in err


def test_runner_times_out_a_hanging_test(tmp_path: Path, capsys) -> None:
    f = write(tmp_path, "hang.cho", """\
        fn test_hangs() -> [] int { var k = 0; while k >= 0 { k = k + 0; } return k; }
        fn test_quick() -> [] int { return 0; }
    """)
    code, out, _ = run_runner(capsys, str(f), "--timeout", "0.5")
    assert code == testing.EXIT_FAILED
    assert verdicts(out) == {"test_hangs": "FAILED", "test_quick": "ok"}
    assert "timed out" in failure_reason(out, "test_hangs")


def test_runner_generated_main_is_cancho() -> None:
    src = testing.generate_main(
        [testing.TestCase("test_a", "test_a", []),
         testing.TestCase("m.test_b", "q.test_b", ["heap", "io"])], ["import m as q;"])
    assert "fn main(world: World) -> [] int {" in src
    assert "status = cancho_test_runner_status(q.test_b(h, i));" in src
    assert 'cancho_test_runner_same(wanted, "m.test_b")' in src


def test_python_dash_m_entry(tmp_path: Path) -> None:
    f = write(tmp_path, "a.cho", "fn test_a() -> [] int { return 0; }\n")
    proc = subprocess.run([sys.executable, "-m", "cancho_kernel.testing", str(f)],
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 0, proc.stderr
    assert "test result: ok. 1 passed; 0 failed" in proc.stdout
