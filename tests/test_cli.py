"""The `cancho` CLI: usage errors and exit codes, check/build/run/ir/asm.

`run` and `build` are tested in a subprocess whose `api.compile_sources` is replaced by one that
returns hand-written IR (from test_backends), so these tests exercise the CLI and the backends,
not the front end. One test goes through the real front end end to end.
"""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cancho_kernel import cli
from cancho_kernel.compiler import api
from cancho_kernel.compiler.api import CompileResult
from test_backends import ARGV, HELLO, TRAP_AFTER_OUTPUT, returns

REPO = Path(__file__).resolve().parents[1]

HELLO_CHO = """\
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(ffi);
    release(fs);
    release(heap);
    release(args);
    var taken = 0;
    borrow mut io as &!i in {
        taken = write_bytes(i, "hello\\n");
    }
    release(io);
    return taken;
}
"""


@pytest.fixture
def src(tmp_path):
    p = tmp_path / "prog.cho"
    p.write_text("fn main(world: World) -> [] int { return 0; }\n")
    return str(p)


def cancho(*args: str, capsys) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------------------------
# usage: exit 2, message then a blank line and the usage text on stderr


@pytest.mark.parametrize("args,message", [
    ([], "no command given"),
    (["frobnicate", "x.cho"], "unknown command `frobnicate`"),
    (["check"], "no input file given"),
    (["check", "x.cho", "--bogus"], "unknown option `--bogus`"),
    (["check", "x.cho", "-o", "out"], "unknown option `-o`"),
    (["run", "x.cho", "-o", "out"], "unknown option `-o`"),
    (["check", "x.cho", "-l", "m"], "unknown option `-l`"),
    (["ir", "x.cho", "-L", "/tmp"], "unknown option `-L`"),
    (["check", "x.cho", "--output", "xml"], "unknown output form `xml`"),
    (["check", "x.cho", "--output"], "`--output` needs a form"),
    (["build", "x.cho", "--output", "json"], "unknown option `--output`"),
    (["build", "x.cho", "--emit", "dll"], "unknown emit kind `dll`"),
    (["build", "x.cho", "-o"], "`-o` needs a path"),
    (["run", "x.cho", "--backend", "cranelift"], cli.CRANELIFT),
    (["build", "x.cho", "--backend", "cranelift"], cli.CRANELIFT),
    (["test", "x.cho", "--backend", "cranelift"], cli.CRANELIFT),
    (["build", "x.cho", "--backend", "jit"], "unknown backend `jit`; `build` takes `--backend llvm`"),
    (["fmt", "x.cho", "--backend", "llvm"], "unknown option `--backend`"),
    (["ids", "x.cho", "--check"], "unknown option `--check`"),
    (["run", "-l"], "`-l` needs a library name"),
])
def test_usage_errors(args, message, capsys):
    code, out, err = cancho(*args, capsys=capsys)
    assert code == 2 and out == ""
    assert err.startswith(message + "\n\n")
    assert "usage:" in err


def test_version_and_help(capsys):
    from cancho_kernel.compiler.backends import native

    code, out, err = cancho("--version", capsys=capsys)
    assert code == 0 and out == f"cancho 0.1.0 (host {native.host_triple()})\n"
    code, out, err = cancho("--help", capsys=capsys)
    assert code == 0 and out.startswith("cancho") and "usage:" in out and err == ""


def test_default_output_names():
    assert cli.default_output("dir/foo.cho", "exe") == "foo"
    assert cli.default_output("dir/foo.cho", "obj") == "foo.o"


def test_run_args_after_double_dash():
    inv = cli.parse_args("run", ["a.cho", "-l", "m", "--", "-o", "x", "--", "y"])
    assert inv.inputs == ["a.cho"] and inv.libs == ["m"]
    assert inv.program_args == ["-o", "x", "--", "y"]


# ---------------------------------------------------------------------------------------------
# check


def test_unreadable_input(tmp_path, capsys):
    missing = str(tmp_path / "nope.cho")
    code, out, err = cancho("check", missing, capsys=capsys)
    assert code == 3 and out == ""
    assert err == f"cannot read `{missing}`: No such file or directory (os error 2)\n"
    code, out, err = cancho("check", missing, "--output", "json", capsys=capsys)
    assert code == 1
    doc = json.loads(out)
    assert doc["refused"][0]["rule"] == "program-shape"
    assert doc["refused"][0]["position"] is None


