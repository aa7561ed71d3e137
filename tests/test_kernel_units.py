"""The kernel's parts without a kernel process: the session model, directive parsing, completion,
inspection, is_complete, the Pygments lexer and the kernelspec files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cancho_kernel.kernel import completion, directives
from cancho_kernel.kernel.session import Session

ROOT = Path(__file__).resolve().parents[1]


def check(session: Session, text: str, compile: bool = False, offset: int = 0):
    out = session.process(session.new_source(text, offset), compile=compile)
    session.commit(out)
    return out


# -- session -------------------------------------------------------------------------------------


def test_items_persist_and_replace():
    s = Session()
    a = check(s, "fn f(x: int) -> [] int { return x; }")
    assert a.ok and [i.header() for i in a.defined] == ["fn f(x: int) -> [] int"] and not a.replaced
    b = check(s, "fn f(x: int) -> [] int { return x + 1; }")
    assert b.ok and b.replaced == ["f"]
    run = check(s, "fn main(world: World) -> [] int { release(world); return f(1); }", compile=True)
    assert run.ok and run.has_main and run.ir
    assert list(s.items) == [("", "f")]  # main is not a session item
    assert s.last_main is not None


def test_duplicate_inside_one_cell_is_still_refused():
    s = Session()
    out = check(s, "fn f() -> [] int { return 1; }\nfn f() -> [] int { return 2; }")
    assert [d.rule for d in out.diagnostics] == ["duplicate-declaration"]
    assert not s.items


def test_refused_cell_changes_nothing():
    s = Session()
    check(s, "fn f() -> [] int { return 1; }")
    before = dict(s.items)
    out = check(s, "fn f() -> [] int { return nope; }\nfn g() -> [] int { return 2; }")
    assert not out.ok
    assert s.items == before


def test_diagnostics_point_into_the_cell_with_offset():
    s = Session()
    out = check(s, "fn f() -> [] int {\n    return nope;\n}", offset=2)
    d = out.diagnostics[0]
    assert (d.span.source.path, d.span.line, d.span.column) == ("cell[1]", 4, 12)


def test_a_cell_that_breaks_an_older_item_is_refused_and_points_at_it():
    s = Session()
    check(s, "fn f(x: int) -> [] int { return x; }")
    check(s, "fn g() -> [] int { return f(1); }")
    out = check(s, "fn f(x: int, y: int) -> [] int { return x + y; }")
    assert not out.ok and out.diagnostics[0].span.source.path == "cell[2]"
    assert s.find("f").header() == "fn f(x: int) -> [] int"


def test_edition_line_persists():
    s = Session()
    out = check(s, "edition 5;")
    assert out.ok and s.edition == 5
    assert check(s, "fn f() -> [] int { return 1; }").defined[0].edition == 5


def test_reset():
    s = Session()
    check(s, "fn f() -> [] int { return 1; }")
    s.reset()
    assert not s.items and s.edition == 1 and s.last_main is None


# -- directives ---------------------------------------------------------------------------------------


def test_header_parsing_keeps_line_numbers():
    h = directives.parse_header("%backend exe\n\n# NBVAL_IGNORE_OUTPUT\n%%run --stdout closed\nfn f() {}\n")
    assert h.lines == [("%backend", "exe")]
    assert h.cell == ("%%run", "--stdout closed")
    assert h.body.line_offset == 4 and h.body.text.startswith("fn f()")


def test_unknown_directive_names_the_known_ones():
    with pytest.raises(directives.DirectiveError) as e:
        directives.parse_header("%%nonsense\n")
    for name in ("%%run", "%%check", "%%refused", "%%ir", "%%asm", "%who", "%reset", "%load", "%%file", "%backend"):
        assert name in str(e.value)


def test_two_cell_directives_are_refused():
    with pytest.raises(directives.DirectiveError):
        directives.parse_header("%%run\n%%check\n")


def test_run_options():
    s = directives.Settings()
    o = directives.parse_run_options(
        "--backend exe --stdout broken-pipe:3 --stdin 'a\\nb' --args x 'y z' --timeout 2 --max-output 64k "
        "--memory 1G --expect-signal PIPE", s)
    assert o.backend == "exe" and o.target.kind.value == "broken-pipe" and o.target.broken_after == 3
    assert o.stdin == b"a\nb" and o.args == ["x", "y z"]
    assert (o.limits.timeout, o.limits.max_output, o.limits.memory) == (2.0, 65536, 1 << 30)
    assert o.expect_signal == 13
    d = directives.parse_run_options("", s)
    assert (d.backend, d.limits.timeout, d.limits.max_output) == ("jit", 30.0, 1 << 20)
    for bad in ("--backend gcc", "--stdout /dev/nope", "--timeout soon", "--expect-signal SIGNOPE",
                "--expect-status 1 --expect-trap", "--frobnicate"):
        with pytest.raises(directives.DirectiveError):
            directives.parse_run_options(bad, s)


# -- completion, inspection, is_complete ---------------------------------------------------------------


def test_completion_by_edition_and_session():
    s = Session()
    check(s, "fn flush_mine() -> [] int { return 1; }")
    m = completion.complete("flush", 5, s)["matches"]
    assert m == ["flush_mine"]  # flush_out is edition 5
    m = completion.complete("edition 5;\nflush", 16, s)["matches"]
    assert m == ["flush_mine", "flush_out"]
    assert completion.complete("%%r", 3, s)["matches"] == ["%%refused", "%%run"]


def test_inspect_builtin_and_item():
    s = Session()
    check(s, "fn twice[&i](io: &!i Io, c: int) -> [io_write] int { putchar(io, c); putchar(io, c); return 0; }")
    r = completion.inspect("putchar", 3, s)
    assert r["found"] and "-> [io_write] int" in r["data"]["text/plain"]
    r = completion.inspect("x = twice(i, 1)", 6, s)
    assert r["found"] and r["data"]["text/plain"].startswith("fn twice[&i](io: &!i Io, c: int) -> [io_write] int")
    assert r["data"]["text/plain"].endswith("fn `twice`, defined at cell[1]:1")
    assert not completion.inspect("zzz", 1, s)["found"]


@pytest.mark.parametrize("code,status", [
    ("fn f() -> [] int { return 1; }", "complete"),
    ("fn f() -> [] int {", "incomplete"),
    ("fn f() -> [] int { return 1; }}", "invalid"),
    ("// { in a comment", "complete"),
    ("let s = \"}\";", "complete"),
    ("let c = '(';", "complete"),
    ("%%run --args (", "complete"),
    ("(]", "invalid"),
])
def test_is_complete(code, status):
    assert completion.is_complete(code)["status"] == status


# -- lexer and kernelspec ------------------------------------------------------------------------------


def test_pygments_lexer_is_registered_and_highlights():
    from pygments.lexers import get_lexer_by_name
    from pygments.token import Comment, Keyword, Name, String

    lexer = get_lexer_by_name("cancho")
    toks = list(lexer.get_tokens((ROOT / "examples" / "hello.cho").read_text()))
    kinds = {t for t, _ in toks}
    assert Keyword in kinds and Comment.Single in kinds and String in kinds and Name.Builtin in kinds
    assert Comment.Preproc in {t for t, _ in lexer.get_tokens("%%run --stdout closed\nfn f() {}\n")}


def test_kernelspec_files():
    spec = json.loads((ROOT / "cancho_kernel" / "kernelspec" / "kernel.json").read_text())
    assert spec["argv"][:3] == ["python", "-m", "cancho_kernel"] and "{connection_file}" in spec["argv"]
    assert spec["interrupt_mode"] == "signal" and spec["language"] == "cancho"
    for name in ("logo-32x32.png", "logo-64x64.png", "logo-svg.svg"):
        assert (ROOT / "cancho_kernel" / "kernelspec" / name).stat().st_size > 0
    assert (ROOT / "cancho_kernel" / "kernelspec" / "logo-64x64.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_one_kernelspec_and_its_safe_variant():
    """The spec exists once (package data); the installer and the hub's safe spec derive from it."""
    from cancho_kernel import install
    assert install.KERNEL_JSON == json.loads((install.SPEC_DIR / "kernel.json").read_text())
    safe = install.safe_spec("/py")
    assert safe["argv"][:4] == ["/py", "-I", "-m", "cancho_kernel"] and safe["argv"][-1] == "--CanchoKernel.safe_mode=True"
    assert safe["env"] == {"PYTHONSAFEPATH": "1", "CANCHO_SAFE": "1"}
    assert install.KERNEL_JSON["argv"][1] == "-m"  # the plain spec is not changed by deriving the safe one


def test_program_arguments_that_start_with_a_dash_go_after_a_double_dash():
    """`cut -d, -f2` in a cell: `%%run --args -d, -f2` read `-d,` as an option of %%run and
    refused the cell; everything after `--` is the program's, and the refusal says so."""
    from cancho_kernel.kernel.bench import parse_bench_options
    from cancho_kernel.kernel.options import DirectiveError, Settings, parse_run_options

    s = Settings()
    assert parse_run_options("--timeout 5 -- -d, -f2", s).args == ["-d,", "-f2"]
    assert parse_run_options("--args a -- -d, --timeout", s).args == ["a", "-d,", "--timeout"]
    assert parse_run_options("--args first 'second arg' --timeout 10", s).args == ["first", "second arg"]
    with pytest.raises(DirectiveError, match=r"after `--`"):
        parse_run_options("--args -d, -f2", s)

    class Ctx:
        settings = s
    assert parse_bench_options("prog -- -n 3", Ctx(), cell=False).args == ["-n", "3"]