def test_compiler_exception_is_internal_not_a_traceback(src, capsys, monkeypatch):
    def boom(sources, **_):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(api, "compile_sources", boom)
    monkeypatch.setattr(api, "check_sources", boom)
    code, out, err = cancho("check", src, capsys=capsys)
    assert code == 1 and "Traceback" not in err
    assert "kaboom" in err and "bug in cancho" in err
    assert err.startswith(f"{src}: error: the compiler failed") and err.endswith(" [internal]\n")
    code, out, err = cancho("check", src, "--output", "json", capsys=capsys)
    assert code == 1 and json.loads(out)["refused"][0]["rule"] == "internal"
    code, out, err = cancho("build", src, capsys=capsys)
    assert code == 1 and "kaboom" in err


def test_invalid_ir_is_internal(src, capsys, monkeypatch):
    monkeypatch.setattr(api, "compile_sources",
                        lambda sources: CompileResult([], "define i64 @f() {\n ret i32 0\n}\n"))
    for command in ("ir", "asm", "build", "run"):
        code, out, err = cancho(command, src, capsys=capsys)
        assert code == 1, command
        assert "error: the compiler failed to generate code" in err
        assert err.rstrip("\n").endswith("[internal]")
        assert "Traceback" not in err


TYPE_ERROR_CHO = """\
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(ffi); release(fs); release(heap); release(args);
    let x: int = "hi";
    return 0;
}
"""

NO_MAIN_CHO = "fn helper() -> [] int { return 0; }\n"

BAD_EXTERN_CHO = """\
extern fn system[&c](command: &c [byte]) -> [] c_int;

fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(ffi); release(fs); release(heap); release(args);
    return 0;
}
"""


def test_text_refusal_carries_its_rule_tag(tmp_path, capsys):
    """`path:line:col: error: message [rule]`, then the source line and a caret (docs/cli.md)."""
    prog = tmp_path / "typeerr.cho"
    prog.write_text(TYPE_ERROR_CHO)
    code, out, err = cancho("check", str(prog), capsys=capsys)
    assert code == 1 and out == ""
    assert err == (
        f"{prog}:4:18: error: expected `int`, found `&static [byte]` [type-mismatch]\n"
        "  |\n"
        '4 |     let x: int = "hi";\n'
        "  |                  ^^^^\n")


def test_program_level_refusal_carries_its_rule_tag(tmp_path, capsys):
    prog = tmp_path / "nomain.cho"
    prog.write_text(NO_MAIN_CHO)
    code, out, err = cancho("check", str(prog), capsys=capsys)
    assert code == 1 and out == ""
    assert err.startswith(f"{prog}: error: no `main` function")
    assert err.endswith(" [program-shape]\n") and err.count("\n") == 1


def test_every_refusal_is_tagged_and_json_is_untouched(tmp_path, capsys):
    """Several refusals: each headline ends in its own tag, in the order JSON lists them; the
    JSON message is the bare sentence, with no tag in it."""
    prog = tmp_path / "two.cho"
    prog.write_text(TYPE_ERROR_CHO + BAD_EXTERN_CHO.replace("fn main", "fn unused", 1))
    code, out, err = cancho("check", str(prog), capsys=capsys)
    assert code == 1
    heads = [line for line in err.splitlines() if line.startswith(f"{prog}:")]
    code, out, _ = cancho("check", str(prog), "--output", "json", capsys=capsys)
    refused = json.loads(out)["refused"]
    assert code == 1 and len(heads) == len(refused) >= 2
    for head, item in zip(heads, refused):
        assert head.endswith(f": error: {item['message']} [{item['rule']}]")
        assert f"[{item['rule']}]" not in item["message"]


@pytest.mark.parametrize("command", ["check", "build", "run", "ir", "asm", "authority"])
def test_every_command_tags_its_refusals(command, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prog = tmp_path / "bad.cho"
    prog.write_text(BAD_EXTERN_CHO)
    code, out, err = cancho(command, str(prog), capsys=capsys)
    assert code == 1 and out == ""
    assert err.startswith(
        f"{prog}:1:11: error: `system` must borrow exactly one `Ffi` capability "
        "[foreign-declaration]\n")
    assert not (tmp_path / "bad").exists()


def test_authority_json_refusal_is_text_on_stderr(tmp_path, capsys):
    """`authority --output json` of a refused program fails like `check` in text mode."""
    prog = tmp_path / "typeerr.cho"
    prog.write_text(TYPE_ERROR_CHO)
    code, out, err = cancho("authority", str(prog), "--output", "json", capsys=capsys)
    assert code == 1 and out == ""
    assert err.startswith(f"{prog}:4:18: error: ") and "[type-mismatch]\n" in err


def test_authority_report_failure_is_internal_not_a_traceback(tmp_path, capsys, monkeypatch):
    from cancho_kernel.compiler import authority

    def boom(program):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(authority, "authority_report", boom)
    prog = tmp_path / "hello.cho"
    prog.write_text(HELLO_CHO)
    code, out, err = cancho("authority", str(prog), capsys=capsys)
    assert code == 1 and out == "" and "Traceback" not in err
    assert "kaboom" in err and err.rstrip("\n").endswith("[internal]")


def test_usage_text_points_at_documents_that_exist(capsys):
    code, out, _ = cancho("--help", capsys=capsys)
    assert code == 0
    for doc in ("docs/cli.md", "docs/authority-report.md"):
        assert doc in out and (REPO / doc).is_file()


def test_check_stops_after_the_checker(capsys, monkeypatch):
    """`check` is the front end only (issue 28: it used to lower and run LLVM's O2 and throw the
    object away, the cost of a whole build): nothing after the checker runs."""
    def no_codegen(*_a, **_k):
        raise AssertionError("check generated code")

    monkeypatch.setattr(api, "compile_sources", no_codegen)
    from cancho_kernel.compiler.backends import native
    monkeypatch.setattr(native, "emit_object", no_codegen)
    src = str(REPO / "examples" / "hello.cho")
    assert cancho("check", src, capsys=capsys) == (0, "", "")
    assert cancho("check", src, "--output", "json", capsys=capsys) == (
        0, '{\n  "refused": []\n}\n', "")


def test_check_success_text_and_json(capsys):
    src = str(REPO / "examples" / "hello.cho")
    assert cancho("check", src, capsys=capsys) == (0, "", "")
    assert cancho("check", src, "--output", "json", capsys=capsys) == (
        0, '{\n  "refused": []\n}\n', "")


def test_ir_and_asm(src, capsys, monkeypatch):
    monkeypatch.setattr(api, "compile_sources", lambda sources: CompileResult([], HELLO))
    code, out, _ = cancho("ir", src, capsys=capsys)
    assert code == 0 and "define" in out and "@main" in out and "target triple" in out
    code, out, _ = cancho("asm", src, capsys=capsys)
    assert code == 0 and "main:" in out


# ---------------------------------------------------------------------------------------------
# build and run, in a subprocess with hand-written IR


def run_cli(args, ir: str, tmp_path, stdout=subprocess.PIPE, env=None, shell_suffix=None):
    """`cancho ARGS` in a fresh interpreter whose compile_sources returns ``ir``."""
    (tmp_path / "fake_ir.py").write_text(f"IR = {ir!r}\n")
    code = (
        "import sys\n"
        "from cancho_kernel.compiler import api\n"
        "from fake_ir import IR\n"
        "api.compile_sources = lambda s: api.CompileResult([], IR)\n"
        "from cancho_kernel.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]))
    full_env.update(env or {})
    argv = [sys.executable, "-c", code, *args]
    if shell_suffix:
        import shlex

        argv = ["/bin/sh", "-c", " ".join(map(shlex.quote, argv)) + " " + shell_suffix]
    return subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE, env=full_env,
                          cwd=tmp_path, timeout=60)


@pytest.mark.parametrize("backend", ["jit", "exe"])
def test_run_hello(backend, src, tmp_path):
    p = run_cli(["run", src, "--backend", backend], HELLO, tmp_path)
    assert (p.returncode, p.stdout, p.stderr) == (6, b"hello\n", b"")


@pytest.mark.parametrize("backend", ["jit", "exe"])
@pytest.mark.parametrize("redirect", [">/dev/full", ">&-"])
def test_run_failed_exit_flush(backend, redirect, src, tmp_path):
    p = run_cli(["run", src, "--backend", backend], HELLO, tmp_path, shell_suffix=redirect)
    assert p.returncode == 6 and p.stderr == b""


@pytest.mark.parametrize("backend", ["jit", "exe"])
def test_run_trap_is_exit_3_with_message(backend, src, tmp_path):
    p = run_cli(["run", src, "--backend", backend], TRAP_AFTER_OUTPUT, tmp_path)
    assert p.returncode == 3 and p.stdout == b""
    assert p.stderr == b"oops\ncancho: the program was killed by signal 4 (SIGILL)\n"


@pytest.mark.parametrize("backend", ["jit", "exe"])
def test_run_passes_args_and_status(backend, src, tmp_path):
    p = run_cli(["run", src, "--backend", backend, "--", "a", "-b"], ARGV, tmp_path)
    assert (p.returncode, p.stdout) == (3, b"a\n-b\n")
    p = run_cli(["run", src, "--backend", backend], returns(300), tmp_path)
    assert p.returncode == 44


def test_run_exe_cleans_up(src, tmp_path):
    p = run_cli(["run", src, "--backend", "exe"], HELLO, tmp_path,
                env={"TMPDIR": str(tmp_path)})
    assert p.returncode == 6
    assert not list(tmp_path.glob("cancho-run-*"))


def test_build_exe_and_obj(src, tmp_path):
    p = run_cli(["build", src], HELLO, tmp_path)
    assert p.returncode == 0, p.stderr
    done = subprocess.run([str(tmp_path / "prog")], capture_output=True)
    assert (done.returncode, done.stdout) == (6, b"hello\n")
    assert not (tmp_path / "prog.o").exists()
    p = run_cli(["build", src, "--emit", "obj", "-o", "x.o"], HELLO, tmp_path)
    assert p.returncode == 0 and (tmp_path / "x.o").read_bytes()[:4] == b"\x7fELF"


def test_build_without_cc_is_environment(src, tmp_path):
    p = run_cli(["build", src], HELLO, tmp_path, env={"CC": "/nonexistent/cc"})
    assert p.returncode == 3
    assert b"cannot run the linker `/nonexistent/cc`" in p.stderr
    p = run_cli(["run", src, "--backend", "exe"], HELLO, tmp_path, env={"CC": "/nonexistent/cc"})
    assert p.returncode == 3


def test_end_to_end_through_the_front_end(tmp_path):
    """The real compiler, both backends (depends on the front end being able to compile it)."""
    prog = tmp_path / "hello.cho"
    prog.write_text(HELLO_CHO)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    check = subprocess.run([sys.executable, "-m", "cancho_kernel.cli", "check", str(prog)],
                           capture_output=True, env=env, timeout=60)
    assert check.returncode == 0, check.stderr[:400]
    for backend in ("jit", "exe"):
        p = subprocess.run([sys.executable, "-m", "cancho_kernel.cli", "run", str(prog),
                            "--backend", backend], capture_output=True, env=env, timeout=60)
        assert (p.returncode, p.stdout, p.stderr) == (6, b"hello\n", b"")


# ---------------------------------------------------------------------------------------------
# the user documents' examples are this CLI's real output

DOCS_WITH_EXAMPLES = ("docs/cli.md", "docs/authority-report.md", "docs/foreign-authority.md")
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```$", re.M | re.S)


def doc_examples(doc: str) -> tuple[dict[str, str], list[tuple[list[str], str]]]:
    """A document's programs (```cancho file=NAME) and commands with their shown output
    (```text cancho ARGS... or ```json cancho ARGS...)."""
    files: dict[str, str] = {}
    commands: list[tuple[list[str], str]] = []
    for lang, info, body in FENCE.findall((REPO / doc).read_text()):
        words = info.split()
        if lang == "cancho" and words and words[0].startswith("file="):
            files[words[0].removeprefix("file=")] = body
        elif lang in ("text", "json") and words[:1] == ["cancho"]:
            commands.append((words[1:], body))
    return files, commands


@pytest.mark.parametrize("doc", DOCS_WITH_EXAMPLES)
def test_documented_output_is_what_the_cli_prints(doc, tmp_path, capsys, monkeypatch):
    files, commands = doc_examples(doc)
    assert files and commands, f"{doc} lost its checked examples"
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    for args, shown in commands:
        code, out, err = cancho(*args, capsys=capsys)
        assert out + err == shown, f"{doc}: `cancho {' '.join(args)}` printed\n{out}{err}"
        assert code == (1 if args[0] == "check" else 0)


def test_cli_doc_lists_every_rule_tag():
    from cancho_kernel.compiler.diagnostics import RULES

    text = (REPO / "docs/cli.md").read_text()
    listed = set(re.findall(r"`([a-z]+(?:-[a-z]+)*)`", text.split("## Rule tags", 1)[1]))
    assert set(RULES) <= listed, sorted(set(RULES) - listed)
